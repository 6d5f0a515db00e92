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
//! | `cuda:N` | NCCL (`libnccl.so.2`: `DEVSTREAM_NCCL_LIBRARY`, the `nvidia-nccl-cu13`/`-cu12` wheels, the system loader), with the `cuda` feature |
//! | `hip:N` | RCCL (`librccl.so.1`: `DEVSTREAM_RCCL_LIBRARY`, the system loader), with the `hip` feature |
//! | `custom_type:N` | the Paddle plug-in's `xccl_*` functions (`xccl_comm_init_rank`, `xccl_all_reduce`, ... with the plug-in's stream), with the `plugin` feature; a plug-in without them (and a Rust-registered custom device) answers `Error::Unsupported` |
//! | others | none: `UniqueId::new`, `Communicator::init` answer `Error::Unsupported` |
//!
//! Without the library (or the GPU), `UniqueId::new` and `Communicator::init` on a GPU place
//! return `Error::BackendUnavailable` naming what was tried.
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
use devstream_core::comm::{BufferOf, CallKind, Collective};
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
            #[cfg(feature = "cuda")]
            Place::Cuda(_) => devstream_cuda::CudaBackend::unique_id(place).map(UniqueId),
            #[cfg(feature = "hip")]
            Place::Hip(_) => devstream_hip::HipBackend::unique_id(place).map(UniqueId),
            #[cfg(feature = "plugin")]
            Place::Custom { .. } => devstream_plugin::PluginBackend::unique_id(place).map(UniqueId),
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
    /// An NCCL communicator on a CUDA device.
    #[cfg(feature = "cuda")]
    Cuda(devstream_cuda::CudaComm),
    /// An RCCL communicator on a HIP device.
    #[cfg(feature = "hip")]
    Hip(devstream_hip::HipComm),
    /// A communicator over a Paddle plug-in's `xccl_*` functions.
    #[cfg(feature = "plugin")]
    Plugin(devstream_plugin::PluginComm),
}

/// Runs `$body` with `$c` bound to the backend communicator inside `$comm`.
macro_rules! with_comm {
    ($comm:expr, $c:ident => $body:expr) => {
        match $comm {
            Communicator::Cpu($c) => $body,
            #[cfg(feature = "cuda")]
            Communicator::Cuda($c) => $body,
            #[cfg(feature = "hip")]
            Communicator::Hip($c) => $body,
            #[cfg(feature = "plugin")]
            Communicator::Plugin($c) => $body,
        }
    };
}

impl Communicator {
    /// Joins the communicator `id` as `rank` of `nranks` on `place`. Returns once every rank
    /// has joined (like `ncclCommInitRank`); fails with `Error::Comm` when a rank does not
    /// join by the deadline (`DEVSTREAM_COMM_TIMEOUT_SECS`, default 30 s) or dies meanwhile,
    /// with `Error::InvalidArgument` for `rank >= nranks`, a rank that already joined, or an
    /// id of another backend, and with `Error::Unsupported` where the place has no engine.
    /// On `cuda`/`hip` places this is `ncclCommInitRank` (one rank per GPU per process), run on
    /// a thread of its own so that the deadline holds (NCCL cannot cancel it: past the
    /// deadline that thread stays blocked until the missing ranks join or the process exits),
    /// and `Error::BackendUnavailable` without the library. On a plug-in place this is the
    /// plug-in's `xccl_comm_init_rank`, which waits as long as the plug-in does (the ABI has
    /// no deadline).
    pub fn init(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<Communicator> {
        match place {
            Place::Cpu => devstream_cpu::CpuBackend::init_comm(place, rank, nranks, &id.0)
                .map(Communicator::Cpu),
            #[cfg(feature = "cuda")]
            Place::Cuda(_) => devstream_cuda::CudaBackend::init_comm(place, rank, nranks, &id.0)
                .map(Communicator::Cuda),
            #[cfg(feature = "hip")]
            Place::Hip(_) => devstream_hip::HipBackend::init_comm(place, rank, nranks, &id.0)
                .map(Communicator::Hip),
            #[cfg(feature = "plugin")]
            Place::Custom { .. } => {
                devstream_plugin::PluginBackend::init_comm(place, rank, nranks, &id.0)
                    .map(Communicator::Plugin)
            }
            other => Err(unsupported("Communicator::init", other)),
        }
    }

    /// The communicator's place.
    pub fn place(&self) -> &Place {
        with_comm!(self, c => c.place())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        with_comm!(self, c => c.rank())
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        with_comm!(self, c => c.nranks())
    }

    /// The deadline a collective's peers have to arrive (default: the
    /// `DEVSTREAM_COMM_TIMEOUT_SECS` environment variable, else 30 s). On `cuda`/`hip`, a
    /// collective still incomplete this long after it began on the GPU aborts the communicator.
    /// On a plug-in place the value is only kept: the xccl ABI cannot pass a deadline, the
    /// plug-in applies its own.
    pub fn timeout(&self) -> Duration {
        with_comm!(self, c => c.timeout())
    }

    /// Sets the deadline for collectives queued from now on.
    pub fn set_timeout(&self, timeout: Duration) {
        with_comm!(self, c => c.set_timeout(timeout))
    }

    /// Opens a group (`ncclGroupStart`; groups nest): the calls on this communicator until the
    /// matching [`group_end`](Self::group_end) are checked at once and queued together by it,
    /// so that they never wait for each other (a `recv` queued before a `send` to the same
    /// peer on both ranks completes). On `cuda`/`hip`, groups are NCCL's: per thread.
    ///
    /// The same rules on every place:
    /// - **The calls of a group are unordered** (NCCL leaves their order undefined): a call
    ///   that writes memory another call of the open group reads or writes, or reads memory
    ///   another call writes (overlapping byte ranges of one buffer), is refused with
    ///   `Error::InvalidArgument` at the call; the group stays open with its earlier calls.
    ///   Calls may read the same memory, and one call may read and write its own (in place).
    ///   To send what an all-reduce produces, end the group between the two calls.
    /// - On the CPU engine a group is also compared as a whole: if the ranks' groups differ in
    ///   any collective (kind, type, count, reduction, root, or the number of collectives),
    ///   every collective of the group fails with `CommFailure::Mismatch` on every rank and
    ///   none writes its receive buffer. A group holds at most 64 collectives there (sends
    ///   and receives are not counted).
    /// - Dropping the last handle of a communicator with a group open: on `cpu` and plug-in
    ///   places the group's calls are dropped, never queued, and the rank leaves (its peers
    ///   fail with `CommFailure::PeerLeft` on `cpu`); on `cuda`/`hip`, whose library has
    ///   recorded the calls, the group is ended on the dropping thread (its calls are issued).
    ///
    /// ```
    /// use devstream::{Communicator, DataType, Error, Place, ReduceOp, Stream, UniqueId};
    /// let comm = Communicator::init(&Place::Cpu, 0, 1, &UniqueId::new(&Place::Cpu)?)?;
    /// let s = Stream::new(&Place::Cpu)?;
    /// let (grads, other) = (s.alloc(64)?, s.alloc(64)?);
    /// comm.group_start()?;
    /// s.all_reduce(&comm, &grads, &grads, 16, DataType::F32, ReduceOp::Sum)?;
    /// // Sending `grads` in the same group would read it while the all-reduce writes it.
    /// let e = s.send(&comm, &grads, 16, DataType::F32, 0).unwrap_err();
    /// assert!(matches!(e, Error::InvalidArgument(_)));
    /// s.all_reduce(&comm, &other, &other, 16, DataType::F32, ReduceOp::Sum)?;
    /// comm.group_end()?;
    /// s.synchronize()?;
    /// # Ok::<(), devstream::Error>(())
    /// ```
    pub fn group_start(&self) -> Result<()> {
        with_comm!(self, c => c.group_start())
    }

    /// Closes a group (`ncclGroupEnd`); the outermost queues its calls.
    /// `Error::InvalidArgument` without an open group.
    pub fn group_end(&self) -> Result<()> {
        with_comm!(self, c => c.group_end())
    }

    /// The backend communicator inside (`devstream::cpu::CpuComm`, `devstream_cuda::CudaComm`,
    /// `devstream_hip::HipComm`, `devstream_plugin::PluginComm`), if it is a `T`.
    pub fn backend<T: 'static>(&self) -> Option<&T> {
        with_comm!(self, c => (c as &dyn std::any::Any).downcast_ref::<T>())
    }
}

/// Queues `call` on `comm`'s backend: the backend handles of the stream and buffers, or the
/// typed error (another place: `PlaceMismatch`; a backend without collectives: `Unsupported`).
fn collective(
    stream: &Stream,
    comm: &Communicator,
    call: Collective,
    send: &DeviceBuffer,
    recv: &DeviceBuffer,
) -> Result<()> {
    fn on<C: DeviceCommunicator>(
        comm: &C,
        stream: &Stream,
        call: &Collective,
        buffers: [&DeviceBuffer; 2],
    ) -> Result<()>
    where
        C::Stream: crate::Member<Stream>,
        BufferOf<C>: crate::Member<DeviceBuffer>,
    {
        let op = call.name();
        if stream.place() != comm.place() {
            return Err(Error::mismatch(op, comm.place(), stream.place()));
        }
        for buffer in buffers {
            if buffer.place() != comm.place() {
                return Err(Error::mismatch(op, comm.place(), buffer.place()));
            }
        }
        let s = stream
            .backend::<C::Stream>()
            .ok_or_else(|| Error::unsupported(op, stream.place()))?;
        let [send, recv] = buffers.map(|b| {
            b.backend::<BufferOf<C>>()
                .ok_or_else(|| Error::mismatch(op, comm.place(), b.place()))
        });
        comm.collective(s, call, send?, recv?)
    }
    with_comm!(comm, c => on(c, stream, &call, [send, recv]))
}

/// The collective methods of [`Stream`], one per [`CallKind`]: each builds the call's
/// descriptor and hands it to [`collective`].
macro_rules! collectives {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($buffer:ident),+; $($arg:ident: $ty:ty),*) => $kind:expr;
    )*) => {
        /// Collectives, queued on the stream like copies (cargo feature `comm`). Each returns once
        /// the call is queued; arguments are checked first (`InvalidArgument` for a root or peer
        /// `>= nranks` or a buffer smaller than the call needs, `PlaceMismatch` for a stream or
        /// buffer of another place than the communicator) and nothing is queued when they are wrong.
        /// `count` is per rank, as in NCCL; `send` and `recv` may be the same buffer (in place).
        impl Stream {
            $(
                $(#[$doc])*
                #[allow(clippy::too_many_arguments)]
                pub fn $name(
                    &self,
                    comm: &Communicator,
                    $($buffer: &DeviceBuffer,)+
                    count: usize,
                    dtype: DataType,
                    $($arg: $ty),*
                ) -> Result<()> {
                    let [send, recv] = collectives!(@buffers $($buffer),+);
                    collective(self, comm, Collective::new($kind, count, dtype), send, recv)
                }
            )*
        }
    };
    (@buffers $send:ident, $recv:ident) => { [$send, $recv] };
    (@buffers $buf:ident) => { [$buf, $buf] };
}

collectives! {
    /// `recv[..count] = op over ranks of send[..count]` on every rank (`ncclAllReduce`).
    /// Floats are combined in rank order (so every rank gets identical bits, whether the ranks
    /// are threads of one process or processes), `F16`/`BF16` in `f32`; integers wrap; integer
    /// `Avg` is the wrapped sum divided by `nranks`, truncated.
    /// (On NCCL/RCCL, floats are combined in the library's order: every rank still gets the
    /// same bits.)
    fn all_reduce(send, recv; op: ReduceOp) => CallKind::AllReduce { op };

    /// `recv[..count] = root's send[..count]` on every rank (`send` is read on the root only).
    fn broadcast(send, recv; root: usize) => CallKind::Broadcast { root };

    /// Like [`all_reduce`](Self::all_reduce), but only `root`'s `recv` is written.
    fn reduce(send, recv; op: ReduceOp, root: usize) => CallKind::Reduce { op, root };

    /// `recv[r * count..][..count] = rank r's send[..count]` (`recv` holds `count * nranks`).
    /// In place (`send` and `recv` the same buffer), this rank's part is read from
    /// `recv[rank * count..]`, NCCL's in-place layout.
    fn all_gather(send, recv;) => CallKind::AllGather;

    /// `recv[..count] = op over ranks of send[rank * count..][..count]` (`send` holds
    /// `count * nranks`).
    fn reduce_scatter(send, recv; op: ReduceOp) => CallKind::ReduceScatter { op };

    /// `recv[r * count..][..count] = rank r's send[rank * count..][..count]` (both hold
    /// `count * nranks`). On NCCL/RCCL `send` and `recv` must be different buffers.
    fn all_to_all(send, recv;) => CallKind::AllToAll;

    /// Sends `buf[..count]` to `peer`, matched in order with `peer`'s `recv`s from this rank.
    /// On the CPU engine a send never waits for its receive; on NCCL/RCCL it may, until the
    /// peer's matching `recv` (put both in a group when two ranks exchange).
    fn send(buf; peer: usize) => CallKind::Send { peer };

    /// Receives `count` elements from `peer` into `buf`; a message of another type or count
    /// fails with `CommFailure::Mismatch` (on the CPU engine).
    fn recv(buf; peer: usize) => CallKind::Recv { peer };
}
