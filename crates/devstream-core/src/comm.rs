//! Collectives: element types, reductions, the communicator id and the backend traits.
//!
//! A collective (all-reduce, broadcast, ...) is stream work like a copy: it runs in its stream's
//! order, events recorded after it complete after it, a `wait_event` before it holds it back,
//! the buffers it uses stay alive until it is done, and it can be captured. The model is NCCL's
//! (`ncclAllReduce(send, recv, count, type, op, comm, stream)`, `ncclGroupStart/End`), which
//! RCCL and Paddle's custom-device `xccl_*` functions share, so a backend wraps its library's
//! calls one to one through [`DeviceCommunicator`] and [`CommBackend`].
//!
//! ```
//! use devstream_core::{DataType, ReduceOp};
//! assert_eq!(DataType::BF16.size(), 2);
//! assert_eq!(ReduceOp::Avg.to_string(), "avg");
//! assert_eq!(ReduceOp::Avg.apply_i64(&[7, 8], 2), 7); // (7 + 8) / 2, truncated
//! ```

use crate::{DeviceBackend, DeviceStream, Error, Place, Result};
use std::fmt;

/// Element type of a collective's buffers (NCCL's `ncclDataType_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary64.
    F64,
    /// IEEE-754 binary16.
    F16,
    /// bfloat16 (the upper half of an `f32`).
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned byte.
    U8,
}

impl DataType {
    /// Every element type.
    pub const ALL: [DataType; 7] = [
        DataType::F32,
        DataType::F64,
        DataType::F16,
        DataType::BF16,
        DataType::I32,
        DataType::I64,
        DataType::U8,
    ];

    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(devstream_core::DataType::F64.size(), 8);
    /// ```
    pub const fn size(self) -> usize {
        match self {
            DataType::F32 | DataType::I32 => 4,
            DataType::F64 | DataType::I64 => 8,
            DataType::F16 | DataType::BF16 => 2,
            DataType::U8 => 1,
        }
    }

    /// Whether the type is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DataType::F32 | DataType::F64 | DataType::F16 | DataType::BF16
        )
    }

    /// `count` elements in bytes, or `Error::InvalidArgument` when that overflows.
    ///
    /// ```
    /// use devstream_core::DataType;
    /// assert_eq!(DataType::I32.bytes("all_reduce", 3).unwrap(), 12);
    /// assert!(DataType::I32.bytes("all_reduce", usize::MAX).is_err());
    /// ```
    pub fn bytes(self, op: &'static str, count: usize) -> Result<usize> {
        count.checked_mul(self.size()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{op}: {count} elements of {self} overflow the address space"
            ))
        })
    }

    /// A stable small code (for wire formats).
    pub const fn code(self) -> u8 {
        match self {
            DataType::F32 => 1,
            DataType::F64 => 2,
            DataType::F16 => 3,
            DataType::BF16 => 4,
            DataType::I32 => 5,
            DataType::I64 => 6,
            DataType::U8 => 7,
        }
    }

    /// The type of a [`code`](Self::code).
    pub fn from_code(code: u8) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| t.code() == code)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::F16 => "f16",
            DataType::BF16 => "bf16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
        })
    }
}

/// A reduction (NCCL's `ncclRedOp_t`).
///
/// Integer `Sum` and `Prod` wrap around in the element type (as NCCL's do). `Avg` is the sum
/// divided by the number of ranks: on integers the sum wraps in the element type and the
/// quotient is truncated toward zero (NCCL's rule); floats are divided after summing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Avg,
    ];

    /// A stable small code (for wire formats).
    pub const fn code(self) -> u8 {
        match self {
            ReduceOp::Sum => 1,
            ReduceOp::Prod => 2,
            ReduceOp::Min => 3,
            ReduceOp::Max => 4,
            ReduceOp::Avg => 5,
        }
    }

    /// The reduction of a [`code`](Self::code).
    pub fn from_code(code: u8) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.code() == code)
    }

    /// The reference result on 64-bit integers, in rank order (wrapping; `Avg` truncates).
    /// Backends' integer results equal this computed in their element type.
    pub fn apply_i64(self, values: &[i64], nranks: usize) -> i64 {
        let mut it = values.iter().copied();
        let first = it.next().unwrap_or(0);
        let folded = it.fold(first, |a, b| match self {
            ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
            ReduceOp::Prod => a.wrapping_mul(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::Max => a.max(b),
        });
        if self == ReduceOp::Avg {
            folded.wrapping_div(nranks.max(1) as i64)
        } else {
            folded
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Avg => "avg",
        })
    }
}

/// Why a collective failed ([`Error::Comm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommFailure {
    /// A peer's process exited (or was killed) before taking part.
    PeerDied,
    /// A peer's communicator was dropped (or aborted) before taking part.
    PeerLeft,
    /// The collective did not complete within the communicator's deadline.
    Timeout,
    /// Ranks called different collectives, or with different types, counts, reductions or
    /// roots, at the same position in their sequence (or grouped them differently); a
    /// message of another type or count than its receive expects.
    Mismatch,
    /// The communicator had already failed (here or on another rank); make a new one.
    Aborted,
    /// The transport itself failed (shared memory, files).
    Transport,
}

impl fmt::Display for CommFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CommFailure::PeerDied => "a peer process died",
            CommFailure::PeerLeft => "a peer left the communicator",
            CommFailure::Timeout => "deadline exceeded",
            CommFailure::Mismatch => "ranks disagree",
            CommFailure::Aborted => "the communicator failed earlier",
            CommFailure::Transport => "transport failure",
        })
    }
}

/// Number of bytes in a [`UniqueId`] (NCCL's `NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// The bytes that name one communicator: made by one rank, sent to the others by whatever
/// means the framework has (a file, a socket, a key-value store), and passed to every rank's
/// `init`. Opaque: only the backend that made it reads it.
///
/// ```
/// use devstream_core::UniqueId;
/// let id = UniqueId::from_raw([7; 128]);
/// let again = UniqueId::from_bytes(id.as_bytes()).unwrap();
/// assert_eq!(id, again);
/// assert!(UniqueId::from_bytes(&[1, 2, 3]).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId([u8; UNIQUE_ID_BYTES]);

impl UniqueId {
    /// Wraps raw bytes (a backend's own format).
    pub const fn from_raw(bytes: [u8; UNIQUE_ID_BYTES]) -> UniqueId {
        UniqueId(bytes)
    }

    /// The bytes to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        &self.0
    }

    /// The id from bytes another rank sent (`Error::InvalidArgument` unless exactly
    /// [`UNIQUE_ID_BYTES`] long).
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let raw: [u8; UNIQUE_ID_BYTES] = bytes.try_into().map_err(|_| {
            Error::InvalidArgument(format!(
                "a unique id is {UNIQUE_ID_BYTES} bytes, got {}",
                bytes.len()
            ))
        })?;
        Ok(UniqueId(raw))
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId(")?;
        for byte in &self.0[..16] {
            write!(f, "{byte:02x}")?;
        }
        write!(f, "..)")
    }
}

/// A communicator of one backend: one rank of a group of `nranks`, NCCL's `ncclComm_t`.
///
/// Each collective is queued on `stream` like a copy and returns at once; argument errors
/// (a buffer smaller than `count * dtype.size()`, a root or peer ≥ `nranks`, a stream of
/// another place) are returned before anything is queued; failures of the collective itself
/// (a dead peer, a deadline, a mismatch between ranks) surface from the stream's
/// `synchronize` as [`Error::Comm`].
///
/// Buffer sizes follow NCCL, with `count` the per-rank element count: `all_gather` receives
/// `count * nranks`, `reduce_scatter` sends `count * nranks`, `all_to_all` sends and receives
/// `count` elements per peer (`count * nranks` in all). `send` and `recv` are matched in order
/// per pair of ranks. Every method not overridden answers `Error::Unsupported`, so a partial
/// engine (an `xccl` plug-in without `all_to_all`) fits.
#[allow(clippy::too_many_arguments)]
pub trait DeviceCommunicator: Clone + fmt::Debug + Send + Sync + 'static {
    /// The stream type its collectives are queued on.
    type Stream: DeviceStream;

    /// The communicator's place.
    fn place(&self) -> &Place;
    /// This rank, `0..nranks`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn nranks(&self) -> usize;

    /// `recv[i] = op over ranks of send[i]` for `i < count`, on every rank.
    fn all_reduce(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype, op);
        Err(Error::unsupported("all_reduce", self.place()))
    }

    /// `recv = root's send` on every rank (`send` is read on the root only).
    fn broadcast(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        root: usize,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype, root);
        Err(Error::unsupported("broadcast", self.place()))
    }

    /// Like `all_reduce`, but only `root`'s `recv` is written.
    fn reduce(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype, op, root);
        Err(Error::unsupported("reduce", self.place()))
    }

    /// `recv[r * count..][..count] = rank r's send[..count]`.
    fn all_gather(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype);
        Err(Error::unsupported("all_gather", self.place()))
    }

    /// `recv[..count] = op over ranks of send[rank * count..][..count]`.
    fn reduce_scatter(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype, op);
        Err(Error::unsupported("reduce_scatter", self.place()))
    }

    /// `recv[r * count..][..count] = rank r's send[rank * count..][..count]`.
    fn all_to_all(
        &self,
        stream: &Self::Stream,
        send: &<Self::Stream as DeviceStream>::Buffer,
        recv: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let _ = (stream, send, recv, count, dtype);
        Err(Error::unsupported("all_to_all", self.place()))
    }

    /// Sends `count` elements of `buf` to `peer` (matched with `peer`'s next `recv` from here).
    fn send(
        &self,
        stream: &Self::Stream,
        buf: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let _ = (stream, buf, count, dtype, peer);
        Err(Error::unsupported("send", self.place()))
    }

    /// Receives `count` elements into `buf` from `peer`.
    fn recv(
        &self,
        stream: &Self::Stream,
        buf: &<Self::Stream as DeviceStream>::Buffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let _ = (stream, buf, count, dtype, peer);
        Err(Error::unsupported("recv", self.place()))
    }

    /// Starts a group (`ncclGroupStart`): calls until the matching `group_end` are queued
    /// together, so that they cannot wait for each other. Their order is undefined: a call
    /// that writes memory another call of the open group reads or writes (or reads memory
    /// another writes) is refused with `Error::InvalidArgument` ([`GroupMemory`]).
    fn group_start(&self) -> Result<()> {
        Err(Error::unsupported("group_start", self.place()))
    }

    /// Ends a group (`ncclGroupEnd`) and queues its calls.
    fn group_end(&self) -> Result<()> {
        Err(Error::unsupported("group_end", self.place()))
    }
}

/// A backend with a collectives engine (NCCL's `ncclGetUniqueId` / `ncclCommInitRank`).
pub trait CommBackend: DeviceBackend {
    /// The backend's communicator.
    type Comm: DeviceCommunicator<Stream = Self::Stream>;

    /// A new id for one communicator.
    fn unique_id(place: &Place) -> Result<UniqueId>;

    /// Joins the communicator `id` as `rank` of `nranks`; returns once every rank has joined
    /// (or fails with a typed error by the communicator's deadline).
    fn init_comm(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<Self::Comm>;
}

/// The default deadline of a collective: `DEVSTREAM_COMM_TIMEOUT_SECS` (seconds, fractions
/// allowed) or 30 s.
pub fn default_timeout() -> std::time::Duration {
    std::env::var("DEVSTREAM_COMM_TIMEOUT_SECS")
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|secs| secs.is_finite() && *secs > 0.0)
        .map_or(
            std::time::Duration::from_secs(30),
            std::time::Duration::from_secs_f64,
        )
}

/// `Error::InvalidArgument` unless `rank` (named `what` in the message: "rank", "root",
/// "peer") is a rank of a communicator of `nranks`: the check every engine makes before
/// anything is queued.
pub fn check_rank(op: &'static str, what: &str, rank: usize, nranks: usize) -> Result<()> {
    if rank >= nranks {
        return Err(Error::InvalidArgument(format!(
            "{op}: {what} {rank} is not a rank of a communicator of {nranks}"
        )));
    }
    Ok(())
}

/// `Error::InvalidArgument` unless a buffer of `len` bytes (the `what` buffer: "send",
/// "receive") holds the `bytes` a call reads or writes.
pub fn check_len(op: &'static str, what: &str, len: usize, bytes: usize) -> Result<()> {
    if len < bytes {
        return Err(Error::InvalidArgument(format!(
            "{op}: the {what} buffer holds {len} bytes, the call needs {bytes}"
        )));
    }
    Ok(())
}

/// A collective call as the group rule of [`GroupMemory`] sees it: what it reads and writes
/// on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallKind {
    /// `all_reduce`.
    AllReduce,
    /// `broadcast` from `root`.
    Broadcast {
        /// The root.
        root: usize,
    },
    /// `reduce` to `root`.
    Reduce {
        /// The root.
        root: usize,
    },
    /// `all_gather`.
    AllGather,
    /// `reduce_scatter`.
    ReduceScatter,
    /// `all_to_all`.
    AllToAll,
    /// `send` (of its buffer).
    Send,
    /// `recv` (into its buffer).
    Recv,
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

impl CallKind {
    /// What the call reads and writes on `rank` of `nranks`, for `bytes` per rank (`count`
    /// times the type's size); `send` and `recv` are its buffers (`send` alone for a send,
    /// `recv` alone for a receive: pass the same region for the unused one). Follows NCCL's
    /// buffer layout: an in-place `all_gather` reads `recv[rank * bytes..]`.
    ///
    /// ```
    /// use devstream_core::comm::{CallKind, Region};
    /// let buf = Region { space: 7, offset: 0 };
    /// let touched = CallKind::AllReduce.accesses(0, 2, 16, buf, buf);
    /// assert_eq!(touched.len(), 2); // reads and writes the same 16 bytes
    /// assert!(touched[0].conflicts(&touched[1]));
    /// ```
    pub fn accesses(
        self,
        rank: usize,
        nranks: usize,
        bytes: usize,
        send: Region,
        recv: Region,
    ) -> Vec<Access> {
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
        let (read, written) = match self {
            CallKind::AllReduce => (
                Some(at(send, 0, bytes, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::Broadcast { root } => (
                (rank == root).then(|| at(send, 0, bytes, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::Reduce { root } => (
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
            CallKind::ReduceScatter => (
                Some(at(send, 0, all, false)),
                Some(at(recv, 0, bytes, true)),
            ),
            CallKind::AllToAll => (Some(at(send, 0, all, false)), Some(at(recv, 0, all, true))),
            CallKind::Send => (Some(at(send, 0, bytes, false)), None),
            CallKind::Recv => (None, Some(at(recv, 0, bytes, true))),
        };
        read.into_iter().chain(written).collect()
    }
}

/// The memory the calls of one open group touch, for the rule every engine keeps (NCCL
/// leaves the order of a group's calls undefined, and the engines run them in any order):
/// **a call inside a group may not write memory that another call of the same group reads or
/// writes, nor read memory another call of the group writes**. Such a call is refused with
/// `Error::InvalidArgument` before anything is recorded; the group stays open with its earlier
/// calls. A call may read and write the same memory itself (in place), and calls of a group
/// may read the same memory.
///
/// ```
/// use devstream_core::comm::{CallKind, GroupMemory, Region};
/// let (a, b) = (Region { space: 1, offset: 0 }, Region { space: 2, offset: 0 });
/// let mut group = GroupMemory::default();
/// group.admit("all_reduce", &CallKind::AllReduce.accesses(0, 2, 8, a, a)).unwrap();
/// group.admit("send", &CallKind::Send.accesses(0, 2, 8, b, b)).unwrap();
/// // Sending the buffer the all-reduce writes: refused, the group keeps its two calls.
/// assert!(group.admit("send", &CallKind::Send.accesses(0, 2, 8, a, a)).is_err());
/// ```
#[derive(Debug, Default)]
pub struct GroupMemory {
    touched: Vec<(Access, &'static str)>,
}

impl GroupMemory {
    /// Records the accesses of call `op`, or refuses it (`Error::InvalidArgument`, nothing
    /// recorded) when one conflicts with an earlier call's.
    pub fn admit(&mut self, op: &'static str, accesses: &[Access]) -> Result<()> {
        for access in accesses {
            if let Some((theirs, other)) = self.touched.iter().find(|(t, _)| t.conflicts(access)) {
                let verb = |a: &Access| if a.writes { "writes" } else { "reads" };
                return Err(Error::InvalidArgument(format!(
                    "{op} inside a group {} {} bytes of a buffer that {other}, an earlier call \
                     of the same group, {}: the calls of a group run in no defined order (as in \
                     NCCL), so a call may not write memory another call of its group reads or \
                     writes; use another buffer, or end the group between the two calls (the \
                     group stays open without this call)",
                    verb(access),
                    access.len,
                    verb(theirs)
                )));
            }
        }
        self.touched.extend(accesses.iter().map(|a| (*a, op)));
        Ok(())
    }

    /// Forgets the calls (the group was closed).
    pub fn clear(&mut self) {
        self.touched.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_code(t.code()), Some(t));
        }
        for o in ReduceOp::ALL {
            assert_eq!(ReduceOp::from_code(o.code()), Some(o));
        }
        assert_eq!(DataType::from_code(0), None);
    }

    #[test]
    fn integer_avg_truncates_toward_zero() {
        assert_eq!(ReduceOp::Avg.apply_i64(&[-7, 0], 2), -3);
        assert_eq!(ReduceOp::Avg.apply_i64(&[1, 1, 2], 3), 1);
        assert_eq!(ReduceOp::Min.apply_i64(&[3, -1, 2], 3), -1);
    }
}
