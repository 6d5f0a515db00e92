//! Picks the backend for a place, and the place-level free functions.

use crate::Stream;
use devstream_core::{
    current, pool::StreamPool, BackendKind, Capabilities, DeviceBackend, Error, LiveCounts, Place,
    Priority, PriorityRange, Result, StreamOptions,
};
use std::sync::OnceLock;

/// Runs `$body` with `$B` bound to the backend type serving `$place`, or returns
/// `Error::BackendNotCompiled` naming the cargo feature.
macro_rules! with_backend {
    ($place:expr, $B:ident => $body:expr) => {{
        let place: &devstream_core::Place = $place;
        let kind = place.backend();
        #[cfg(feature = "plugin")]
        if kind == devstream_core::BackendKind::Plugin {
            $crate::backends::register_custom_devices();
        }
        'serving: {
            $crate::registry::each_backend!($B => {
                if <$B as devstream_core::DeviceBackend>::KIND == kind {
                    break 'serving $body;
                }
            });
            Err($crate::registry::not_compiled(kind, place))
        }
    }};
}
pub(crate) use with_backend;

/// Runs `$body` once for every compiled backend, with `$B` bound to its type, in
/// `BackendKind::ALL` order.
macro_rules! each_backend {
    ($B:ident => $body:block) => {
        $crate::registry::each_backend!(@rows $B => $body;
            "cpu" devstream_cpu::CpuBackend,
            "cuda" devstream_cuda::CudaBackend,
            "hip" devstream_hip::HipBackend,
            "wgpu" devstream_wgpu::WgpuBackend,
            "plugin" devstream_plugin::PluginBackend,
        )
    };
    (@rows $B:ident => $body:block; $($feature:literal $backend:path,)+) => {{
        $(
            #[cfg(feature = $feature)]
            {
                type $B = $backend;
                $body
            }
        )+
    }};
}
pub(crate) use each_backend;

pub(crate) fn not_compiled(kind: BackendKind, place: &Place) -> Error {
    Error::BackendNotCompiled {
        feature: kind.name(),
        place: place.to_string(),
    }
}

/// The backends compiled into this build.
///
/// ```
/// assert!(devstream::compiled_backends().contains(&devstream::BackendKind::Cpu));
/// ```
pub fn compiled_backends() -> Vec<BackendKind> {
    let mut out = Vec::new();
    each_backend!(B => { out.push(B::KIND) });
    out
}

/// Whether a backend can be used here: `Ok`, `Error::BackendNotCompiled` or
/// `Error::BackendUnavailable` (its runtime library is missing, ...).
pub fn probe(kind: BackendKind) -> Result<()> {
    let place = match kind {
        BackendKind::Cpu => Place::Cpu,
        BackendKind::Cuda => Place::Cuda(0),
        BackendKind::Hip => Place::Hip(0),
        BackendKind::Wgpu => Place::Wgpu(0),
        BackendKind::Plugin => Place::Custom {
            device_type: "custom".into(),
            id: 0,
        },
    };
    with_backend!(&place, B => B::probe())
}

/// Every place usable now, probing each compiled backend; a backend whose runtime is missing
/// contributes none (never a panic).
///
/// ```
/// assert!(devstream::places().contains(&devstream::Place::Cpu));
/// ```
pub fn places() -> Vec<Place> {
    #[cfg(feature = "plugin")]
    crate::backends::register_custom_devices();
    let mut out = Vec::new();
    each_backend!(B => { out.extend(B::places()) });
    out
}

/// The capabilities of a place.
pub fn capabilities(place: &Place) -> Result<Capabilities> {
    with_backend!(place, B => B::capabilities(place))
}

/// The native priority range of a place (`{0, 0}` where it has no priorities).
pub fn priority_range(place: &Place) -> Result<PriorityRange> {
    with_backend!(place, B => B::priority_range(place))
}

/// Live user-created streams and events over all compiled backends (for leak checks).
pub fn live_counts() -> LiveCounts {
    #[cfg(feature = "plugin")]
    crate::backends::register_custom_devices();
    let mut total = LiveCounts::default();
    each_backend!(B => {
        let c = B::live_counts();
        total.streams += c.streams;
        total.events += c.events;
    });
    total
}

/// This thread's current stream for `place`: the innermost [`Stream::make_current`] guard or
/// [`set_current_stream`], else the place's default stream.
pub fn current_stream(place: &Place) -> Result<Stream> {
    match current::current::<Stream>(place) {
        Some(s) => Ok(s),
        None => Stream::default_stream(place),
    }
}

/// Makes `stream` current for its place without a scope (CuPy's `use()`, paddle's
/// `set_stream`) and returns the previous current stream of that place.
pub fn set_current_stream(stream: &Stream) -> Result<Stream> {
    let place = stream.place().clone();
    match current::set_current(&place, Some(stream.clone())) {
        Some(previous) => Ok(previous),
        None => Stream::default_stream(&place),
    }
}

pub(crate) fn pool_stream(place: &Place, priority: Priority) -> Result<Stream> {
    static POOL: OnceLock<StreamPool<Stream>> = OnceLock::new();
    let native = priority_range(place)?.normalize(priority);
    POOL.get_or_init(StreamPool::new).get(place, native, || {
        Stream::with_options(
            place,
            StreamOptions::default().priority(Priority::Native(native)),
        )
    })
}
