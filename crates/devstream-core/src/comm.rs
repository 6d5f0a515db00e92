//! Collectives: element types, reductions, the communicator id and the backend traits.
//!
//! A collective (all-reduce, broadcast, ...) is stream work like a copy: it runs in its stream's
//! order, events recorded after it complete after it, a `wait_event` before it holds it back,
//! the buffers it uses stay alive until it is done, and it can be captured. The model is NCCL's
//! (`ncclAllReduce(send, recv, count, type, op, comm, stream)`, `ncclGroupStart/End`), which
//! RCCL and Paddle's custom-device `xccl_*` functions share, so a backend wraps its library's
//! calls one to one through [`DeviceCommunicator`] and [`CommBackend`].
//!
//! What every engine shares is written here once: the call's descriptor ([`Collective`]), its
//! argument checks ([`Collective::check`]), the memory it touches ([`Collective::accesses`])
//! for the rule of groups ([`GroupMemory`], [`GroupState`]), and the words ranks compare to
//! agree that they make the same call ([`Signature`]). The engines keep only their transport.
//!
//! ```
//! use devstream_core::{DataType, ReduceOp};
//! assert_eq!(DataType::BF16.size(), 2);
//! assert_eq!(ReduceOp::Avg.to_string(), "avg");
//! assert_eq!(ReduceOp::Avg.apply_i64(&[7, 8], 2), 7); // (7 + 8) / 2, truncated
//! ```

use crate::{DeviceBackend, DeviceStream, Error, Place, Result};
use std::fmt;

mod call;
mod group;

pub use call::{Access, CallKind, Collective, Region, Signature};
pub use group::{GroupMemory, GroupState};

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

/// The buffer type of a communicator's streams.
pub type BufferOf<C> = <<C as DeviceCommunicator>::Stream as DeviceStream>::Buffer;

/// A communicator of one backend: one rank of a group of `nranks`, NCCL's `ncclComm_t`.
///
/// Every collective goes through [`collective`](Self::collective) with its [`Collective`]
/// descriptor (the facade's `Stream::all_reduce`, `broadcast`, ... build it). Each is queued
/// on `stream` like a copy and returns at once; argument errors (a buffer smaller than the
/// call needs, a root or peer ≥ `nranks`, a stream of another place: see
/// [`Collective::check`]) are returned before anything is queued; failures of the collective
/// itself (a dead peer, a deadline, a mismatch between ranks) surface from the stream's
/// `synchronize` as [`Error::Comm`].
///
/// Buffer sizes follow NCCL, with `count` the per-rank element count: `all_gather` receives
/// `count * nranks`, `reduce_scatter` sends `count * nranks`, `all_to_all` sends and receives
/// `count` elements per peer (`count * nranks` in all). `send` and `recv` are matched in order
/// per pair of ranks. Every method not overridden answers `Error::Unsupported`, and an engine
/// answers it for a kind of call it lacks (an `xccl` plug-in without `all_to_all`).
pub trait DeviceCommunicator: Clone + fmt::Debug + Send + Sync + 'static {
    /// The stream type its collectives are queued on.
    type Stream: DeviceStream;

    /// The communicator's place.
    fn place(&self) -> &Place;
    /// This rank, `0..nranks`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn nranks(&self) -> usize;

    /// Queues `call` on `stream` with its send and receive buffers (a `send` or `recv` has
    /// one buffer: pass it as both). What each kind reads and writes is said at
    /// [`CallKind`].
    fn collective(
        &self,
        stream: &Self::Stream,
        call: &Collective,
        send: &BufferOf<Self>,
        recv: &BufferOf<Self>,
    ) -> Result<()> {
        let _ = (stream, send, recv);
        Err(Error::unsupported(call.kind.name(), self.place()))
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
