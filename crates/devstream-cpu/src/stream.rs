//! CPU streams: a lock-free FIFO of tasks, counters, and the capture state.
//!
//! Every submitted task bumps *submitted*; the worker running the stream bumps *completed*
//! after each task (tasks run in queue order, so "completed ≥ n" means the first n tasks in
//! queue order are done). `query` compares the two (atomics, no lock), an event records the
//! submitted count, and "wait until stream S completed n" is the one dependency primitive
//! (threads park on it, blocked streams register on it).
//!
//! Submitting to a non-blocking stream takes no lock: the task goes into a lock-free queue and
//! an `active` counter (tasks queued and not completed) decides who schedules the stream: the
//! submitter whose increment took it from 0. Exactly one worker runs a scheduled stream; it
//! drains the queue, decrementing `active` per task, and stops when that reaches 0. A stream
//! whose head task waits parks that task in `head`, registers with what it waits for and is
//! pushed back to the ready queue by whoever satisfies the wait.
//!
//! Locking rules: a thread holds at most one stream lock at a time, except that a stream lock
//! may be held while taking an event, session, host-buffer, registry or ready-queue lock; user
//! code never runs under a stream lock.

use crate::buffer::{BufferInner, CpuBuffer, CpuHostBuffer, HostInner};
use crate::device::{self, CAPABILITIES, PRIORITY_RANGE};
use crate::event::{CpuEvent, Record};
use crate::flag::CpuFlag;
use crate::graph::{check_unsafe_call, CpuGraph, Frontier, Session};
use crate::graph_memory::CaptureMemory;
use crate::mempool::CpuMemoryPool;
use crate::scheduler::{running_stream, Backoff, CommonOp, Op, PoolHandle, Task, UserFn};
use crate::{lock, CPU_PLACE};
use crossbeam_channel::{Receiver, Sender};
use devstream_core::elide::{Mark, WaitTracker};
use devstream_core::mempool;
use devstream_core::ops::BufferOp;
use devstream_core::selfwait;
use devstream_core::{
    next_id, Capabilities, CaptureMode, Completer, Completion, DevicePool, DeviceStream, Error,
    HostFn, Place, Priority, Result, StreamOptions,
};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::Thread;

mod capturing;
mod waiters;

use waiters::CompletionWaiter;

/// What kind of stream, for live counts and legacy-stream ordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamKind {
    /// Created by the user (counted in live counts).
    User,
    /// The process-wide legacy default stream.
    Legacy,
    /// A per-thread default stream (blocking).
    PerThread,
    /// A graph's internal branch stream.
    Helper,
}

/// A stream's part in a capture.
pub(crate) struct StreamCapture {
    pub(crate) session: Arc<Session>,
    pub(crate) lane: usize,
}

/// The mutable part of a stream, behind its lock (never touched on the fast submit path).
pub(crate) struct StreamState {
    /// The head task of a blocked stream (owned by whichever worker runs the stream next).
    head: Option<Task>,
    /// The first unreported error and the task number that raised it.
    error: Option<(u64, Error)>,
    /// Threads parked until `completed` reaches a number.
    thread_waiters: Vec<(u64, Thread)>,
    /// Blocked streams to wake when `completed` reaches a number.
    stream_waiters: Vec<(u64, Arc<StreamInner>)>,
    /// Futures ([`Completion`]s) to complete when `completed` reaches a number.
    completion_waiters: Vec<CompletionWaiter>,
    /// The length of `completion_waiters` at which abandoned entries are pruned next.
    prune_at: usize,
    capture: Option<StreamCapture>,
    /// The legacy stream's submitted count this (blocking) stream last ordered itself after.
    legacy_seen: u64,
}

/// Shared state of a [`CpuStream`].
pub(crate) struct StreamInner {
    pub(crate) id: u64,
    pub(crate) native_priority: i32,
    /// Ready-queue level: 0 is the highest priority.
    pub(crate) level: usize,
    pub(crate) non_blocking: bool,
    pub(crate) kind: StreamKind,
    pub(crate) submitted: AtomicU64,
    /// Tasks pushed into the queue so far: `submitted` less the pushes in progress (see
    /// `enqueue`).
    pushed: AtomicU64,
    pub(crate) completed: AtomicU64,
    /// Tasks queued and not completed yet; its 0 → 1 transition schedules the stream.
    active: AtomicU64,
    /// The smallest task number a registered waiter waits for (`u64::MAX`: none). Written under
    /// the lock; read by the worker after each task (SeqCst on both sides, see `register`).
    min_waiter: AtomicU64,
    has_error: AtomicBool,
    /// Mirrors `state.capture.is_some()` for lock-free fast paths.
    pub(crate) capturing: AtomicBool,
    /// Live [`CpuStream`] handles. At zero no more work can be queued through one and no
    /// `end_capture` can come: a capture this stream began ends then (see
    /// [`StreamInner::abandon_capture`]), although queued work, events and objects may keep
    /// the stream itself alive much longer.
    handles: AtomicUsize,
    has_head: AtomicBool,
    sender: Sender<Task>,
    receiver: Receiver<Task>,
    state: Mutex<StreamState>,
    pub(crate) pool: Arc<PoolHandle>,
    /// What this stream already waited for (positions: other streams' submitted counts).
    tracker: WaitTracker,
}

/// The smallest length of a stream's completion waiter list at which it is pruned.
pub(crate) const PRUNE_MIN: usize = 64;

/// Blocking streams (user `blocking(true)` and per-thread streams), which the legacy default
/// stream orders itself after.
static BLOCKING: Mutex<Vec<Weak<StreamInner>>> = Mutex::new(Vec::new());

/// Queues tasks on one stream and remembers whether the stream must be scheduled.
pub(crate) struct Pusher<'a> {
    stream: &'a Arc<StreamInner>,
    schedule: bool,
}

impl Pusher<'_> {
    /// Queues `op`; returns a task number that is complete only once `op` is.
    pub(crate) fn push(&mut self, op: Op) -> u64 {
        self.schedule |= self.stream.enqueue(op);
        self.seq()
    }

    /// The stream's submitted count now.
    pub(crate) fn seq(&self) -> u64 {
        self.stream.submitted.load(Ordering::Acquire)
    }

    /// Queues "wait until `stream` has completed `seq`" unless that is already true.
    pub(crate) fn wait_for(&mut self, stream: &Arc<StreamInner>, seq: u64) {
        if !Arc::ptr_eq(stream, self.stream) && stream.completed.load(Ordering::Acquire) < seq {
            let stream = stream.clone();
            self.push(Op::WaitSeq { stream, seq });
        }
    }
}

impl StreamInner {
    pub(crate) fn new(
        pool: Arc<PoolHandle>,
        native_priority: i32,
        non_blocking: bool,
        kind: StreamKind,
        elide_waits: bool,
    ) -> Arc<StreamInner> {
        let native_priority = PRIORITY_RANGE.clamp(native_priority);
        let (sender, receiver) = crossbeam_channel::unbounded();
        let inner = Arc::new(StreamInner {
            id: next_id(),
            native_priority,
            level: native_priority.abs_diff(PRIORITY_RANGE.greatest) as usize,
            non_blocking,
            kind,
            submitted: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            active: AtomicU64::new(0),
            min_waiter: AtomicU64::new(u64::MAX),
            has_error: AtomicBool::new(false),
            capturing: AtomicBool::new(false),
            handles: AtomicUsize::new(1),
            has_head: AtomicBool::new(false),
            sender,
            receiver,
            state: Mutex::new(StreamState {
                head: None,
                error: None,
                thread_waiters: Vec::new(),
                stream_waiters: Vec::new(),
                completion_waiters: Vec::new(),
                prune_at: PRUNE_MIN,
                capture: None,
                legacy_seen: 0,
            }),
            pool,
            tracker: WaitTracker::new(elide_waits),
        });
        if kind == StreamKind::User {
            device::LIVE_STREAMS.fetch_add(1, Ordering::Relaxed);
        }
        if !non_blocking && kind != StreamKind::Legacy {
            let mut blocking = lock(&BLOCKING);
            blocking.retain(|weak| weak.strong_count() > 0);
            blocking.push(Arc::downgrade(&inner));
        }
        inner
    }

    /// A branch stream for a graph launched on `target`: same pool and priority.
    pub(crate) fn helper(target: &StreamInner) -> Arc<StreamInner> {
        StreamInner::new(
            target.pool.clone(),
            target.native_priority,
            true,
            StreamKind::Helper,
            false,
        )
    }

    /// Appends a task (lock-free); returns whether the caller must schedule the stream.
    ///
    /// `submitted` is bumped before the push, so every task in the queue is counted: the
    /// tasks queued before any moment are a prefix of the queue no longer than `submitted` at
    /// that moment, which is what makes "completed ≥ submitted-at-record" a correct event.
    ///
    /// Threads submitting at once push in the order they counted (a ticket each: the count
    /// before its bump, its position in the queue). Otherwise a thread preempted between its
    /// count and its push would let another thread's record count its task while the other
    /// thread's next task went ahead of it in the queue: a host function queued right after a
    /// record would run before the record's work was complete, and a wait on that event from
    /// inside it could never return. A lone submitter never waits; one racing another waits
    /// only for the other's push, which never blocks (the channel is unbounded).
    fn enqueue(&self, op: Op) -> bool {
        let host_use = op.host_buffer().map(|host| host.begin_use());
        let ticket = self.submitted.fetch_add(1, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.pushed.load(Ordering::Acquire) != ticket {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        // Cannot fail: the receiver lives as long as `self`.
        let _sent = self.sender.send(Task {
            op,
            _host_use: host_use,
        });
        self.pushed.store(ticket + 1, Ordering::Release);
        self.active.fetch_add(1, Ordering::AcqRel) == 0
    }

    /// Puts the stream into its pool's ready queue (also how a blocked stream is woken).
    pub(crate) fn wake(self: Arc<Self>) {
        let shared = self.pool.shared.clone();
        shared.push(self);
    }

    fn schedule(self: &Arc<Self>) {
        self.pool.shared.push(self.clone());
    }

    /// Queues work through `f`: for blocking streams under the stream lock, after the legacy
    /// stream ordering. Fails if the stream captures (callers that capture check first).
    pub(crate) fn queue<R>(
        self: &Arc<Self>,
        name: &'static str,
        f: impl FnOnce(&mut Pusher<'_>) -> R,
    ) -> Result<R> {
        let mut pusher = Pusher {
            stream: self,
            schedule: false,
        };
        let result = if self.non_blocking {
            if self.capturing.load(Ordering::Acquire) {
                return Err(capturing_now(name));
            }
            f(&mut pusher)
        } else {
            let mut state = lock(&self.state);
            if state.capture.is_some() {
                return Err(capturing_now(name));
            }
            self.implicit_deps(&mut state, &mut pusher);
            let result = f(&mut pusher);
            drop(state);
            result
        };
        if pusher.schedule {
            self.schedule();
        }
        Ok(result)
    }

    /// Legacy default stream ordering, applied before every task and record of a blocking
    /// stream: the legacy stream waits for all earlier work of blocking streams, a blocking
    /// stream for all earlier work of the legacy stream.
    fn implicit_deps(&self, state: &mut StreamState, pusher: &mut Pusher<'_>) {
        if self.kind == StreamKind::Legacy {
            let blocking: Vec<Arc<StreamInner>> =
                lock(&BLOCKING).iter().filter_map(Weak::upgrade).collect();
            for stream in &blocking {
                pusher.wait_for(stream, stream.submitted.load(Ordering::Acquire));
            }
        } else if let Some(legacy) = device::legacy_if_created() {
            let seq = legacy.submitted.load(Ordering::Acquire);
            if seq > state.legacy_seen {
                state.legacy_seen = seq;
                pusher.wait_for(legacy, seq);
            }
        }
    }

    /// Submits one operation: captured if the stream captures, queued otherwise.
    #[inline]
    pub(crate) fn submit(self: &Arc<Self>, op: Op, name: &'static str) -> Result<()> {
        if self.capturing.load(Ordering::Acquire) {
            if let Some((session, lane)) = self.capture_info() {
                let common = op
                    .into_common()
                    .ok_or_else(|| Error::capture(name, "this operation cannot be captured"))?;
                return session.add_node(lane, name, common);
            }
        }
        if self.non_blocking {
            // The fast path: no lock at all.
            if self.enqueue(op) {
                self.schedule();
            }
            return Ok(());
        }
        self.queue(name, |pusher| {
            pusher.push(op);
        })
    }

    /// Checks a copy or fill's ranges, then submits it (the buffers and bytes it keeps are
    /// shared handles, so a capture can replay it).
    pub(crate) fn submit_buffer(
        self: &Arc<Self>,
        op: BufferOp<&Arc<BufferInner>, &Arc<HostInner>, &[u8]>,
    ) -> Result<()> {
        op.validate()?;
        let owned = op.to_owned(
            |dst| Arc::clone(dst),
            |host| Arc::clone(host),
            |data| Arc::from(data),
        );
        let host = match &op {
            BufferOp::HostToDevice(transfer) => transfer.src,
            BufferOp::DeviceToHost(transfer) => transfer.dst,
            _ => return self.submit(Op::Common(CommonOp::Buffer(owned)), op.name()),
        };
        // A copy of a host buffer waits for the host functions given it that are pending
        // (`devstream_core::host_fn_access`); checked and registered under the buffer's order
        // lock, under which such a host function takes its snapshot of queued copies.
        let _order = lock(&host.order);
        for awaited in host.host_fns.awaited(&CPU_PLACE) {
            crate::foreign::wait_completion(self, awaited)?;
        }
        self.submit(Op::Common(CommonOp::Buffer(owned)), op.name())
    }

    /// The worker's next task: the parked head of a blocked stream, else the queue's front.
    pub(crate) fn next_task(&self) -> Option<Task> {
        if self.has_head.load(Ordering::Acquire) {
            self.has_head.store(false, Ordering::Relaxed);
            return lock(&self.state).head.take();
        }
        self.receiver.try_recv().ok()
    }

    /// Parks the head task of a stream that blocks on it.
    pub(crate) fn park_head(&self, task: Task) {
        lock(&self.state).head = Some(task);
        self.has_head.store(true, Ordering::Release);
    }

    /// Marks one task completed (called by the worker); wakes what waited for it. Returns
    /// whether more tasks are queued.
    pub(crate) fn complete_one(&self, result: Result<()>) -> bool {
        #[cfg(feature = "comm")]
        let result = match TASK_ERROR.with(std::cell::Cell::take) {
            Some(error) => result.and(Err(error)),
            None => result,
        };
        let seq = self.completed.load(Ordering::Relaxed) + 1;
        if let Err(error) = result {
            let mut state = lock(&self.state);
            if state.error.is_none() {
                state.error = Some((seq, error));
                self.has_error.store(true, Ordering::Release);
            }
        }
        self.completed.store(seq, Ordering::SeqCst);
        if self.min_waiter.load(Ordering::SeqCst) <= seq {
            self.release_waiters();
        }
        self.active.fetch_sub(1, Ordering::AcqRel) > 1
    }

    /// `synchronize` when the stream is busy, failed or capturing.
    #[cold]
    fn synchronize_slow(&self, target: u64) -> Result<()> {
        if self.capturing.load(Ordering::Acquire) {
            return Err(self.capture_violation("synchronize"));
        }
        if self.completed.load(Ordering::Acquire) < target {
            if let Some(error) = blocking_in_worker("synchronize", self.id) {
                return Err(error);
            }
            self.wait_until(target);
        }
        match self.take_error(target) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Takes the first unreported error raised by tasks up to `target`.
    fn take_error(&self, target: u64) -> Option<Error> {
        if !self.has_error.load(Ordering::Acquire) {
            return None;
        }
        let mut state: MutexGuard<'_, StreamState> = lock(&self.state);
        if state.error.as_ref().is_some_and(|(seq, _)| *seq <= target) {
            self.has_error.store(false, Ordering::Release);
            return state.error.take().map(|(_, error)| error);
        }
        None
    }
}

#[cfg(feature = "comm")]
thread_local! {
    /// An error the running task reports besides its own result (see [`fail_running_task`]).
    static TASK_ERROR: std::cell::Cell<Option<Error>> = const { std::cell::Cell::new(None) };
}

/// Makes the task this worker is running fail with `error` (the first one reported wins):
/// the stream records it as it records a panicking host function's, and `synchronize`
/// returns it. Used by the collectives' internal tasks, which report typed errors.
#[cfg(feature = "comm")]
pub(crate) fn fail_running_task(error: Error) {
    TASK_ERROR.with(|slot| {
        let first = slot.take().unwrap_or(error);
        slot.set(Some(first));
    });
}

/// The error for a wait that a host function or kernel makes (`running_stream() != 0`) on
/// work that is not complete; `None` on any other thread.
///
/// A CPU worker never blocks on other work: everything stream-ordered before the running task
/// is complete already, so an incomplete target is ordered after the task (its own stream,
/// or a stream that waits for it: a deadlock) or not ordered with it, and blocking the worker
/// for it can starve the pool. CUDA likewise forbids runtime calls in host functions.
pub(crate) fn blocking_in_worker(op: &'static str, target_stream: u64) -> Option<Error> {
    let running = running_stream();
    if running == 0 {
        return None;
    }
    let whose = if running == target_stream {
        "the host function's or kernel's own stream"
    } else {
        "another stream"
    };
    Some(selfwait::would_deadlock(
        op,
        format!(
            "work of {whose} that is not complete: a CPU worker never blocks on other work; \
             order the work with wait_event / wait_stream instead"
        ),
    ))
}

fn capturing_now(op: &'static str) -> Error {
    Error::capture(op, "the stream began capturing during the operation")
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.kind == StreamKind::User {
            device::LIVE_STREAMS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A CPU stream: an ordered queue of host work run by a worker pool. Cheap to clone (clones
/// are the same stream).
///
/// Dropping the last handle never blocks: queued work still runs, and what it uses stays alive
/// until it has.
///
/// Work still queued when the process exits may not run (as on CUDA): the pool's workers are
/// detached threads and nothing drains the queues at exit, so `synchronize` before returning
/// from `main` (or calling `std::process::exit`) when the work must finish. See the crate
/// documentation for why.
///
/// Inside one of its host functions or kernels, `synchronize` of a stream or event whose work
/// is not complete returns `Error::WouldDeadlock` instead of blocking the worker.
pub struct CpuStream(pub(crate) Arc<StreamInner>);

impl Clone for CpuStream {
    fn clone(&self) -> Self {
        self.0.handles.fetch_add(1, Ordering::Relaxed);
        CpuStream(self.0.clone())
    }
}

impl Drop for CpuStream {
    fn drop(&mut self) {
        // AcqRel: the last handle's drop sees every capture change made through the others.
        if self.0.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && self.0.capturing.load(Ordering::Acquire)
        {
            self.0.abandon_capture();
        }
    }
}

impl CpuStream {
    /// `true` iff all work submitted so far is done and the stream is not capturing: what
    /// [`query`](DeviceStream::query) answers `Ok(true)` for, as three loads and no error to
    /// build (a capture answers `false` here, `Err` there).
    ///
    /// ```
    /// use devstream_core::{DeviceBackend, Place, StreamOptions};
    /// let stream = devstream_cpu::CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
    /// assert!(stream.is_finished());
    /// ```
    #[inline]
    pub fn is_finished(&self) -> bool {
        let inner = &self.0;
        if inner.capturing.load(Ordering::Acquire) {
            return false;
        }
        let submitted = inner.submitted.load(Ordering::Acquire);
        inner.completed.load(Ordering::Acquire) >= submitted
    }

    pub(crate) fn with_pool(
        pool: Arc<PoolHandle>,
        options: StreamOptions,
        kind: StreamKind,
    ) -> CpuStream {
        let native = PRIORITY_RANGE.normalize(options.priority);
        CpuStream(StreamInner::new(
            pool,
            native,
            options.non_blocking,
            kind,
            options.elide_waits,
        ))
    }

    /// Runs `kernel` in stream order with mutable access to `buffers` (in the order given).
    ///
    /// This is the CPU place's native kernel path. Like every operation it can be captured;
    /// a captured kernel runs once per graph launch. A panic in the kernel is reported by
    /// `synchronize` as `Error::HostFuncPanicked`. The same buffer may not appear twice
    /// (`Error::InvalidArgument`).
    ///
    /// ```
    /// use devstream_core::{DeviceBackend, DeviceStream, HostBuffer, Place, StreamOptions};
    /// let s = devstream_cpu::CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
    /// let a = s.alloc(4).unwrap();
    /// let b = s.alloc(4).unwrap();
    /// s.copy_from_host(&a, 0, &[1, 2, 3, 4]).unwrap();
    /// s.launch_kernel(&[&a, &b], |views| {
    ///     let (input, output) = views.split_at_mut(1);
    ///     for (o, i) in output[0].iter_mut().zip(input[0].iter()) {
    ///         *o = i * 10;
    ///     }
    /// }).unwrap();
    /// let host = s.alloc_host(4).unwrap();
    /// s.copy_device_to_host(&host, 0, &b, 0, 4).unwrap();
    /// assert_eq!(host.to_vec().unwrap(), [10, 20, 30, 40]);
    /// ```
    pub fn launch_kernel(
        &self,
        buffers: &[&CpuBuffer],
        kernel: impl FnMut(&mut [&mut [u8]]) + Send + 'static,
    ) -> Result<()> {
        for (index, buffer) in buffers.iter().enumerate() {
            if buffers[..index]
                .iter()
                .any(|b| Arc::ptr_eq(&b.0, &buffer.0))
            {
                return Err(Error::InvalidArgument(format!(
                    "launch_kernel: buffer {} is passed twice",
                    buffer.0.id
                )));
            }
        }
        let list: Arc<[Arc<BufferInner>]> = buffers.iter().map(|b| b.0.clone()).collect();
        self.0.submit(
            Op::Kernel(UserFn::new(Box::new(kernel)), list),
            "launch_kernel",
        )
    }

    /// Tasks submitted to this stream so far (including internal waits and markers).
    pub fn submitted_tasks(&self) -> u64 {
        self.0.submitted.load(Ordering::Acquire)
    }

    /// Tasks of this stream completed so far.
    pub fn completed_tasks(&self) -> u64 {
        self.0.completed.load(Ordering::Acquire)
    }
}

devstream_core::debug_fields! { CpuStream, |self|
    id: self.0.id,
    native_priority: self.0.native_priority,
    non_blocking: self.0.non_blocking,
    kind: self.0.kind,
    submitted: self.0.submitted.load(Ordering::Relaxed),
    completed: self.0.completed.load(Ordering::Relaxed),
}

fn common(op: CommonOp) -> Op {
    Op::Common(op)
}

impl DeviceStream for CpuStream {
    type Event = CpuEvent;
    type Graph = CpuGraph;
    type Flag = CpuFlag;

    fn place(&self) -> &Place {
        &CPU_PLACE
    }

    fn id(&self) -> u64 {
        self.0.id
    }

    fn priority(&self) -> Priority {
        PRIORITY_RANGE.classify(self.0.native_priority)
    }

    fn native_priority(&self) -> i32 {
        self.0.native_priority
    }

    fn is_non_blocking(&self) -> bool {
        self.0.non_blocking
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    #[inline]
    fn query(&self) -> Result<bool> {
        let inner = &self.0;
        if inner.capturing.load(Ordering::Acquire) {
            return Err(inner.capture_violation("query"));
        }
        check_unsafe_call("query")?;
        let submitted = inner.submitted.load(Ordering::Acquire);
        Ok(inner.completed.load(Ordering::Acquire) >= submitted)
    }

    #[inline]
    fn synchronize(&self) -> Result<()> {
        let inner = &self.0;
        // The capturing stream's own rule first: it invalidates the stream's capture.
        if inner.capturing.load(Ordering::Acquire) {
            return Err(inner.capture_violation("synchronize"));
        }
        check_unsafe_call("synchronize")?;
        let target = inner.submitted.load(Ordering::Acquire);
        // The idle fast path: four loads, no lock.
        if inner.completed.load(Ordering::Acquire) >= target
            && !inner.has_error.load(Ordering::Acquire)
            && !inner.capturing.load(Ordering::Acquire)
        {
            return Ok(());
        }
        inner.synchronize_slow(target)
    }

    fn completion(&self) -> Completion {
        let inner = &self.0;
        if inner.capturing.load(Ordering::Acquire) {
            // Unlike `query`, this invalidates nothing: the capture stays valid.
            return Completion::ready(Err(Error::capture(
                "completion",
                "the stream is capturing: its work runs when the graph is launched",
            )));
        }
        inner.completion_at(inner.submitted.load(Ordering::Acquire), true)
    }

    #[inline]
    fn record(&self, event: &CpuEvent) -> Result<()> {
        let inner = &self.0;
        if inner.capturing.load(Ordering::Acquire) {
            if let Some((session, lane)) = inner.capture_info() {
                let frontier = session.frontier(lane, "record")?;
                event.0.set_captured(session, frontier);
                return Ok(());
            }
        }
        if event.0.flags_timing() {
            event.0.record_timed(inner, |stamp| {
                inner.queue("record", |pusher| pusher.push(stamp))
            })?;
        } else if inner.non_blocking {
            // The fast path: an event is "this stream's submitted count now".
            event
                .0
                .set_stream_record(inner, inner.submitted.load(Ordering::Acquire));
        } else {
            let seq = inner.queue("record", |pusher| pusher.seq())?;
            event.0.set_stream_record(inner, seq);
        }
        Ok(())
    }

    #[inline]
    fn record_event(&self) -> Result<CpuEvent> {
        let inner = &self.0;
        if inner.non_blocking && !inner.capturing.load(Ordering::Acquire) {
            let seq = inner.submitted.load(Ordering::Acquire);
            return Ok(CpuEvent::recorded(inner, seq));
        }
        let event = CpuEvent::new(devstream_core::EventFlags::default())?;
        self.record(&event)?;
        Ok(event)
    }

    #[inline]
    fn wait_event(&self, event: &CpuEvent) -> Result<()> {
        let inner = &self.0;
        if event.0.known_done() && !inner.capturing.load(Ordering::Acquire) {
            return Ok(());
        }
        match event.0.snapshot() {
            Record::Never => Ok(()),
            Record::Stream { stream, seq, .. } => inner.wait_seq(&stream, seq, "wait_event"),
            Record::Captured { session, frontier } => inner.join(session, frontier, "wait_event"),
        }
    }

    fn wait_stream(&self, other: &Self) -> Result<()> {
        let (inner, other) = (&self.0, &other.0);
        if Arc::ptr_eq(inner, other) {
            return Ok(());
        }
        if other.capturing.load(Ordering::Acquire) {
            if let Some((session, lane)) = other.capture_info() {
                let frontier = session.frontier(lane, "wait_stream")?;
                return inner.join(session, frontier, "wait_stream");
            }
        }
        let seq = if other.non_blocking {
            other.submitted.load(Ordering::Acquire)
        } else {
            // Like recording an event there: applies the legacy-stream ordering first.
            other.queue("wait_stream", |pusher| pusher.seq())?
        };
        inner.wait_seq(other, seq, "wait_stream")
    }

    #[inline]
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        self.0.submit(Op::Host(UserFn::new(f)), "launch_host_func")
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        let inner = &self.0;
        if inner.kind == StreamKind::Legacy {
            return Err(Error::capture(
                "begin_capture",
                "the legacy default stream cannot be captured",
            ));
        }
        let mut state = lock(&inner.state);
        if let Some(capture) = &state.capture {
            let session = capture.session.clone();
            drop(state);
            session.invalidate("begin_capture was called on a capturing stream");
            return Err(Error::capture(
                "begin_capture",
                "the stream is already capturing; the capture is invalidated",
            ));
        }
        let session = Session::begin(mode, inner);
        state.capture = Some(StreamCapture { session, lane: 0 });
        inner.capturing.store(true, Ordering::Release);
        Ok(())
    }

    fn end_capture(&self) -> Result<CpuGraph> {
        let inner = &self.0;
        let mut state = lock(&inner.state);
        let Some(capture) = state.capture.take() else {
            return Err(Error::capture("end_capture", "the stream is not capturing"));
        };
        if capture.lane != 0 {
            let session = capture.session.clone();
            state.capture = Some(capture);
            drop(state);
            session.invalidate("end_capture was called on a stream that joined the capture");
            return Err(Error::capture(
                "end_capture",
                "the capture was begun on another stream (cudaErrorStreamCaptureUnmatched); \
                 the capture is invalidated",
            ));
        }
        inner.capturing.store(false, Ordering::Release);
        drop(state);
        let (streams, result) = capture.session.finish();
        for stream in streams.iter().skip(1).filter_map(Weak::upgrade) {
            stream.leave_capture(&capture.session);
        }
        result
    }

    #[inline]
    fn is_capturing(&self) -> Result<bool> {
        Ok(self.0.capturing.load(Ordering::Acquire))
    }

    fn wait_flag(&self, flag: &CpuFlag, value: u32) -> Result<()> {
        let flag = flag.0.clone();
        self.0
            .submit(common(CommonOp::WaitFlag { flag, value }), "wait_flag")
    }

    fn write_flag(&self, flag: &CpuFlag, value: u32) -> Result<()> {
        let flag = flag.0.clone();
        self.0
            .submit(common(CommonOp::WriteFlag { flag, value }), "write_flag")
    }

    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        crate::foreign::wait_completion(&self.0, awaited)
    }

    // Buffers and copies: the handle types and their operations together.
    type Buffer = CpuBuffer;
    type HostBuffer = CpuHostBuffer;

    fn alloc(&self, len: usize) -> Result<CpuBuffer> {
        if self.0.capturing.load(Ordering::Acquire) {
            if let Some(buffer) = crate::graph_memory::alloc_in_capture(&self.0, len) {
                return buffer;
            }
        }
        crate::mempool::alloc(crate::mempool::default_pool(), len)
    }

    fn alloc_from(&self, pool: &dyn DevicePool, len: usize) -> Result<CpuBuffer> {
        let any: &dyn std::any::Any = pool;
        let own = match any.downcast_ref::<CaptureMemory>() {
            Some(graph_pool) if graph_pool.place() == &CPU_PLACE => None,
            _ => Some(mempool::downcast::<CpuMemoryPool>(
                pool,
                "alloc_from",
                &CPU_PLACE,
            )?),
        };
        if self.0.capturing.load(Ordering::Acquire) {
            if let Some(buffer) = crate::graph_memory::alloc_in_capture(&self.0, len) {
                return buffer;
            }
        }
        match own {
            Some(pool) => crate::mempool::alloc(pool, len),
            None => Err(devstream_core::graph_memory::not_for_alloc_from(&CPU_PLACE)),
        }
    }

    fn capture_memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        match self.0.capture_info() {
            Some((session, _)) => Ok(session.memory().clone()),
            None => Err(Error::capture(
                "capture_memory_pool",
                "the stream is not capturing",
            )),
        }
    }

    fn alloc_host(&self, len: usize) -> Result<CpuHostBuffer> {
        check_unsafe_call("alloc_host")?;
        Ok(CpuHostBuffer(HostInner::new(len)?))
    }

    devstream_core::buffer_methods! {
        buffer: CpuBuffer, host: CpuHostBuffer, record: 0,
        |self, op| self.0.submit_buffer(op)
    }
}
