//! The worker pool and the tasks it runs.
//!
//! Each stream owns a FIFO of [`Task`]s (in [`crate::stream`]). A stream with runnable work is
//! *scheduled*: it sits in one of the pool's per-priority ready queues or is being run by a
//! worker. A worker pops the highest-priority ready stream and runs its tasks one at a time; it
//! hands the stream back to the ready queue when a stream of higher priority becomes ready (or,
//! after a batch, when another stream of the same priority waits), so priorities hold between
//! tasks. A stream whose next task waits for another stream's progress or for a flag is
//! *blocked*: it leaves the scheduler, registers itself with what it waits for and is put back
//! into the ready queue by whoever satisfies the wait. Nothing polls: an idle worker (one at a
//! time) backs off for a few microseconds (see [`Backoff`]) and then sleeps on a condvar.

use crate::buffer::{BufferInner, HostInner};
use crate::event::EventInner;
use crate::flag::FlagInner;
use crate::lock;
use crate::stream::StreamInner;
use devstream_core::host_fn_access::QueuedCopy;
use devstream_core::ops::{BufferOp, Transfer};
use devstream_core::panic::{drop_contained, take_message};
use devstream_core::{Error, HostFn, Result};
use std::cell::Cell;
use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use sync::{AtomicBool, AtomicU32, AtomicUsize, Condvar};

#[cfg(all(loom, test))]
mod loom_tests;
mod sync;

/// Number of priority levels (native priorities `0`, `-1`, `-2`).
pub(crate) const LEVELS: usize = 3;

/// Tasks a worker runs from one stream before it looks whether another stream of the same
/// priority is waiting (streams of higher priority are looked for after every task).
const BATCH: u32 = 64;

/// A kernel: a closure over mutable views of the buffers it was launched with.
pub(crate) type KernelFn = Box<dyn FnMut(&mut [&mut [u8]]) + Send + 'static>;

/// User code the backend owns (a host function or a kernel closure), whose destructor may
/// panic. Wherever it is dropped (on a worker after it ran, with a graph or a discarded
/// capture on a user's thread, also while that thread unwinds), the destructor runs inside
/// `catch_unwind` and panic payloads go through `devstream_core::panic::drop_payload`. So no worker ever
/// dies of user code and no drop of a devstream object panics.
pub(crate) struct UserFn<F>(ManuallyDrop<F>);

impl<F> UserFn<F> {
    pub(crate) fn new(f: F) -> UserFn<F> {
        UserFn(ManuallyDrop::new(f))
    }

    pub(crate) fn get_mut(&mut self) -> &mut F {
        &mut self.0
    }

    /// Drops the closure now; the message of its destructor's panic, if it panicked.
    fn dispose(self) -> Option<String> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (ManuallyDrop), so the closure is taken exactly once
        // and not touched again.
        let f = unsafe { ManuallyDrop::take(&mut this.0) };
        drop_contained(f)
    }
}

impl<F> Drop for UserFn<F> {
    fn drop(&mut self) {
        // SAFETY: this is the drop of `self`; the closure is taken once and `self.0` is never
        // used again.
        let f = unsafe { ManuallyDrop::take(&mut self.0) };
        let _message = drop_contained(f);
    }
}

/// The CPU backend's copies and fills: [`BufferOp`] over its shared buffer records.
pub(crate) type CpuBufferOp = BufferOp<Arc<BufferInner>, Arc<HostInner>>;

/// An operation that can be captured into a graph and replayed any number of times (so every
/// field is shared, and `Clone` is cheap).
#[derive(Clone)]
pub(crate) enum CommonOp {
    /// A host function kept for replay.
    Host(Arc<Mutex<UserFn<HostFn>>>),
    /// A kernel kept for replay, with its buffers.
    Kernel {
        kernel: Arc<Mutex<UserFn<KernelFn>>>,
        buffers: Arc<[Arc<BufferInner>]>,
    },
    /// Hold the stream until the flag is ≥ `value`.
    WaitFlag { flag: Arc<FlagInner>, value: u32 },
    /// Write the flag.
    WriteFlag { flag: Arc<FlagInner>, value: u32 },
    /// A copy or a fill.
    Buffer(CpuBufferOp),
    /// Reports the result of another backend's work this stream waited for (behind the flag
    /// wait that held the stream until that work completed): every run of it, a graph's replays
    /// included, reports an error of that work as this stream's.
    Foreign(Arc<devstream_core::foreign::ForeignOutcome>),
}

/// One unit of stream work.
pub(crate) enum Op {
    /// A host function, run once.
    Host(UserFn<HostFn>),
    /// A kernel, run once.
    Kernel(UserFn<KernelFn>, Arc<[Arc<BufferInner>]>),
    /// Timestamp a timing event's record (generation `generation`).
    Stamp {
        event: Arc<EventInner>,
        generation: u64,
    },
    /// Hold the stream until `stream` has completed `seq` tasks.
    WaitSeq { stream: Arc<StreamInner>, seq: u64 },
    /// Nothing: a marker that later work of other streams can wait for.
    Nop,
    /// A capturable operation.
    Common(CommonOp),
}

impl Op {
    /// The capturable form of this operation, or `None` for operations that are never captured
    /// (timestamps and waits between streams become graph edges, not nodes).
    pub(crate) fn into_common(self) -> Option<CommonOp> {
        match self {
            Op::Host(f) => Some(CommonOp::Host(Arc::new(Mutex::new(f)))),
            Op::Kernel(kernel, buffers) => Some(CommonOp::Kernel {
                kernel: Arc::new(Mutex::new(kernel)),
                buffers,
            }),
            Op::Common(common) => Some(common),
            Op::Stamp { .. } | Op::WaitSeq { .. } | Op::Nop => None,
        }
    }

    /// The host buffer the operation touches, if any (host reads and writes wait for it).
    pub(crate) fn host_buffer(&self) -> Option<&Arc<HostInner>> {
        match self {
            Op::Common(CommonOp::Buffer(BufferOp::HostToDevice(t))) => Some(&t.src),
            Op::Common(CommonOp::Buffer(BufferOp::DeviceToHost(t))) => Some(&t.dst),
            _ => None,
        }
    }

    /// If this is a wait that is not satisfied yet, what it waits for.
    fn pending_wait(&self) -> Option<Wait> {
        match self {
            Op::WaitSeq { stream, seq } if stream.completed.load(Ordering::Acquire) < *seq => {
                Some(Wait::Stream(stream.clone(), *seq))
            }
            Op::Common(CommonOp::WaitFlag { flag, value }) if !flag.reached(*value) => {
                Some(Wait::Flag(flag.clone(), *value))
            }
            _ => None,
        }
    }
}

/// What a blocked stream waits for.
enum Wait {
    Stream(Arc<StreamInner>, u64),
    Flag(Arc<FlagInner>, u32),
}

/// A queued operation plus the registration that makes host-buffer reads wait for it.
pub(crate) struct Task {
    pub(crate) op: Op,
    pub(crate) _host_use: Option<QueuedCopy>,
}

thread_local! {
    /// The id of the stream whose task this worker thread is running (0: none).
    static RUNNING: Cell<u64> = const { Cell::new(0) };
}

/// The id of the stream whose host function or kernel the calling thread is running, if any
/// (0: none). A non-zero value means the caller is a pool worker inside user code: blocking
/// waits there are refused (`stream::blocking_in_worker`) and host-buffer access does not wait
/// for queued copies (`HostInner::wait_idle`), so a worker never blocks on other work.
pub(crate) fn running_stream() -> u64 {
    RUNNING.with(Cell::get)
}

/// Runs a task's operation, catching panics of user code. Consumes (drops) the task, so what it
/// kept alive is released before the task counts as completed.
fn execute(task: Task, stream: u64) -> Result<()> {
    RUNNING.with(|running| running.set(stream));
    let result = match task.op {
        Op::Host(mut f) => {
            let ran = guarded(stream, "", || (f.get_mut())());
            ran.and(disposed(stream, "", f.dispose()))
        }
        Op::Kernel(mut kernel, buffers) => {
            let ran = guarded(stream, "kernel: ", || {
                run_kernel(kernel.get_mut(), &buffers)
            });
            ran.and(disposed(stream, "kernel: ", kernel.dispose()))
        }
        Op::Stamp { event, generation } => {
            event.stamp(generation);
            Ok(())
        }
        Op::WaitSeq { .. } | Op::Nop => Ok(()),
        Op::Common(common) => execute_common(common, stream),
    };
    RUNNING.with(|running| running.set(0));
    result
}

fn execute_common(op: CommonOp, stream: u64) -> Result<()> {
    match op {
        CommonOp::Host(f) => {
            let ran = guarded(stream, "", || (lock(&f).get_mut())());
            ran.and(release(stream, "", f))
        }
        CommonOp::Kernel { kernel, buffers } => {
            let ran = guarded(stream, "kernel: ", || {
                run_kernel(lock(&kernel).get_mut(), &buffers)
            });
            ran.and(release(stream, "kernel: ", kernel))
        }
        CommonOp::WaitFlag { .. } => Ok(()),
        CommonOp::WriteFlag { flag, value } => {
            flag.store(value);
            Ok(())
        }
        CommonOp::Buffer(op) => execute_buffer(op),
        CommonOp::Foreign(outcome) => outcome.result(),
    }
}

/// Runs a copy or a fill (its ranges were checked when it was submitted; they are checked again
/// here, where the bytes are touched).
fn execute_buffer(op: CpuBufferOp) -> Result<()> {
    match op {
        BufferOp::CopyFromHost { dst, offset, data } => {
            let mut dst = dst.lock();
            copy_into(&mut dst, offset, &data)
        }
        BufferOp::HostToDevice(t) => {
            // Lock order: device buffers before the host buffer.
            let mut dst = t.dst.lock();
            transfer(&mut dst, &lock(&t.src.data), &t)
        }
        BufferOp::DeviceToHost(t) => {
            let src = t.src.lock();
            transfer(&mut lock(&t.dst.data), &src, &t)
        }
        BufferOp::DeviceToDevice(t) => {
            let (dst, src) = (&t.dst, &t.src);
            if Arc::ptr_eq(dst, src) {
                let mut data = dst.lock();
                slice(&data, t.src_offset, t.len)?;
                slice(&data, t.dst_offset, t.len)?;
                data.copy_within(t.src_offset..t.src_offset + t.len, t.dst_offset);
                Ok(())
            } else if dst.lock_order() < src.lock_order() {
                // The crate-wide lock order between device buffers.
                let mut dst = dst.lock();
                transfer(&mut dst, &src.lock(), &t)
            } else {
                let src = src.lock();
                transfer(&mut dst.lock(), &src, &t)
            }
        }
        BufferOp::Fill {
            dst,
            offset,
            len,
            value,
        } => {
            let mut dst = dst.lock();
            match offset
                .checked_add(len)
                .and_then(|end| dst.get_mut(offset..end))
            {
                Some(bytes) => {
                    bytes.fill(value);
                    Ok(())
                }
                None => Err(range_error("fill")),
            }
        }
    }
}

/// Copies `t`'s bytes from `src` (the source buffer's bytes) into `dst` (the destination's).
fn transfer<Dst, Src>(dst: &mut [u8], src: &[u8], t: &Transfer<Dst, Src>) -> Result<()> {
    copy_into(dst, t.dst_offset, slice(src, t.src_offset, t.len)?)
}

fn range_error(op: &str) -> Error {
    Error::InvalidArgument(format!("{op}: range outside the buffer"))
}

fn slice(data: &[u8], offset: usize, len: usize) -> Result<&[u8]> {
    offset
        .checked_add(len)
        .and_then(|end| data.get(offset..end))
        .ok_or_else(|| range_error("copy"))
}

fn copy_into(dst: &mut [u8], offset: usize, src: &[u8]) -> Result<()> {
    match offset
        .checked_add(src.len())
        .and_then(|end| dst.get_mut(offset..end))
    {
        Some(out) => {
            out.copy_from_slice(src);
            Ok(())
        }
        None => Err(range_error("copy")),
    }
}

/// Locks the kernel's buffers (in the crate-wide lock order, `BufferInner::lock_order`) and
/// hands the kernel their bytes in the order it was launched with.
fn run_kernel(kernel: &mut KernelFn, buffers: &[Arc<BufferInner>]) {
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&index| buffers[index].lock_order());
    let mut guards: Vec<Option<_>> = buffers.iter().map(|_| None).collect();
    for index in order {
        guards[index] = Some(buffers[index].lock());
    }
    let mut views: Vec<&mut [u8]> = guards.iter_mut().flatten().map(|g| &mut g[..]).collect();
    kernel(&mut views);
}

/// Runs user code, turning a panic into `Error::HostFuncPanicked`. `f` must only borrow the
/// user's closure: a closure it owned would be dropped while the panic unwinds, and a
/// destructor that panics then aborts the process.
fn guarded(stream: u64, prefix: &str, f: impl FnOnce()) -> Result<()> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| Error::HostFuncPanicked {
        stream,
        message: format!("{prefix}{}", take_message(payload)),
    })
}

/// `Error::HostFuncPanicked` if the user closure's destructor panicked (`message`).
fn disposed(stream: u64, prefix: &str, message: Option<String>) -> Result<()> {
    match message {
        None => Ok(()),
        Some(message) => Err(Error::HostFuncPanicked {
            stream,
            message: format!("{prefix}destructor panicked: {message}"),
        }),
    }
}

/// Drops a replayable closure's handle; if it was the last one (its graph is gone), the
/// closure is dropped here and a panic of its destructor is reported like `disposed`.
fn release<F>(stream: u64, prefix: &str, f: Arc<Mutex<UserFn<F>>>) -> Result<()> {
    match Arc::try_unwrap(f) {
        Ok(f) => {
            let f = f
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            disposed(stream, prefix, f.dispose())
        }
        Err(_shared) => Ok(()),
    }
}

/// What the pool schedules: a stream, in every build; a plain job in the loom models.
pub(crate) trait Schedulable {
    /// The ready queue it goes into (0 is the highest priority, `< LEVELS`).
    fn level(&self) -> usize;
}

impl Schedulable for Arc<StreamInner> {
    #[inline]
    fn level(&self) -> usize {
        self.level
    }
}

/// The scheduler state shared by a pool's workers.
///
/// Generic over what it schedules only so that the loom models (`scheduler/loom_tests.rs`) run
/// this very `push` / `pop` / `shut_down` on plain jobs; production schedules streams.
/// The handshake's atomics, mutex and condvar come from [`sync`] (loom's under `--cfg loom`).
pub(crate) struct PoolShared<T = Arc<StreamInner>> {
    ready: sync::Mutex<Ready<T>>,
    work: Condvar,
    /// Bit `l` set iff ready queue `l` is non-empty (0 is the highest priority). Read without
    /// the lock by running workers to decide whether to hand their stream back.
    mask: AtomicU32,
    /// 1 while an idle worker spins looking for work (at most one does).
    spinning: AtomicUsize,
    shutdown: AtomicBool,
}

struct Ready<T> {
    levels: [VecDeque<T>; LEVELS],
    sleeping: usize,
}

impl<T: Schedulable> PoolShared<T> {
    /// An empty pool state (no worker started).
    fn new() -> PoolShared<T> {
        PoolShared {
            ready: sync::Mutex::new(Ready {
                levels: std::array::from_fn(|_| VecDeque::new()),
                sleeping: 0,
            }),
            work: Condvar::new(),
            mask: AtomicU32::new(0),
            spinning: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Puts a scheduled stream into its ready queue and wakes a sleeping worker unless an idle
    /// worker is spinning (it will find the stream).
    pub(crate) fn push(&self, stream: T) {
        let level = stream.level();
        let mut ready = sync::lock(&self.ready);
        ready.levels[level].push_back(stream);
        self.mask.fetch_or(1 << level, Ordering::SeqCst);
        let wake = ready.sleeping > 0 && self.spinning.load(Ordering::SeqCst) == 0;
        drop(ready);
        if wake {
            self.work.notify_one();
        }
    }

    fn pop_ready(&self, ready: &mut Ready<T>) -> Option<T> {
        for level in 0..LEVELS {
            if let Some(stream) = ready.levels[level].pop_front() {
                if ready.levels[level].is_empty() {
                    self.mask.fetch_and(!(1 << level), Ordering::Relaxed);
                }
                return Some(stream);
            }
        }
        None
    }

    /// The highest-priority ready stream; when there is none, one idle worker at a time spins
    /// through a short bounded backoff (see [`Backoff`]) before sleeping until a stream is
    /// pushed. `None` when the pool shuts down.
    fn pop(&self) -> Option<T> {
        if self
            .spinning
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let mut backoff = Backoff::new();
            let found = loop {
                if self.mask.load(Ordering::SeqCst) != 0 {
                    let mut ready = sync::lock(&self.ready);
                    if let Some(stream) = self.pop_ready(&mut ready) {
                        break Some((stream, ready));
                    }
                } else if backoff.is_completed() {
                    break None;
                } else {
                    backoff.snooze();
                }
            };
            // Stop spinning before the locked re-check below, so that a push either sees no
            // spinner (and notifies) or is found by that re-check.
            self.spinning.store(0, Ordering::SeqCst);
            if let Some((stream, ready)) = found {
                self.wake_another(&ready);
                return Some(stream);
            }
        }
        let mut ready = sync::lock(&self.ready);
        loop {
            if let Some(stream) = self.pop_ready(&mut ready) {
                self.wake_another(&ready);
                return Some(stream);
            }
            if self.shutdown.load(Ordering::Acquire) {
                return None;
            }
            ready.sleeping += 1;
            ready = self
                .work
                .wait(ready)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ready.sleeping -= 1;
        }
    }

    /// After taking a stream: if more are ready and workers sleep, wake one for them.
    fn wake_another(&self, ready: &Ready<T>) {
        if ready.sleeping > 0 && ready.levels.iter().any(|level| !level.is_empty()) {
            self.work.notify_one();
        }
    }

    /// Makes every worker's `pop` return `None` once the ready queues are empty, waking the
    /// sleeping ones. The flag is set before taking the lock and the notification is sent under
    /// it, so a worker is either past its locked shutdown check (and waiting: it is woken) or
    /// sees the flag there.
    fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
        let _ready = sync::lock(&self.ready);
        self.work.notify_all();
    }
}

/// Whether waits may spin briefly before parking (`DEVSTREAM_CPU_SPIN=0` turns it off).
fn spin_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("DEVSTREAM_CPU_SPIN").map_or(true, |v| v.trim() != "0"))
}

/// A bounded backoff before a thread parks, as `crossbeam`'s receivers and `std`'s locks do:
/// 127 spin-loop hints in doubling rounds, then four `yield_now`s, then the caller parks.
/// It is at most a few microseconds; no wait in this crate polls beyond it.
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    #[cfg(not(loom))]
    const SPIN_LIMIT: u32 = 6;
    #[cfg(not(loom))]
    const YIELD_LIMIT: u32 = 10;
    // Under loom: two spin rounds and one yield, so the models explore a spinner that finds
    // the work and one that gives up and parks, without multiplying interleavings by 11 rounds.
    #[cfg(loom)]
    const SPIN_LIMIT: u32 = 1;
    #[cfg(loom)]
    const YIELD_LIMIT: u32 = 2;

    pub(crate) fn new() -> Backoff {
        Backoff {
            step: if spin_allowed() {
                0
            } else {
                Self::YIELD_LIMIT + 1
            },
        }
    }

    /// One backoff round.
    pub(crate) fn snooze(&mut self) {
        if self.step <= Self::SPIN_LIMIT {
            for _ in 0..1u32 << self.step {
                sync::spin_loop();
            }
        } else {
            sync::yield_now();
        }
        self.step += 1;
    }

    /// Whether the caller should park now.
    pub(crate) fn is_completed(&self) -> bool {
        self.step > Self::YIELD_LIMIT
    }
}

/// Owner side of a pool: streams hold it; when the last one goes, the workers exit.
pub(crate) struct PoolHandle {
    pub(crate) shared: Arc<PoolShared>,
    pub(crate) workers: usize,
}

impl PoolHandle {
    /// Starts a pool of `workers` threads (at least one must start).
    pub(crate) fn start(workers: usize) -> Result<Arc<PoolHandle>> {
        let shared = Arc::new(PoolShared::new());
        let mut started = 0;
        let mut last_error = None;
        for index in 0..workers {
            let worker_shared = shared.clone();
            match std::thread::Builder::new()
                .name(format!("devstream-cpu-{index}"))
                .spawn(move || worker(worker_shared))
            {
                Ok(_) => started += 1,
                Err(error) => last_error = Some(error),
            }
        }
        if started == 0 {
            return Err(Error::BackendUnavailable {
                backend: "cpu",
                reason: format!(
                    "could not start a worker thread: {}",
                    last_error.map_or_else(|| "no workers requested".into(), |e| e.to_string())
                ),
            });
        }
        Ok(Arc::new(PoolHandle {
            shared,
            workers: started,
        }))
    }
}

impl Drop for PoolHandle {
    fn drop(&mut self) {
        self.shared.shut_down();
    }
}

fn worker(shared: Arc<PoolShared>) {
    while let Some(stream) = shared.pop() {
        run_stream(&shared, stream);
    }
}

/// Runs a scheduled stream's tasks until its queue is empty, it blocks, or it yields to a
/// higher-priority stream.
fn run_stream(pool: &PoolShared, stream: Arc<StreamInner>) {
    let own_bit = 1u32 << stream.level;
    let higher_bits = own_bit - 1;
    let mut budget = BATCH;
    loop {
        let Some(task) = stream.next_task() else {
            // `active` counted a task whose push is not visible yet (cannot happen: tasks are
            // pushed before they are counted). Hand the stream back rather than lose it.
            pool.push(stream);
            return;
        };
        if let Some(wait) = task.op.pending_wait() {
            stream.park_head(task);
            // From here on another worker may run the stream: do not touch it again.
            let registered = match &wait {
                Wait::Stream(target, seq) => target.add_stream_waiter(*seq, &stream),
                Wait::Flag(flag, value) => flag.add_waiter(*value, &stream),
            };
            if !registered {
                // Satisfied meanwhile: schedule again.
                pool.push(stream);
            }
            return;
        }
        let result = execute(task, stream.id);
        if !stream.complete_one(result) {
            return;
        }
        budget -= 1;
        let mask = pool.mask.load(Ordering::Relaxed);
        if mask & higher_bits != 0 || (budget == 0 && mask & own_bit != 0) {
            // Stays scheduled: back into the ready queue, behind the others.
            pool.push(stream);
            return;
        }
        if budget == 0 {
            budget = BATCH;
        }
    }
}
