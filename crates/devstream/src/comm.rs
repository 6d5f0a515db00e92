//! Collectives (cargo feature `comm`): communicators and the collective calls on [`Stream`].
//!
//! The model is NCCL's: one rank makes a [`UniqueId`], sends its bytes to the other ranks by
//! whatever means it has, every rank calls [`Communicator::init`], and each collective is
//! queued on a stream like a copy: ordered with events and waits, its buffers kept alive
//! until it is done, capturable (each graph launch is a new collective with the peers).
//! Argument errors are returned at once, before anything is queued; failures of the
//! collective (a peer that died or left, the deadline, ranks that disagree) are returned by
//! the stream's `synchronize` as [`Error::Comm`].
//!
//! As with several ranks per process on CUDA, ranks that are threads of one process must not
//! put one rank's collectives on the legacy default stream while a peer uses a blocking stream
//! (`Stream::per_thread`, `blocking(true)`): the legacy stream's implicit synchronisation
//! orders each rank's collective behind the other's, and both fail at the deadline.
//!
//! | place | engine |
//! |---|---|
//! | `cpu` | the reference engine: ranks as threads of one process and/or processes on one host, over shared memory |
//! | others | none yet: `UniqueId::new`, `Communicator::init` answer `Error::Unsupported` |
//!
//! ```
//! use devstream::{Communicator, DataType, Place, ReduceOp, Stream, UniqueId};
//! # fn main() -> devstream::Result<()> {
//! let id = UniqueId::new(&Place::Cpu)?;
//! let bytes = id.as_bytes().to_vec();          // what rank 0 sends to the others
//! let ranks: Vec<_> = (0..4).map(|rank| {
//!     let bytes = bytes.clone();
//!     std::thread::spawn(move || -> devstream::Result<f32> {
//!         let id = UniqueId::from_bytes(&bytes)?;
//!         let comm = Communicator::init(&Place::Cpu, rank, 4, &id)?;
//!         let s = Stream::new(&Place::Cpu)?;
//!         let buf = s.alloc(4 * 1024)?;
//!         let mine = vec![rank as f32; 1024];
//!         s.copy_from_host(&buf, 0, &mine.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
//!         s.all_reduce(&comm, &buf, &buf, 1024, DataType::F32, ReduceOp::Sum)?; // in place
//!         let host = s.alloc_host(4)?;
//!         s.copy_device_to_host(&host, 0, &buf, 0, 4)?;
//!         s.synchronize()?;
//!         Ok(f32::from_ne_bytes(host.to_vec()?.try_into().unwrap()))
//!     })
//! }).collect();
//! for rank in ranks {
//!     assert_eq!(rank.join().unwrap()?, 6.0);  // 0 + 1 + 2 + 3
//! }
//! # Ok(()) }
//! ```

use crate::{DeviceBuffer, Stream};
use devstream_core::{
    CommBackend, DataType, DeviceCommunicator, Error, Place, ReduceOp, Result, UNIQUE_ID_BYTES,
};
use std::time::Duration;

/// The bytes that name one communicator (NCCL's `ncclUniqueId`): made once, sent to every rank
/// (`as_bytes` / `from_bytes`), passed to every rank's [`Communicator::init`].
///
/// ```
/// use devstream::{Place, UniqueId};
/// let id = UniqueId::new(&Place::Cpu).unwrap();
/// assert_eq!(UniqueId::from_bytes(id.as_bytes()).unwrap(), id);
/// assert_ne!(UniqueId::new(&Place::Cpu).unwrap(), id);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UniqueId(devstream_core::UniqueId);

impl UniqueId {
    /// Number of bytes in an id.
    pub const BYTES: usize = UNIQUE_ID_BYTES;

    /// A new id for a communicator on `place` (`Error::Unsupported` where the place has no
    /// collectives engine).
    pub fn new(place: &Place) -> Result<UniqueId> {
        match place {
            Place::Cpu => devstream_cpu::CpuBackend::unique_id(place).map(UniqueId),
            other => Err(unsupported("UniqueId::new", other)),
        }
    }

    /// The bytes to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The id from the bytes another rank sent (`Error::InvalidArgument` for a wrong length).
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        devstream_core::UniqueId::from_bytes(bytes).map(UniqueId)
    }
}

/// `Unsupported` for a compiled backend, `BackendNotCompiled` for one that is not.
fn unsupported(op: &'static str, place: &Place) -> Error {
    match crate::capabilities(place) {
        Err(error @ Error::BackendNotCompiled { .. }) => error,
        _ => Error::unsupported(op, place),
    }
}

/// One rank of a group of ranks that run collectives together (NCCL's `ncclComm_t`).
///
/// Cheap to clone. The rank leaves the communicator when the last handle and the last queued
/// collective using it are gone; peers still waiting for it then fail with
/// `CommFailure::PeerLeft`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Communicator {
    /// A communicator of the CPU reference engine.
    Cpu(devstream_cpu::CpuComm),
}

impl Communicator {
    /// Joins the communicator `id` as `rank` of `nranks` on `place`. Returns once every rank
    /// has joined (like `ncclCommInitRank`); fails with `Error::Comm` when a rank does not
    /// join by the deadline (`DEVSTREAM_COMM_TIMEOUT_SECS`, default 30 s) or dies meanwhile,
    /// with `Error::InvalidArgument` for `rank >= nranks`, a rank that already joined, or an
    /// id of another backend, and with `Error::Unsupported` where the place has no engine.
    pub fn init(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<Communicator> {
        match place {
            Place::Cpu => devstream_cpu::CpuBackend::init_comm(place, rank, nranks, &id.0)
                .map(Communicator::Cpu),
            other => Err(unsupported("Communicator::init", other)),
        }
    }

    /// The communicator's place.
    pub fn place(&self) -> &Place {
        match self {
            Communicator::Cpu(c) => c.place(),
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        match self {
            Communicator::Cpu(c) => c.rank(),
        }
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        match self {
            Communicator::Cpu(c) => c.nranks(),
        }
    }

    /// The deadline a collective's peers have to arrive (default: the
    /// `DEVSTREAM_COMM_TIMEOUT_SECS` environment variable, else 30 s).
    pub fn timeout(&self) -> Duration {
        match self {
            Communicator::Cpu(c) => c.timeout(),
        }
    }

    /// Sets the deadline for collectives queued from now on.
    pub fn set_timeout(&self, timeout: Duration) {
        match self {
            Communicator::Cpu(c) => c.set_timeout(timeout),
        }
    }

    /// Opens a group (`ncclGroupStart`; groups nest): the calls on this communicator until the
    /// matching [`group_end`](Self::group_end) are checked at once and queued together by it,
    /// so that they never wait for each other (a `recv` queued before a `send` to the same
    /// peer on both ranks completes).
    pub fn group_start(&self) -> Result<()> {
        match self {
            Communicator::Cpu(c) => c.group_start(),
        }
    }

    /// Closes a group (`ncclGroupEnd`); the outermost queues its calls.
    /// `Error::InvalidArgument` without an open group.
    pub fn group_end(&self) -> Result<()> {
        match self {
            Communicator::Cpu(c) => c.group_end(),
        }
    }

    /// The backend communicator inside.
    pub fn backend(&self) -> &devstream_cpu::CpuComm {
        match self {
            Communicator::Cpu(c) => c,
        }
    }
}

/// The CPU handles of a call, or the typed error: another place (`PlaceMismatch`), or a
/// backend without collectives (`Unsupported`).
fn cpu_parts<'a>(
    op: &'static str,
    stream: &'a Stream,
    comm: &'a Communicator,
    buffers: [&'a DeviceBuffer; 2],
) -> Result<(
    &'a devstream_cpu::CpuStream,
    &'a devstream_cpu::CpuComm,
    [&'a devstream_cpu::CpuBuffer; 2],
)> {
    if stream.place() != comm.place() {
        return Err(Error::mismatch(op, comm.place(), stream.place()));
    }
    for buffer in buffers {
        if buffer.place() != comm.place() {
            return Err(Error::mismatch(op, comm.place(), buffer.place()));
        }
    }
    let s = stream
        .backend::<devstream_cpu::CpuStream>()
        .ok_or_else(|| Error::unsupported(op, stream.place()))?;
    let Communicator::Cpu(c) = comm;
    let unpack = |b: &'a DeviceBuffer| {
        b.backend::<devstream_cpu::CpuBuffer>()
            .ok_or_else(|| Error::mismatch(op, comm.place(), b.place()))
    };
    Ok((s, c, [unpack(buffers[0])?, unpack(buffers[1])?]))
}

/// Collectives, queued on the stream like copies (cargo feature `comm`). Each returns once
/// the call is queued; arguments are checked first (`InvalidArgument` for a root or peer
/// `>= nranks` or a buffer smaller than the call needs, `PlaceMismatch` for a stream or
/// buffer of another place than the communicator) and nothing is queued when they are wrong.
/// `count` is per rank, as in NCCL; `send` and `recv` may be the same buffer (in place).
impl Stream {
    /// `recv[..count] = op over ranks of send[..count]` on every rank (`ncclAllReduce`).
    /// Floats are combined in rank order (so every rank gets identical bits), `F16`/`BF16` in
    /// `f32`; integers wrap; integer `Avg` is the wrapped sum divided by `nranks`, truncated.
    pub fn all_reduce(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("all_reduce", self, comm, [send, recv])?;
        c.all_reduce(s, send, recv, count, dtype, op)
    }

    /// `recv[..count] = root's send[..count]` on every rank (`send` is read on the root only).
    pub fn broadcast(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        root: usize,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("broadcast", self, comm, [send, recv])?;
        c.broadcast(s, send, recv, count, dtype, root)
    }

    /// Like [`all_reduce`](Self::all_reduce), but only `root`'s `recv` is written.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("reduce", self, comm, [send, recv])?;
        c.reduce(s, send, recv, count, dtype, op, root)
    }

    /// `recv[r * count..][..count] = rank r's send[..count]` (`recv` holds `count * nranks`).
    /// In place (`send` and `recv` the same buffer), this rank's part is read from
    /// `recv[rank * count..]`, NCCL's in-place layout.
    pub fn all_gather(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("all_gather", self, comm, [send, recv])?;
        c.all_gather(s, send, recv, count, dtype)
    }

    /// `recv[..count] = op over ranks of send[rank * count..][..count]` (`send` holds
    /// `count * nranks`).
    pub fn reduce_scatter(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("reduce_scatter", self, comm, [send, recv])?;
        c.reduce_scatter(s, send, recv, count, dtype, op)
    }

    /// `recv[r * count..][..count] = rank r's send[rank * count..][..count]` (both hold
    /// `count * nranks`).
    pub fn all_to_all(
        &self,
        comm: &Communicator,
        send: &DeviceBuffer,
        recv: &DeviceBuffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let (s, c, [send, recv]) = cpu_parts("all_to_all", self, comm, [send, recv])?;
        c.all_to_all(s, send, recv, count, dtype)
    }

    /// Sends `buf[..count]` to `peer`, matched in order with `peer`'s `recv`s from this rank.
    /// On the CPU engine a send never waits for its receive.
    pub fn send(
        &self,
        comm: &Communicator,
        buf: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let (s, c, [buf, _]) = cpu_parts("send", self, comm, [buf, buf])?;
        c.send(s, buf, count, dtype, peer)
    }

    /// Receives `count` elements from `peer` into `buf`; a message of another type or count
    /// fails with `CommFailure::Mismatch`.
    pub fn recv(
        &self,
        comm: &Communicator,
        buf: &DeviceBuffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let (s, c, [buf, _]) = cpu_parts("recv", self, comm, [buf, buf])?;
        c.recv(s, buf, count, dtype, peer)
    }
}
