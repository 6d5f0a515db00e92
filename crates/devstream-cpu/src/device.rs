//! The registry entry of the CPU backend: places, capabilities, priorities, constructors and
//! the process-wide objects (worker pool, legacy default stream, per-thread streams).

use crate::event::CpuEvent;
use crate::flag::CpuFlag;
use crate::scheduler::PoolHandle;
use crate::stream::{CpuStream, StreamInner, StreamKind};
use devstream_core::{
    BackendKind, Capabilities, CaptureSupport, DeviceBackend, DevicePool, Error, EventFlags,
    LiveCounts, Place, PoolOptions, PriorityRange, Result, StreamOptions,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The CPU place's native priority range: three levels with CUDA's sign convention (`0` is
/// the least priority and the default, `-2` the greatest).
pub const PRIORITY_RANGE: PriorityRange = PriorityRange {
    least: 0,
    greatest: -2,
};

/// What the CPU place can do.
pub(crate) const CAPABILITIES: Capabilities = {
    let mut caps = Capabilities::none();
    caps.priorities = true;
    caps.concurrent_streams = true;
    caps.capture = CaptureSupport::Emulated;
    caps.timing = true;
    caps.host_funcs = true;
    caps.capture_host_funcs = true;
    caps.flags = true;
    caps.buffers = true;
    caps.cross_device_wait = false;
    caps.foreign_waits = true;
    caps.capture_foreign_waits = true;
    caps.host_func_buffers = true;
    caps.external_handles = false;
    caps.stream_ordered_alloc = true;
    caps.nonblocking_query = true;
    caps.legacy_default_stream = true;
    caps.per_thread_stream = true;
    caps.collectives = cfg!(feature = "comm");
    caps.memory_pools = true;
    caps.capture_alloc = true;
    caps
};

pub(crate) static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

static GLOBAL_POOL: OnceLock<Result<CpuPool>> = OnceLock::new();
static LEGACY: OnceLock<Result<CpuStream>> = OnceLock::new();

thread_local! {
    static PER_THREAD: OnceLock<CpuStream> = const { OnceLock::new() };
}

/// The legacy default stream, if anything created it (streams order themselves after it only
/// then).
pub(crate) fn legacy_if_created() -> Option<&'static Arc<StreamInner>> {
    match LEGACY.get() {
        Some(Ok(stream)) => Some(&stream.0),
        _ => None,
    }
}

fn check_place(place: &Place) -> Result<()> {
    match place {
        Place::Cpu => Ok(()),
        other => Err(Error::NoDevice {
            place: other.clone(),
            reason: "the CPU backend serves only the place `cpu`".into(),
        }),
    }
}

/// The most workers a pool starts.
const MAX_WORKERS: usize = 1024;

/// Worker count of the global pool: `DEVSTREAM_CPU_WORKERS` if set to a positive number (at
/// most 1024), else `max(2, available_parallelism)`.
fn default_workers() -> usize {
    if let Some(n) = std::env::var("DEVSTREAM_CPU_WORKERS")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n.min(MAX_WORKERS);
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2)
}

/// A pool of worker threads running CPU streams.
///
/// All streams made by [`CpuBackend`] share the global pool, started at first use with
/// `max(2, available_parallelism)` workers, or `DEVSTREAM_CPU_WORKERS` workers when that
/// environment variable holds a positive number. A dedicated pool gives a set of streams its own
/// workers (a one-worker pool runs ready streams strictly by priority, one task at a time). A
/// pool's threads exit once the pool handle and all its streams are gone.
///
/// ```
/// use devstream_core::{DeviceStream, StreamOptions};
/// let pool = devstream_cpu::CpuPool::new(1).unwrap();
/// let s = pool.new_stream(StreamOptions::default());
/// s.launch_host_func(Box::new(|| {})).unwrap();
/// s.synchronize().unwrap();
/// assert_eq!(pool.workers(), 1);
/// ```
#[derive(Clone)]
pub struct CpuPool(Arc<PoolHandle>);

impl CpuPool {
    /// A new pool with `workers` threads (`Error::InvalidArgument` for 0 or more than 1024).
    pub fn new(workers: usize) -> Result<CpuPool> {
        if workers == 0 || workers > MAX_WORKERS {
            return Err(Error::InvalidArgument(format!(
                "a CPU worker pool needs 1 to {MAX_WORKERS} workers, got {workers}"
            )));
        }
        PoolHandle::start(workers).map(CpuPool)
    }

    /// The global pool that [`CpuBackend`]'s streams use (started on first use).
    pub fn global() -> Result<CpuPool> {
        GLOBAL_POOL
            .get_or_init(|| PoolHandle::start(default_workers()).map(CpuPool))
            .clone()
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.0.workers
    }

    /// A new user stream run by this pool.
    pub fn new_stream(&self, options: StreamOptions) -> CpuStream {
        CpuStream::with_pool(self.0.clone(), options, StreamKind::User)
    }
}

devstream_core::debug_fields!(CpuPool, |self| workers: self.0.workers);

/// The CPU backend's registry entry (`Place::Cpu`).
///
/// ```
/// use devstream_core::{DeviceBackend, DeviceStream, Place, StreamOptions};
/// use devstream_cpu::CpuBackend;
/// assert_eq!(CpuBackend::places(), vec![Place::Cpu]);
/// let range = CpuBackend::priority_range(&Place::Cpu).unwrap();
/// assert_eq!((range.least, range.greatest), (0, -2));
/// let legacy = CpuBackend::default_stream(&Place::Cpu).unwrap();
/// assert!(!legacy.is_non_blocking());
/// assert_eq!(legacy.id(), CpuBackend::default_stream(&Place::Cpu).unwrap().id());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl DeviceBackend for CpuBackend {
    type Stream = CpuStream;

    const KIND: BackendKind = BackendKind::Cpu;

    fn places() -> Vec<Place> {
        vec![Place::Cpu]
    }

    fn probe() -> Result<()> {
        Ok(())
    }

    fn capabilities(place: &Place) -> Result<Capabilities> {
        check_place(place)?;
        Ok(CAPABILITIES)
    }

    fn priority_range(place: &Place) -> Result<PriorityRange> {
        check_place(place)?;
        Ok(PRIORITY_RANGE)
    }

    fn new_stream(place: &Place, options: StreamOptions) -> Result<CpuStream> {
        check_place(place)?;
        Ok(CpuPool::global()?.new_stream(options))
    }

    /// The process-wide legacy default stream (blocking, normal priority): its work waits for
    /// all earlier work of blocking streams (`blocking(true)` and per-thread streams), and their
    /// later work waits for its earlier work. Non-blocking streams are independent of it. It
    /// cannot be captured. Its `synchronize` and `query` cover its own work.
    fn default_stream(place: &Place) -> Result<CpuStream> {
        check_place(place)?;
        LEGACY
            .get_or_init(|| {
                let pool = CpuPool::global()?;
                Ok(CpuStream::with_pool(
                    pool.0,
                    StreamOptions::default().blocking(true),
                    StreamKind::Legacy,
                ))
            })
            .clone()
    }

    /// The calling thread's default stream (the same one every call on a thread): blocking
    /// (ordered with the legacy default stream, like `cudaStreamPerThread`), normal priority.
    fn per_thread_stream(place: &Place) -> Result<CpuStream> {
        check_place(place)?;
        let pool = CpuPool::global()?;
        PER_THREAD
            .try_with(|slot| {
                slot.get_or_init(|| {
                    CpuStream::with_pool(
                        pool.0.clone(),
                        StreamOptions::default().blocking(true),
                        StreamKind::PerThread,
                    )
                })
                .clone()
            })
            .map_err(|_| {
                Error::InvalidArgument(
                    "per_thread_stream called while the thread is shutting down".into(),
                )
            })
    }

    fn new_event(place: &Place, flags: EventFlags) -> Result<CpuEvent> {
        check_place(place)?;
        CpuEvent::new(flags)
    }

    fn new_flag(place: &Place) -> Result<CpuFlag> {
        check_place(place)?;
        Ok(CpuFlag::new())
    }

    fn live_counts() -> LiveCounts {
        LiveCounts {
            streams: LIVE_STREAMS.load(Ordering::Relaxed),
            events: LIVE_EVENTS.load(Ordering::Relaxed),
        }
    }

    fn default_pool(place: &Place) -> Result<Arc<dyn DevicePool>> {
        check_place(place)?;
        Ok(crate::mempool::default_pool().clone())
    }

    fn new_pool(place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        check_place(place)?;
        Ok(crate::mempool::new_pool(options))
    }
}
