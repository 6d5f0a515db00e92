//! Collectives on plug-in places (cargo feature `comm`): the plug-in's `xccl_*` functions.
//!
//! Paddle's custom-device ABI carries NCCL's model: `xccl_get_unique_id_size` and
//! `xccl_get_unique_id` make the id, `xccl_comm_init_rank` joins it, and each collective takes
//! the plug-in's `C_Stream`, exactly as Paddle's `ProcessGroupCustom` passes it. devstream
//! calls them one to one from [`PluginComm`]:
//!
//! * each call is checked first (ranks, buffer sizes, places: typed errors, nothing queued),
//!   then put on the stream in devstream's order for that stream (behind held flag waits and
//!   waits on unsubmitted events, like a copy), with the plug-in stream handle;
//! * the buffers are noted as used by the stream (freed only once its work up to then is
//!   complete, the rule of copies), and the communicator is destroyed
//!   (`xccl_destroy_comm`) only once the last handle is gone and the work of every stream that
//!   queued a collective on it is complete; a capture keeps both for its graph's replays;
//! * a status other than `C_SUCCESS` is `Error::InvalidArgument` for `C_ERROR` (the plug-in
//!   refused the arguments) and `Error::Comm { failure: Transport, .. }` otherwise.
//!
//! `capabilities().collectives` is on where the plug-in fills every function of
//! [`REQUIRED_XCCL`]; elsewhere (a 2.x or 3.0–3.2 table, whose xccl fields devstream never
//! reads, or a plug-in that leaves them null) every call answers `Error::Unsupported`.
//! `xccl_all_to_all` is optional: without it `all_to_all` is a group of one `xccl_send` and one
//! `xccl_recv` per peer (NCCL's recipe).
//!
//! Types and reductions: the ABI's `C_DataType` has every devstream type (`FLOAT32`,
//! `FLOAT64`, `FLOAT16`, `BFLOAT16`, `INT32`, `INT64`, `UINT8`) and `C_CCLReduceOp` every
//! reduction (`SUM`, `AVG`, `MAX`, `MIN`, `PRODUCT`), so nothing is emulated: the plug-in
//! computes each.
//!
//! The ABI has no deadline and no abort: a collective whose peers never come blocks as long as
//! the plug-in lets it, and failures the plug-in sees after a call returned have no way back
//! (the plug-in reports them on its next call). [`PluginComm::timeout`] only keeps the value.

use crate::buffer::{AbiBuffer, BufferRepr, DeviceInner, PluginBuffer};
use crate::capture::submitting_into;
use crate::device::PluginBackend;
use crate::queue::{lock, reap, Item, Job, StreamCore};
use crate::registry::{lookup, plugin_slot, CustomDevice};
use crate::runtime::{plugin_call, CopyKind, RawCopy, Runtime};
use crate::stream::{PluginStream, StreamRepr};
use crate::sys::{
    C_CCLComm, C_CCLReduceOp, C_CCLRootId, C_DataType, C_DeviceInterface, C_Status, C_Stream,
    FunctionField, C_CCL_AVG, C_CCL_MAX, C_CCL_MIN, C_CCL_PRODUCT, C_CCL_SUM, C_DATA_TYPE_BFLOAT16,
    C_DATA_TYPE_FLOAT16, C_DATA_TYPE_FLOAT32, C_DATA_TYPE_FLOAT64, C_DATA_TYPE_INT32,
    C_DATA_TYPE_INT64, C_DATA_TYPE_UINT8, C_ERROR, C_SUCCESS, REQUIRED_XCCL_FUNCTIONS,
};
use devstream_core::comm::{check_rank, default_timeout, CallKind, Collective, GroupState, Region};
use devstream_core::{
    CommBackend, CommFailure, DataType, DeviceCommunicator, Error, Place, ReduceOp, Result,
    UniqueId, UNIQUE_ID_BYTES,
};
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The `xccl_*` functions a plug-in must fill for `capabilities().collectives`.
pub const REQUIRED_XCCL: [&str; 13] = FunctionField::names(REQUIRED_XCCL_FUNCTIONS);

/// The functions of [`REQUIRED_XCCL`] that `table` lacks.
pub(crate) fn missing(table: &C_DeviceInterface) -> Vec<&'static str> {
    FunctionField::unfilled(&REQUIRED_XCCL_FUNCTIONS, table).collect()
}

/// Paddle's `C_DataType` of a devstream type.
pub fn c_data_type(dtype: DataType) -> Option<C_DataType> {
    Some(match dtype {
        DataType::F32 => C_DATA_TYPE_FLOAT32,
        DataType::F64 => C_DATA_TYPE_FLOAT64,
        DataType::F16 => C_DATA_TYPE_FLOAT16,
        DataType::BF16 => C_DATA_TYPE_BFLOAT16,
        DataType::I32 => C_DATA_TYPE_INT32,
        DataType::I64 => C_DATA_TYPE_INT64,
        DataType::U8 => C_DATA_TYPE_UINT8,
        _ => return None,
    })
}

/// Paddle's `C_CCLReduceOp` of a devstream reduction.
pub fn c_reduce_op(op: ReduceOp) -> Option<C_CCLReduceOp> {
    Some(match op {
        ReduceOp::Sum => C_CCL_SUM,
        ReduceOp::Avg => C_CCL_AVG,
        ReduceOp::Max => C_CCL_MAX,
        ReduceOp::Min => C_CCL_MIN,
        ReduceOp::Prod => C_CCL_PRODUCT,
        _ => return None,
    })
}

/// The plug-in runtime and device slot of `place`, if its plug-in has the xccl functions.
fn engine(op: &'static str, place: &Place) -> Result<(Arc<Runtime>, usize)> {
    match lookup(place)? {
        CustomDevice::Plugin(runtime) => {
            let slot = plugin_slot(&runtime, place)?;
            if !runtime.caps.collectives {
                return Err(Error::unsupported(op, place));
            }
            Ok((runtime, slot))
        }
        CustomDevice::Rust(_) => Err(Error::unsupported(op, place)),
    }
}

/// A function of the table, present per [`missing`] (`Unsupported` otherwise).
fn function<F>(f: Option<F>, op: &'static str, place: &Place) -> Result<F> {
    f.ok_or_else(|| Error::unsupported(op, place))
}

/// The error of a status other than `C_SUCCESS` from `call`.
fn failed(runtime: &Runtime, op: &'static str, call: &str, status: C_Status) -> Error {
    if status == C_ERROR {
        return Error::InvalidArgument(format!(
            "{op}: the {} plug-in's {call} refused the arguments (C_ERROR)",
            runtime.device_type
        ));
    }
    Error::Comm {
        op,
        failure: CommFailure::Transport,
        reason: format!(
            "the {} plug-in's {call} answered {}",
            runtime.device_type,
            status.name()
        ),
    }
}

fn check(runtime: &Runtime, op: &'static str, call: &str, status: C_Status) -> Result<()> {
    if status == C_SUCCESS {
        Ok(())
    } else {
        Err(failed(runtime, op, call, status))
    }
}

/// The size of the plug-in's ids, which must fit a devstream [`UniqueId`].
fn id_size(runtime: &Runtime, place: &Place, op: &'static str) -> Result<usize> {
    let size_fn = function(runtime.table().xccl_get_unique_id_size, op, place)?;
    let mut size = 0usize;
    // SAFETY: writes one `size_t`.
    check(runtime, op, "xccl_get_unique_id_size", unsafe {
        size_fn(&mut size)
    })?;
    if size == 0 || size > UNIQUE_ID_BYTES {
        return Err(Error::Comm {
            op,
            failure: CommFailure::Transport,
            reason: format!(
                "the {} plug-in's ids are {size} bytes; devstream carries 1 to \
                 {UNIQUE_ID_BYTES}",
                runtime.device_type
            ),
        });
    }
    Ok(size)
}

/// One call of a group, queued by the outermost `group_end`.
struct Pending {
    core: Arc<StreamCore>,
    call: Call,
    /// The call's buffers, kept until it is handed to the plug-in.
    _keep: Vec<Arc<DeviceInner>>,
}

/// A call into the plug-in at one point of a stream.
type Call = Box<dyn FnOnce(&StreamCore) -> Result<()> + Send>;

struct CommInner {
    runtime: Arc<Runtime>,
    slot: usize,
    place: Place,
    rank: usize,
    nranks: usize,
    /// The plug-in's `C_CCLComm`, as an address.
    raw: usize,
    timeout_nanos: AtomicU64,
    /// Streams that queued a collective on the communicator.
    users: Mutex<Vec<Arc<StreamCore>>>,
}

impl CommInner {
    fn raw(&self) -> C_CCLComm {
        self.raw as C_CCLComm
    }
}

impl Drop for CommInner {
    fn drop(&mut self) {
        let streams = std::mem::take(&mut *lock(&self.users));
        let (runtime, slot, raw) = (self.runtime.clone(), self.slot, self.raw);
        // Destroyed once every stream that queued a collective on it has run past it
        // (captured collectives: the graphs hold a reference, so they are gone too).
        reap(Job::AfterStreams {
            streams,
            then: Box::new(move || {
                let Some(destroy) = runtime.table().xccl_destroy_comm else {
                    return;
                };
                if let Err(error) = runtime.bind(slot) {
                    tracing::warn!("devstream-plugin: xccl_destroy_comm: {error}");
                }
                // SAFETY: the plug-in's communicator, destroyed once, with no queued work.
                let status = plugin_call(|| unsafe { destroy(raw as C_CCLComm) });
                if status != C_SUCCESS {
                    tracing::warn!(
                        "devstream-plugin: the {} plug-in's xccl_destroy_comm answered {}",
                        runtime.device_type,
                        status.name()
                    );
                }
            }),
        });
    }
}

/// A communicator of a plug-in place: one rank of a group, over the plug-in's `xccl_*`
/// functions (see the module docs of `devstream_plugin::comm` for the mapping).
///
/// Cheap to clone. Groups ([`DeviceCommunicator::group_start`]) are per communicator: its
/// calls until the outermost `group_end` are checked at once and handed to the plug-in
/// together between `xccl_group_start` and `xccl_group_end` on one thread. A group over
/// several streams is refused (`InvalidArgument`) while one of them holds work on the host
/// (behind a flag wait not yet reached): the group could not be issued in one piece. The calls
/// of a group that is never closed are never issued: dropping the last handle drops them, and
/// the communicator is destroyed once the work its streams queued is done.
#[derive(Clone)]
pub struct PluginComm {
    inner: Arc<CommInner>,
    /// The open group, shared by the handles only: its calls hold the communicator, so the
    /// group lives beside it, not in it (dropping the last handle drops an unclosed group).
    group: Arc<Mutex<GroupState<Vec<Pending>>>>,
}

impl fmt::Debug for PluginComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginComm")
            .field("place", &self.inner.place)
            .field("rank", &self.inner.rank)
            .field("nranks", &self.inner.nranks)
            .finish_non_exhaustive()
    }
}

/// The plug-in buffer inside `buffer`, if it is one of `place` (`PlaceMismatch` otherwise).
fn abi<'a>(op: &'static str, place: &Place, buffer: &'a PluginBuffer) -> Result<&'a AbiBuffer> {
    match &buffer.0 {
        BufferRepr::Abi(b) if &b.place == place => Ok(b),
        BufferRepr::Abi(b) => Err(Error::mismatch(op, place, &b.place)),
        BufferRepr::Rust(_) => Err(Error::unsupported(op, place)),
    }
}

/// Whether two buffers are the same memory (an in-place call).
fn same(a: &AbiBuffer, b: &AbiBuffer) -> bool {
    Arc::ptr_eq(&a.0, &b.0)
}

/// Calls an xccl function, mapping its status.
macro_rules! xccl {
    ($inner:expr, $op:expr, $field:ident($($arg:expr),* $(,)?)) => {{
        let inner: &CommInner = $inner;
        let f = function(inner.runtime.table().$field, $op, &inner.place)?;
        // SAFETY: the arguments were checked against the buffers, which the stream keeps alive
        // until its work up to this call is complete; the communicator outlives the call.
        let status = plugin_call(|| unsafe { f($($arg),*) });
        check(&inner.runtime, $op, stringify!($field), status)
    }};
}

fn ptr(address: usize) -> *mut c_void {
    address as *mut c_void
}

impl PluginComm {
    /// A new id (`xccl_get_unique_id_size` + `xccl_get_unique_id`): the plug-in's bytes,
    /// zero-padded to [`UNIQUE_ID_BYTES`].
    pub fn unique_id(place: &Place) -> Result<UniqueId> {
        let op = "unique_id";
        let (runtime, slot) = engine(op, place)?;
        runtime.bind(slot)?;
        let size = id_size(&runtime, place, op)?;
        let get = function(runtime.table().xccl_get_unique_id, op, place)?;
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        let mut root = C_CCLRootId {
            sz: size,
            data: bytes.as_mut_ptr().cast::<c_void>(),
        };
        // SAFETY: `root` points at `size` <= UNIQUE_ID_BYTES writable bytes.
        check(&runtime, op, "xccl_get_unique_id", unsafe {
            get(&mut root)
        })?;
        Ok(UniqueId::from_raw(bytes))
    }

    /// Joins communicator `id` as `rank` of `nranks` on `place` (`xccl_comm_init_rank`, which
    /// returns once every rank has joined, or when the plug-in gives up).
    pub fn init(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<PluginComm> {
        let op = "init";
        if nranks == 0 {
            return Err(Error::InvalidArgument(
                "init: a communicator has at least one rank".into(),
            ));
        }
        check_rank(op, "rank", rank, nranks)?;
        let (runtime, slot) = engine(op, place)?;
        let init = function(runtime.table().xccl_comm_init_rank, op, place)?;
        runtime.bind(slot)?;
        let size = id_size(&runtime, place, op)?;
        let mut bytes = *id.as_bytes();
        let mut root = C_CCLRootId {
            sz: size,
            data: bytes.as_mut_ptr().cast::<c_void>(),
        };
        let mut comm: C_CCLComm = std::ptr::null_mut();
        // SAFETY: `root` points at `size` readable bytes; `comm` is a zeroed out-parameter.
        let status = plugin_call(|| unsafe { init(nranks, &mut root, rank, &mut comm) });
        check(&runtime, op, "xccl_comm_init_rank", status)?;
        if comm.is_null() {
            return Err(Error::Comm {
                op,
                failure: CommFailure::Transport,
                reason: format!(
                    "the {} plug-in's xccl_comm_init_rank succeeded without a communicator",
                    runtime.device_type
                ),
            });
        }
        Ok(PluginComm {
            inner: Arc::new(CommInner {
                runtime,
                slot,
                place: place.clone(),
                rank,
                nranks,
                raw: comm as usize,
                timeout_nanos: AtomicU64::new(default_timeout().as_nanos() as u64),
                users: Mutex::new(Vec::new()),
            }),
            group: Arc::new(Mutex::new(GroupState::default())),
        })
    }

    /// The plug-in's `C_CCLComm` (valid while this handle lives).
    pub fn as_raw(&self) -> C_CCLComm {
        self.inner.raw()
    }

    /// The deadline set with [`set_timeout`](Self::set_timeout). The xccl ABI carries no
    /// deadline: devstream keeps the value, the plug-in applies its own.
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.inner.timeout_nanos.load(Ordering::Relaxed))
    }

    /// Keeps a deadline (see [`timeout`](Self::timeout): the plug-in is not told).
    pub fn set_timeout(&self, timeout: Duration) {
        let nanos = timeout.as_nanos().clamp(1, u128::from(u64::MAX)) as u64;
        self.inner.timeout_nanos.store(nanos, Ordering::Relaxed);
    }

    fn dtype(&self, op: &'static str, dtype: DataType) -> Result<C_DataType> {
        c_data_type(dtype).ok_or_else(|| Error::unsupported(op, &self.inner.place))
    }

    fn redop(&self, op: &'static str, reduce: ReduceOp) -> Result<C_CCLReduceOp> {
        c_reduce_op(reduce).ok_or_else(|| Error::unsupported(op, &self.inner.place))
    }

    /// The stream's core, if it is a stream of the communicator's place.
    fn core<'a>(&self, op: &'static str, stream: &'a PluginStream) -> Result<&'a Arc<StreamCore>> {
        match &stream.0 {
            StreamRepr::Abi(core) if core.place == self.inner.place => Ok(core),
            StreamRepr::Abi(core) => Err(Error::mismatch(op, &self.inner.place, &core.place)),
            StreamRepr::Rust(_) => Err(Error::unsupported(op, &self.inner.place)),
        }
    }

    fn buffers<'a, const N: usize>(
        &self,
        op: &'static str,
        buffers: [&'a PluginBuffer; N],
    ) -> Result<[&'a AbiBuffer; N]> {
        let mut out = Vec::with_capacity(N);
        for b in buffers {
            out.push(abi(op, &self.inner.place, b)?);
        }
        Ok(out.try_into().unwrap_or_else(|_| unreachable!("N buffers")))
    }

    fn require_copy(&self, op: &'static str) -> Result<()> {
        if self.inner.runtime.has_copy(CopyKind::DeviceToDevice) {
            Ok(())
        } else {
            Err(Error::unsupported(op, &self.inner.place))
        }
    }

    fn in_group(&self) -> bool {
        lock(&self.group).is_open()
    }

    /// Queues `issue(comm, stream)` on `core` after the checks (made by the caller): notes the
    /// buffers and the communicator as used by the stream (a capture keeps them), then hands
    /// the call to the stream in order, or keeps it for the group's end.
    fn queue(
        &self,
        core: &Arc<StreamCore>,
        buffers: &[&AbiBuffer],
        call: &Collective,
        issue: impl FnOnce(&CommInner, &StreamCore, C_Stream) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let op = call.name();
        if call.count == 0 {
            // Nothing moves and no rank waits for another (NCCL's no-op).
            return Ok(());
        }
        {
            // Buffers of one place share its address space.
            let region = |b: &AbiBuffer| Region {
                space: 0,
                offset: b.at(0) as u64,
            };
            let send = region(buffers[0]);
            let recv = region(buffers[buffers.len() - 1]);
            let (rank, n) = (self.inner.rank, self.inner.nranks);
            lock(&self.group).admit(call, rank, n, send, recv)?;
        }
        if let Some(capture) = submitting_into(op, core)? {
            // The graph keeps them; the capturing stream runs none of this work, and were it
            // a user of what the capture keeps, the capture would keep its own stream alive
            // (a stream dropped while capturing could then never end its capture).
            for buffer in buffers {
                capture.keep_device(&buffer.0);
            }
            capture.keep(Box::new(self.inner.clone()));
        } else {
            for buffer in buffers {
                buffer.used_by(core);
            }
            let mut users = lock(&self.inner.users);
            if !users.iter().any(|u| u.id == core.id) {
                users.push(core.clone());
            }
        }
        let inner = self.inner.clone();
        let call: Call = Box::new(move |core: &StreamCore| {
            core.runtime.bind(core.slot)?;
            issue(&inner, core, core.raw.stream())
        });
        let mut group = lock(&self.group);
        if group.is_open() {
            group.pending.push(Pending {
                core: core.clone(),
                call,
                _keep: buffers.iter().map(|b| b.0.clone()).collect(),
            });
            return Ok(());
        }
        drop(group);
        core.submit(Item::Op(call))
    }
}

/// The blocks of an `all_to_all`: `send` and `recv` addresses of `nranks` blocks of `bytes`
/// (`count` elements of `dtype`) each.
struct Blocks {
    send: usize,
    recv: usize,
    count: usize,
    bytes: usize,
    dtype: C_DataType,
}

/// `all_to_all` on the plug-in: its `xccl_all_to_all` where it has one, else NCCL's recipe (one
/// send and one receive per peer in a group).
fn all_to_all(
    c: &CommInner,
    native: bool,
    blocks: Blocks,
    rank: usize,
    n: usize,
    raw: C_Stream,
) -> Result<()> {
    let name = "all_to_all";
    let Blocks {
        send,
        recv,
        count,
        bytes,
        dtype,
    } = blocks;
    if native {
        let sends: Vec<*const c_void> =
            (0..n).map(|p| ptr(send + p * bytes).cast_const()).collect();
        let mut recvs: Vec<*mut c_void> = (0..n).map(|p| ptr(recv + p * bytes)).collect();
        let counts = vec![count; n];
        let types = vec![dtype; n];
        return xccl!(
            c,
            name,
            xccl_all_to_all(
                sends.as_ptr(),
                counts.as_ptr(),
                types.as_ptr(),
                recvs.as_mut_ptr(),
                counts.as_ptr(),
                types.as_ptr(),
                rank,
                n,
                c.raw(),
                raw,
            )
        );
    }
    xccl!(c, name, xccl_group_start())?;
    let mut result = Ok(());
    for peer in 0..n {
        let offset = peer * bytes;
        result = xccl!(
            c,
            name,
            xccl_send(ptr(send + offset), count, dtype, peer, c.raw(), raw)
        )
        .and_then(|()| {
            xccl!(
                c,
                name,
                xccl_recv(ptr(recv + offset), count, dtype, peer, c.raw(), raw)
            )
        });
        if result.is_err() {
            break;
        }
    }
    // Closed also after a failed call.
    let end = xccl!(c, name, xccl_group_end());
    result.and(end)
}

impl DeviceCommunicator for PluginComm {
    type Stream = PluginStream;

    fn place(&self) -> &Place {
        &self.inner.place
    }
    fn rank(&self) -> usize {
        self.inner.rank
    }
    fn nranks(&self) -> usize {
        self.inner.nranks
    }

    fn collective(
        &self,
        stream: &PluginStream,
        call: &Collective,
        send: &PluginBuffer,
        recv: &PluginBuffer,
    ) -> Result<()> {
        let name = call.name();
        let core = self.core(name, stream)?;
        let [s, r] = self.buffers(name, [send, recv])?;
        let (rank, n) = (self.inner.rank, self.inner.nranks);
        let bytes = call.check(rank, n, s.len, r.len)?;
        let in_place = same(s, r);
        // `xccl_broadcast` works in place: the root's data is moved into `recv` first.
        let stage = call.kind.root() == Some(rank) && !in_place && bytes > 0;
        // In place, a reduce-scatter hands the plug-in NCCL's in-place layout (this rank's
        // result at `send[rank * count..]`), which is then moved to `recv[..count]` (no overlap
        // for rank >= 1).
        let scatter_in_place = in_place && rank > 0 && bytes > 0;
        match call.kind {
            CallKind::Broadcast { .. } if stage => {
                self.require_copy(name)?;
                if self.in_group() {
                    return Err(Error::InvalidArgument(format!(
                        "{name}: the root's copy from send to receive would run before the \
                         group's calls; broadcast in place (send = recv) inside a group on {}",
                        self.inner.place
                    )));
                }
            }
            CallKind::ReduceScatter { .. } if scatter_in_place => {
                self.require_copy(name)?;
                if self.in_group() {
                    return Err(Error::InvalidArgument(format!(
                        "{name}: in place inside a group is not supported on {} (rank {rank} > \
                         0); use separate buffers",
                        self.inner.place
                    )));
                }
            }
            CallKind::AllToAll if in_place && n > 1 && bytes > 0 => {
                return Err(Error::InvalidArgument(format!(
                    "{name}: in place is not supported on {} (the blocks are exchanged as \
                     concurrent sends and receives); use separate buffers",
                    self.inner.place
                )));
            }
            kind if kind.is_nccl_call() => {}
            _ => return Err(Error::unsupported(name, &self.inner.place)),
        }
        let t = self.dtype(name, call.dtype)?;
        let o = match call.kind.reduction() {
            Some(op) => self.redop(name, op)?,
            None => C_CCL_SUM,
        };
        // The root or peer (checked to be a rank).
        let other = call.kind.root().or(call.kind.peer()).unwrap_or(0);
        let (kind, count) = (call.kind, call.count);
        let rp = r.at(0);
        let sp = match kind {
            // In place, this rank's part is `recv[rank * count..]` (NCCL's in-place layout).
            CallKind::AllGather if in_place => r.at(rank * bytes),
            _ => s.at(0),
        };
        let at = match kind {
            CallKind::ReduceScatter { .. } if scatter_in_place => r.at(rank * bytes),
            _ => rp,
        };
        let native = self.inner.runtime.table().xccl_all_to_all.is_some();
        let buffers: &[&AbiBuffer] = if call.kind.is_point_to_point() {
            &[s]
        } else {
            &[s, r]
        };
        self.queue(core, buffers, call, move |c, core, raw| {
            let device_copy = |dst: usize, src: usize| {
                let kind = CopyKind::DeviceToDevice;
                let copy = RawCopy {
                    kind,
                    dst,
                    src,
                    len: bytes,
                };
                c.runtime.copy(core.slot, core.raw, copy)
            };
            match kind {
                CallKind::AllReduce { .. } => {
                    xccl!(
                        c,
                        name,
                        xccl_all_reduce(ptr(sp), ptr(rp), count, t, o, c.raw(), raw)
                    )
                }
                CallKind::Broadcast { .. } => {
                    if stage {
                        device_copy(rp, sp)?;
                    }
                    xccl!(
                        c,
                        name,
                        xccl_broadcast(ptr(rp), count, t, other, c.raw(), raw)
                    )
                }
                CallKind::Reduce { .. } => {
                    let (s, r) = (ptr(sp), ptr(rp));
                    xccl!(c, name, xccl_reduce(s, r, count, t, o, other, c.raw(), raw))
                }
                CallKind::AllGather => {
                    xccl!(
                        c,
                        name,
                        xccl_all_gather(ptr(sp), ptr(rp), count, t, c.raw(), raw)
                    )
                }
                CallKind::ReduceScatter { .. } => {
                    let (s, r) = (ptr(sp), ptr(at));
                    xccl!(
                        c,
                        name,
                        xccl_reduce_scatter(s, r, count, t, o, c.raw(), raw)
                    )?;
                    if at != rp {
                        device_copy(rp, at)?;
                    }
                    Ok(())
                }
                CallKind::AllToAll => {
                    let blocks = Blocks {
                        send: sp,
                        recv: rp,
                        count,
                        bytes,
                        dtype: t,
                    };
                    all_to_all(c, native, blocks, rank, n, raw)
                }
                CallKind::Send { .. } => {
                    xccl!(c, name, xccl_send(ptr(sp), count, t, other, c.raw(), raw))
                }
                CallKind::Recv { .. } => {
                    xccl!(c, name, xccl_recv(ptr(rp), count, t, other, c.raw(), raw))
                }
                _ => Err(Error::unsupported(name, &c.place)),
            }
        })
    }

    fn group_start(&self) -> Result<()> {
        lock(&self.group).start();
        Ok(())
    }

    /// Issues the group. On one stream the group is one operation of it. Over several
    /// streams, each call is issued at once on this thread between `xccl_group_start` and
    /// `xccl_group_end`, which needs every stream free of work held on the host (a flag or
    /// event wait not yet passed): otherwise `InvalidArgument` and nothing is queued.
    /// Known gap: the check and the issue are not atomic, so another thread that makes one of
    /// these streams hold work in between gets that stream's call issued later, outside the
    /// group (use one stream per group, or no concurrent waits on its streams, meanwhile).
    fn group_end(&self) -> Result<()> {
        let Some(calls) = lock(&self.group).end()? else {
            return Ok(());
        };
        let Some(first) = calls.first().map(|p| p.core.clone()) else {
            return Ok(());
        };
        let inner = self.inner.clone();
        if calls.iter().all(|p| p.core.id == first.id) {
            // One stream: the whole group is one operation of it, issued on one thread.
            return first.submit(Item::Op(Box::new(move |core: &StreamCore| {
                core.runtime.bind(core.slot)?;
                xccl!(&inner, "group_end", xccl_group_start())?;
                let mut result = Ok(());
                for pending in calls {
                    let Pending { call, _keep, .. } = pending;
                    let done = call(core);
                    if result.is_ok() {
                        result = done;
                    }
                }
                let end = xccl!(&inner, "group_end", xccl_group_end());
                result.and(end)
            })));
        }
        if let Some(held) = calls.iter().find(|p| p.core.has_deferred()) {
            return Err(Error::InvalidArgument(format!(
                "group_end: stream {} holds work on the host (behind a flag or event wait), so \
                 a group over several streams cannot be issued in one piece on {}; nothing of \
                 the group was queued",
                held.core.id, self.inner.place
            )));
        }
        self.inner.runtime.bind(self.inner.slot)?;
        xccl!(&inner, "group_end", xccl_group_start())?;
        let mut result = Ok(());
        for Pending { core, call, _keep } in calls {
            let done = core.submit(Item::Op(call));
            if result.is_ok() {
                result = done;
            }
        }
        let end = xccl!(&inner, "group_end", xccl_group_end());
        result.and(end)
    }
}

impl CommBackend for PluginBackend {
    type Comm = PluginComm;

    fn unique_id(place: &Place) -> Result<UniqueId> {
        PluginComm::unique_id(place)
    }

    fn init_comm(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<PluginComm> {
        PluginComm::init(place, rank, nranks, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_and_reduction_has_an_abi_code() {
        let mut types: Vec<_> = DataType::ALL.iter().map(|&t| c_data_type(t)).collect();
        assert!(types.iter().all(Option::is_some));
        types.sort();
        types.dedup();
        assert_eq!(types.len(), DataType::ALL.len());
        let mut ops: Vec<_> = ReduceOp::ALL.iter().map(|&o| c_reduce_op(o)).collect();
        assert!(ops.iter().all(Option::is_some));
        ops.sort();
        ops.dedup();
        assert_eq!(ops.len(), ReduceOp::ALL.len());
        assert_eq!(c_data_type(DataType::BF16), Some(13));
        assert_eq!(c_reduce_op(ReduceOp::Prod), Some(4));
    }

    #[test]
    fn a_zeroed_table_misses_every_xccl_function() {
        assert_eq!(
            missing(&C_DeviceInterface::zeroed()),
            REQUIRED_XCCL.to_vec()
        );
    }
}
