//! One collective call as every engine sees it: the descriptor ([`Collective`]), the argument
//! checks made before anything is queued, the memory the call touches on this rank (for the
//! rule of groups), and the words ranks compare to agree that they make the same call.

use super::{check_len, check_rank};
use crate::{DataType, Error, ReduceOp, Result};

/// What a collective does, with the arguments that choose it (NCCL's calls, one to one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// `recv[..count] = op over ranks of send[..count]`, on every rank.
    AllReduce {
        /// The reduction.
        op: ReduceOp,
    },
    /// `recv[..count] = root's send[..count]` on every rank (`send` is read on the root only).
    Broadcast {
        /// The rank whose data every rank receives.
        root: usize,
    },
    /// Like `AllReduce`, but only `root`'s `recv` is written (and read on the root only).
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The rank that receives the result.
        root: usize,
    },
    /// `recv[r * count..][..count] = rank r's send[..count]` (`recv` holds `count * nranks`).
    /// In place (one buffer), this rank's part is read from `recv[rank * count..]`.
    AllGather,
    /// `recv[..count] = op over ranks of send[rank * count..][..count]` (`send` holds
    /// `count * nranks`).
    ReduceScatter {
        /// The reduction.
        op: ReduceOp,
    },
    /// `recv[r * count..][..count] = rank r's send[rank * count..][..count]` (both hold
    /// `count * nranks`).
    AllToAll,
    /// Sends `send[..count]` to `peer` (matched in order with `peer`'s receives from here).
    Send {
        /// The receiving rank.
        peer: usize,
    },
    /// Receives `count` elements into `recv` from `peer`.
    Recv {
        /// The sending rank.
        peer: usize,
    },
}

impl CallKind {
    /// The call's name (`"all_reduce"`, ...), as errors name it.
    pub const fn name(&self) -> &'static str {
        match self {
            CallKind::AllReduce { .. } => "all_reduce",
            CallKind::Broadcast { .. } => "broadcast",
            CallKind::Reduce { .. } => "reduce",
            CallKind::AllGather => "all_gather",
            CallKind::ReduceScatter { .. } => "reduce_scatter",
            CallKind::AllToAll => "all_to_all",
            CallKind::Send { .. } => "send",
            CallKind::Recv { .. } => "recv",
        }
    }

    /// A stable small code, 1 to 8 (for wire formats).
    pub const fn code(&self) -> u8 {
        match self {
            CallKind::AllReduce { .. } => 1,
            CallKind::Broadcast { .. } => 2,
            CallKind::Reduce { .. } => 3,
            CallKind::AllGather => 4,
            CallKind::ReduceScatter { .. } => 5,
            CallKind::AllToAll => 6,
            CallKind::Send { .. } => 7,
            CallKind::Recv { .. } => 8,
        }
    }

    /// The reduction, for the kinds that reduce.
    pub const fn reduction(&self) -> Option<ReduceOp> {
        match *self {
            CallKind::AllReduce { op }
            | CallKind::Reduce { op, .. }
            | CallKind::ReduceScatter { op } => Some(op),
            _ => None,
        }
    }

    /// The root, for `Broadcast` and `Reduce`.
    pub const fn root(&self) -> Option<usize> {
        match *self {
            CallKind::Broadcast { root } | CallKind::Reduce { root, .. } => Some(root),
            _ => None,
        }
    }

    /// The peer, for `Send` and `Recv`.
    pub const fn peer(&self) -> Option<usize> {
        match *self {
            CallKind::Send { peer } | CallKind::Recv { peer } => Some(peer),
            _ => None,
        }
    }

    /// Whether the kind is one of NCCL's eight calls above, which every engine maps one to one
    /// onto its library. A kind added later answers `false`, so an engine that has not
    /// learned it refuses it with `Error::Unsupported` instead of guessing.
    pub const fn is_nccl_call(&self) -> bool {
        matches!(
            self,
            CallKind::AllReduce { .. }
                | CallKind::Broadcast { .. }
                | CallKind::Reduce { .. }
                | CallKind::AllGather
                | CallKind::ReduceScatter { .. }
                | CallKind::AllToAll
                | CallKind::Send { .. }
                | CallKind::Recv { .. }
        )
    }

    /// Whether the call is a point-to-point one (`Send` or `Recv`), whose one buffer is its
    /// send buffer (`Send`) or its receive buffer (`Recv`).
    pub const fn is_point_to_point(&self) -> bool {
        matches!(self, CallKind::Send { .. } | CallKind::Recv { .. })
    }
}

/// One collective call: what it does, on how many elements (per rank, as in NCCL) of which
/// type. Engines take it whole ([`DeviceCommunicator::collective`](super::DeviceCommunicator::collective)),
/// check it with [`check`](Self::check), and keep only the mapping onto their library.
///
/// ```
/// use devstream_core::comm::{CallKind, Collective};
/// use devstream_core::{DataType, ReduceOp};
/// let call = Collective::new(CallKind::AllGather, 4, DataType::F32);
/// // Rank 1 of 2: sends 16 bytes, receives 32.
/// assert_eq!(call.check(1, 2, 16, 32).unwrap(), 16);
/// assert!(call.check(1, 2, 16, 31).is_err());
/// let reduce = Collective::new(CallKind::Reduce { op: ReduceOp::Sum, root: 2 }, 1, DataType::I32);
/// assert!(reduce.check(0, 2, 4, 4).is_err()); // no rank 2 among 2
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Collective {
    /// What the call does.
    pub kind: CallKind,
    /// Elements per rank.
    pub count: usize,
    /// Element type.
    pub dtype: DataType,
}

impl Collective {
    /// The call `kind` of `count` elements of `dtype` per rank.
    pub const fn new(kind: CallKind, count: usize, dtype: DataType) -> Collective {
        Collective { kind, count, dtype }
    }

    /// The call's name (`"all_reduce"`, ...).
    pub const fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Bytes of one rank's block (`count` elements), or `Error::InvalidArgument` when that
    /// overflows.
    pub fn bytes(&self) -> Result<usize> {
        self.dtype.bytes(self.name(), self.count)
    }

    /// The bytes the call reads from its send buffer and writes to its receive buffer on
    /// `rank` of `nranks` (NCCL's layout), from the block size `bytes`.
    fn needs(&self, rank: usize, nranks: usize, bytes: usize) -> Result<(usize, usize)> {
        let name = self.name();
        let all = || {
            bytes.checked_mul(nranks).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{name}: {} elements × {nranks} ranks overflow the address space",
                    self.count
                ))
            })
        };
        let on_root = |root: usize| if rank == root { bytes } else { 0 };
        Ok(match self.kind {
            CallKind::AllReduce { .. } => (bytes, bytes),
            CallKind::Broadcast { root } => (on_root(root), bytes),
            CallKind::Reduce { root, .. } => (bytes, on_root(root)),
            CallKind::AllGather => (bytes, all()?),
            CallKind::ReduceScatter { .. } => (all()?, bytes),
            CallKind::AllToAll => (all()?, all()?),
            CallKind::Send { .. } => (bytes, 0),
            CallKind::Recv { .. } => (0, bytes),
        })
    }

    /// The checks every engine makes before anything is queued, on `rank` of `nranks` with a
    /// send buffer of `send_len` bytes and a receive buffer of `recv_len` bytes:
    /// `Error::InvalidArgument` for a root or peer that is not a rank, a size that overflows,
    /// or a buffer smaller than the call reads or writes there (the root's buffers only where
    /// only the root uses them). Returns the bytes of one rank's block.
    pub fn check(
        &self,
        rank: usize,
        nranks: usize,
        send_len: usize,
        recv_len: usize,
    ) -> Result<usize> {
        let name = self.name();
        if let Some(root) = self.kind.root() {
            check_rank(name, "root", root, nranks)?;
        }
        if let Some(peer) = self.kind.peer() {
            check_rank(name, "peer", peer, nranks)?;
        }
        let bytes = self.bytes()?;
        let (send, recv) = self.needs(rank, nranks, bytes)?;
        if !matches!(self.kind, CallKind::Recv { .. }) {
            check_len(name, "send", send_len, send)?;
        }
        if !matches!(self.kind, CallKind::Send { .. }) {
            check_len(name, "receive", recv_len, recv)?;
        }
        Ok(bytes)
    }

    /// What the call reads and writes on `rank` of `nranks`; `send` and `recv` are where its
    /// buffers lie (the same region for a point-to-point call's one buffer). Follows NCCL's
    /// buffer layout: an in-place `all_gather` reads `recv[rank * bytes..]`. A call whose size
    /// overflows touches nothing (it is refused by [`check`](Self::check)).
    ///
    /// ```
    /// use devstream_core::comm::{CallKind, Collective, Region};
    /// use devstream_core::{DataType, ReduceOp};
    /// let buf = Region { space: 7, offset: 0 };
    /// let call = Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 4, DataType::F32);
    /// let touched = call.accesses(0, 2, buf, buf);
    /// assert_eq!(touched.len(), 2); // reads and writes the same 16 bytes
    /// assert!(touched[0].conflicts(&touched[1]));
    /// ```
    pub fn accesses(&self, rank: usize, nranks: usize, send: Region, recv: Region) -> Vec<Access> {
        let bytes = self.count.saturating_mul(self.dtype.size());
        if bytes == 0 {
            return Vec::new();
        }
        let all = bytes.saturating_mul(nranks) as u64;
        let bytes = bytes as u64;
        let at = |region: Region, from: u64, len: u64, writes: bool| Access {
            space: region.space,
            start: region.offset.saturating_add(from),
            len,
            writes,
        };
        let (read, written) = match self.kind {
            CallKind::AllReduce { .. } => (
                Some(at(send, 0, bytes, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::Broadcast { root } => (
                (rank == root).then(|| at(send, 0, bytes, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::Reduce { root, .. } => (
                Some(at(send, 0, bytes, false)),
                (rank == root).then(|| at(recv, 0, bytes, true)),
            ),
            CallKind::AllGather => {
                let read = if send == recv {
                    at(recv, rank as u64 * bytes, bytes, false)
                } else {
                    at(send, 0, bytes, false)
                };
                (Some(read), Some(at(recv, 0, all, true)))
            }
            CallKind::ReduceScatter { .. } => (
                Some(at(send, 0, all, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::AllToAll => (Some(at(send, 0, all, false)), Some(at(recv, 0, all, true))),
            CallKind::Send { .. } => (Some(at(send, 0, bytes, false)), None),
            CallKind::Recv { .. } => (None, Some(at(recv, 0, bytes, true))),
        };
        read.into_iter().chain(written).collect()
    }

    /// The words ranks compare before they exchange data: kind, reduction, type, root and
    /// count, with `phase` (0 for the call itself; an engine that runs a call in several
    /// phases numbers the later ones from 1) and `group` (the number of collectives of the
    /// group the call belongs to, 0 or 1 outside a group: a group of another size disagrees
    /// at its first collective already). Every argument that changes what a rank sends or
    /// receives is in it, so ranks whose signatures are equal make the same call.
    pub fn signature(&self, phase: u8, group: u64) -> Signature {
        let op = match (phase, self.kind.reduction()) {
            (0, Some(op)) => u64::from(op.code()),
            _ => 0,
        };
        let kind = u64::from(self.kind.code()) + 8 * u64::from(phase);
        Signature {
            desc: (group << 24) | (u64::from(self.dtype.code()) << 16) | (op << 8) | kind,
            root: self.kind.root().unwrap_or(0) as u64,
            count: self.count as u64,
        }
    }
}

/// A call as ranks compare it (see [`Collective::signature`]): three words, for a wire or a
/// shared-memory slot. `desc` is `kind + 8 * phase | reduction << 8 | type << 16 | group << 24`.
///
/// ```
/// use devstream_core::comm::{CallKind, Collective};
/// use devstream_core::{DataType, ReduceOp};
/// let call = Collective::new(CallKind::Reduce { op: ReduceOp::Prod, root: 3 }, 7, DataType::I32);
/// assert_eq!(
///     call.signature(0, 3).describe(),
///     "reduce(i32, prod, root 3) of 7 elements in a group of 3 collectives"
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Signature {
    /// Kind, phase, reduction, type and group size.
    pub desc: u64,
    /// The root (0 for kinds without one).
    pub root: u64,
    /// Elements per rank.
    pub count: u64,
}

impl Signature {
    /// A readable form, for mismatch errors (`"all_reduce(f32, sum) of 4 elements"`).
    pub fn describe(&self) -> String {
        const NAMES: [&str; 8] = [
            "all_reduce",
            "broadcast",
            "reduce",
            "all_gather",
            "reduce_scatter",
            "all_to_all",
            "send",
            "recv",
        ];
        let desc = self.desc;
        let kind = match (desc & 0xff) as usize {
            0 => "?",
            code => NAMES.get((code - 1) % 8).copied().unwrap_or("?"),
        };
        let op = ReduceOp::from_code(((desc >> 8) & 0xff) as u8);
        let dtype = DataType::from_code(((desc >> 16) & 0xff) as u8)
            .map_or_else(|| "?".to_string(), |t| t.to_string());
        let group = desc >> 24;
        let (root, count) = (self.root, self.count);
        let call = match (kind, op) {
            ("broadcast", _) => format!("broadcast({dtype}, root {root})"),
            ("reduce", Some(op)) => format!("reduce({dtype}, {op}, root {root})"),
            (kind, Some(op)) => format!("{kind}({dtype}, {op})"),
            (kind, None) => format!("{kind}({dtype})"),
        };
        match group {
            0 | 1 => format!("{call} of {count} elements"),
            _ => format!("{call} of {count} elements in a group of {group} collectives"),
        }
    }
}

/// Where a buffer lies: the allocation it belongs to (`space`, any id the backend keeps unique
/// among live buffers, or a whole address space) and its first byte's offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// The allocation (or address space).
    pub space: u64,
    /// The buffer's first byte in it.
    pub offset: u64,
}

/// Bytes one call reads or writes: `len` bytes from `start` in `space`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// The allocation (or address space).
    pub space: u64,
    /// The first byte.
    pub start: u64,
    /// Number of bytes.
    pub len: u64,
    /// Whether the call writes them (else it reads them).
    pub writes: bool,
}

impl Access {
    /// Whether the two touch a common byte and at least one writes it.
    pub fn conflicts(&self, other: &Access) -> bool {
        self.space == other.space
            && (self.writes || other.writes)
            && self.start < other.start.saturating_add(other.len)
            && other.start < self.start.saturating_add(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_differ_in_every_argument_that_matters() {
        let base = Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 4, DataType::F32);
        let others = [
            Collective::new(CallKind::AllReduce { op: ReduceOp::Max }, 4, DataType::F32),
            Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 5, DataType::F32),
            Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 4, DataType::I32),
            Collective::new(
                CallKind::Reduce {
                    op: ReduceOp::Sum,
                    root: 0,
                },
                4,
                DataType::F32,
            ),
        ];
        for other in others {
            assert_ne!(base.signature(0, 1), other.signature(0, 1), "{other:?}");
        }
        assert_ne!(base.signature(0, 1), base.signature(0, 2));
        assert_ne!(base.signature(0, 1), base.signature(1, 1));
        let root = |root| Collective::new(CallKind::Broadcast { root }, 4, DataType::F32);
        assert_ne!(root(0).signature(0, 1), root(1).signature(0, 1));
        assert_eq!(
            base.signature(1, 0).describe(),
            "all_reduce(f32) of 4 elements"
        );
    }

    #[test]
    fn point_to_point_checks_only_its_buffer() {
        let send = Collective::new(CallKind::Send { peer: 1 }, 2, DataType::I64);
        assert_eq!(send.check(0, 2, 16, 0).unwrap(), 16);
        assert!(send.check(0, 2, 15, 1 << 20).is_err());
        let recv = Collective::new(CallKind::Recv { peer: 2 }, 2, DataType::I64);
        assert!(recv.check(0, 2, 16, 16).is_err());
    }
}
