//! The capture-mode rule, kept once for every backend: which calls a capture in progress
//! forbids, on which threads, and what a forbidden call does.
//!
//! # The rule (CUDA's, `cuThreadExchangeStreamCaptureMode`)
//! While a stream of a place captures, *potentially unsafe calls* on that place are forbidden:
//! * in [`CaptureMode::Global`], on every thread of the process;
//! * in [`CaptureMode::ThreadLocal`], on the thread that began the capture;
//! * in [`CaptureMode::Relaxed`], nowhere.
//!
//! "That place" is the runtime's reach: every CUDA device of the process for a CUDA capture
//! (the driver enforces the rule process-wide), likewise every HIP device, every device of a
//! plug-in's device type, and the place itself for the emulated captures (cpu, wgpu).
//!
//! The potentially unsafe calls are the ones that wait for, or ask about, the progress of work
//! outside the capture, and the synchronous allocations: `Stream::synchronize`,
//! `Stream::query`, `Event::synchronize`, `Event::query` (of streams and events that are not
//! part of the capture), `alloc_host`, and `alloc` on a place that does not allocate in stream
//! order. Everything else — creating, using and dropping streams, events, buffers, flags and
//! graphs that are not part of the capture — is allowed in every mode.
//!
//! # What a forbidden call does
//! It fails with [`Error::Capture`] *before* it reaches the runtime, and the capture goes on:
//! devstream refuses the call itself ([`check_unsafe_call`]) instead of making it and letting a
//! runtime (CUDA, HIP) invalidate a capture that someone else, perhaps on another thread, is
//! building. This is a different rule from the one for the capturing stream itself:
//! synchronizing or querying a stream that captures (or joined a capture) fails and
//! invalidates *that* capture, and the backend checks it first.
//!
//! Only captures begun through devstream are known here; a capture begun by other code on a
//! native handle follows its runtime's own rules.
//!
//! # Work devstream does on its own
//! Nothing devstream does implicitly (releasing a buffer after its work, keeping a dropped
//! stream for reuse, a completion's bookkeeping) may break a capture: such work either asks
//! [`forbids_unsafe_calls`] and waits for a later chance, or (CUDA, HIP) runs with the calling
//! thread in `Relaxed` mode, which the runtime provides for exactly this.
//!
//! # Registration
//! A backend registers a capture when it begins ([`register`]) and keeps the
//! [`CaptureRegistration`] until the capture has ended — by `end_capture`, or because the last
//! handle of the stream that began it was dropped (which ends the capture whatever its state,
//! on every backend). Dropping the registration lifts what the capture forbade.
//!
//!
//! # Fork and join
//! A capture's members are the stream that began it (the origin) and every stream forked into it
//! by waiting on an event recorded inside it (CUDA's fork/join). The emulated captures keep one
//! [`JoinClock`] per member and end only when [`check_joined`] finds every member joined back
//! into the origin (CUDA's `cudaErrorStreamCaptureUnjoined` otherwise).
//!
//! ```
//! use devstream_core::{capture, CaptureMode, Error, Place};
//! let registration = capture::register(&Place::Cpu, CaptureMode::ThreadLocal, 7);
//! // This thread began the capture: it may not synchronize work outside it.
//! assert!(matches!(capture::check_unsafe_call(&Place::Cpu, "synchronize"), Err(Error::Capture { .. })));
//! // Another thread may.
//! std::thread::spawn(|| capture::check_unsafe_call(&Place::Cpu, "synchronize").unwrap())
//!     .join()
//!     .unwrap();
//! drop(registration);
//! capture::check_unsafe_call(&Place::Cpu, "synchronize").unwrap();
//! ```

use crate::{CaptureMode, Error, Place, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

/// One capture in progress that forbids calls (`Global` or `ThreadLocal`).
struct Entry {
    key: u64,
    place: Place,
    mode: CaptureMode,
    thread: ThreadId,
    /// The id of the stream that began it (for messages).
    stream: u64,
}

/// The registered captures that forbid calls.
static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
/// `REGISTRY.len()`, read without the lock: one load on every potentially unsafe call.
static FORBIDDING: AtomicUsize = AtomicUsize::new(0);

/// Set for good when the first `Global` capture registers (see [`global_captures_begun`]).
static GLOBAL_BEGUN: AtomicBool = AtomicBool::new(false);
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn registry() -> MutexGuard<'static, Vec<Entry>> {
    // Nothing panics under the lock; a poisoned lock still holds a consistent list.
    crate::sync::lock(&REGISTRY)
}

/// A capture in progress, registered with [`register`]: what its mode forbids holds until
/// this is dropped (when the capture has ended).
#[derive(Debug)]
#[must_use = "the capture forbids calls only while its registration lives"]
pub struct CaptureRegistration {
    /// `0`: a `Relaxed` capture, which forbids nothing and is not in the registry.
    key: u64,
}

impl Drop for CaptureRegistration {
    fn drop(&mut self) {
        if self.key == 0 {
            return;
        }
        let mut entries = registry();
        entries.retain(|entry| entry.key != self.key);
        FORBIDDING.store(entries.len(), Ordering::SeqCst);
    }
}

/// Registers a capture that the stream `stream` of `place` began now, on this thread, in
/// `mode`. Keep the registration until the capture has ended.
pub fn register(place: &Place, mode: CaptureMode, stream: u64) -> CaptureRegistration {
    if mode == CaptureMode::Relaxed {
        return CaptureRegistration { key: 0 };
    }
    if mode == CaptureMode::Global {
        GLOBAL_BEGUN.store(true, Ordering::SeqCst);
    }
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    let mut entries = registry();
    entries.push(Entry {
        key,
        place: place.clone(),
        mode,
        thread: std::thread::current().id(),
        stream,
    });
    FORBIDDING.store(entries.len(), Ordering::SeqCst);
    CaptureRegistration { key }
}

/// Whether a capture on `captured` governs calls on `place`: the places whose work goes to one
/// runtime that enforces the rule process-wide. CUDA's rule covers every device of the process
/// (a `Global` capture on `cuda:0` forbids a query on `cuda:1`, and the driver would invalidate
/// the capture), and so does HIP's; a plug-in's captures cover every device of its device type
/// (one plug-in library, one runtime behind it); the emulated captures (cpu, wgpu) cover their
/// own place.
fn same_domain(captured: &Place, place: &Place) -> bool {
    match (captured, place) {
        (Place::Cuda(_), Place::Cuda(_)) | (Place::Hip(_), Place::Hip(_)) => true,
        (
            Place::Custom {
                device_type: captured_type,
                ..
            },
            Place::Custom { device_type, .. },
        ) => captured_type == device_type,
        _ => captured == place,
    }
}

/// The first registered capture governing `place` that forbids this thread's potentially
/// unsafe calls: its mode, stream and whether it is this thread's.
fn forbidding(place: &Place) -> Option<(CaptureMode, u64, bool)> {
    let me = std::thread::current().id();
    registry()
        .iter()
        .find(|entry| {
            same_domain(&entry.place, place)
                && (entry.mode == CaptureMode::Global || entry.thread == me)
        })
        .map(|entry| (entry.mode, entry.stream, entry.thread == me))
}

/// Whether a capture in progress forbids the calling thread's potentially unsafe calls on
/// `place` (for work devstream does on its own: leave it for later then). One atomic load
/// when no capture forbids anything.
#[inline]
pub fn forbids_unsafe_calls(place: &Place) -> bool {
    FORBIDDING.load(Ordering::SeqCst) != 0 && forbidding(place).is_some()
}

/// Whether any capture in progress (of any place) forbids anything: one atomic load, for a
/// backend's fast path before it looks closer.
#[inline]
pub fn any_forbidding() -> bool {
    FORBIDDING.load(Ordering::SeqCst) != 0
}

/// Whether a `Global` capture was ever registered in this process (one atomic load).
///
/// A potentially unsafe call that passed [`check_unsafe_call`] still has to reach its runtime,
/// and another thread may begin a `Global` capture in between: the runtime would then count the
/// call against that capture and invalidate it, though devstream let the call through before
/// the capture existed. Once this answers `true`, a backend whose runtime has capture modes
/// (CUDA, HIP) makes such calls with the calling thread in `Relaxed` mode, so that a call let
/// through before the capture began stays before it, as far as the runtime is concerned. The
/// first `Global` capture of the process is not covered (a call that read `false` just before
/// it registered can still reach the runtime after its begin); every later one is.
#[inline]
pub fn global_captures_begun() -> bool {
    GLOBAL_BEGUN.load(Ordering::SeqCst)
}

/// `Ok` unless a capture in progress forbids the calling thread's potentially unsafe calls on
/// `place`; then [`Error::Capture`] naming `op`, and the capture is left as it was. Call it
/// before the runtime call (and after the check of the capturing stream itself, whose own
/// rule invalidates its capture). One atomic load when no capture forbids anything.
#[inline]
pub fn check_unsafe_call(place: &Place, op: &'static str) -> Result<()> {
    if FORBIDDING.load(Ordering::SeqCst) == 0 {
        return Ok(());
    }
    refuse(place, op)
}

/// Why a capture was invalidated: the one invalidation policy of the emulated captures. A
/// forbidden call on a capturing stream (or a lost member) invalidates the capture, and the
/// first reason is kept; every later operation captured into it and its `end_capture` fail with
/// [`Error::Capture`] naming that reason. The capture goes on until `end_capture` ends it.
///
/// ```
/// use devstream_core::capture::Invalidation;
/// let mut validity = Invalidation::default();
/// assert!(validity.check("end_capture").is_ok());
/// validity.invalidate("synchronize was called on a capturing stream");
/// validity.invalidate("a later reason");
/// let error = validity.check("end_capture").unwrap_err().to_string();
/// assert!(error.contains("synchronize was called"), "{error}");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Invalidation {
    reason: Option<String>,
}

impl Invalidation {
    /// Invalidates the capture, unless it already was (the first reason wins).
    pub fn invalidate(&mut self, reason: impl Into<String>) {
        if self.reason.is_none() {
            self.reason = Some(reason.into());
        }
    }

    /// Whether the capture was invalidated.
    pub fn is_invalid(&self) -> bool {
        self.reason.is_some()
    }

    /// `Ok` while the capture is valid, else `op`'s [`Error::Capture`] with the reason.
    pub fn check(&self, op: &'static str) -> Result<()> {
        match &self.reason {
            None => Ok(()),
            Some(reason) => Err(Error::capture(
                op,
                format!("the capture was invalidated: {reason}"),
            )),
        }
    }
}

/// What one member of a capture has done and what of the other members' work it waits for: a
/// version vector over the capture's members, keyed by a member id the backend chooses.
///
/// A member's own version advances when it is forked into the capture and with every operation
/// it captures; an event recorded on a member carries the member's clock; waiting on it takes
/// the elementwise maximum ([`JoinClock::absorb`]). A forked member is joined back when the
/// origin's clock covers the member's own version, so a forked stream must be joined even if it
/// captured nothing (as CUDA requires), and again after any later work.
///
/// ```
/// use devstream_core::capture::{check_joined, JoinClock};
/// let (mut origin, mut forked) = (JoinClock::default(), JoinClock::default());
/// forked.absorb(&origin); // the forked stream waits on an event recorded on the origin
/// forked.advance(1); // forking is an event of its own
/// assert!(check_joined((0, &origin), [(1, &forked)]).is_err());
/// origin.absorb(&forked); // the origin waits on an event recorded on the forked stream
/// assert!(check_joined((0, &origin), [(1, &forked)]).is_ok());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinClock {
    /// `(member, version)`, one entry per member this clock has seen work of.
    versions: Vec<(u64, u64)>,
}

impl JoinClock {
    /// The version of `member`'s work this clock covers (0: none).
    pub fn version(&self, member: u64) -> u64 {
        self.versions
            .iter()
            .find(|(m, _)| *m == member)
            .map_or(0, |(_, version)| *version)
    }

    /// `member` (whose clock this is) was forked into the capture or captured an operation.
    pub fn advance(&mut self, member: u64) {
        match self.versions.iter_mut().find(|(m, _)| *m == member) {
            Some((_, version)) => *version += 1,
            None => self.versions.push((member, 1)),
        }
    }

    /// Later work of this clock's member also waits for `other`: the elementwise maximum.
    pub fn absorb(&mut self, other: &JoinClock) {
        for &(member, theirs) in &other.versions {
            match self.versions.iter_mut().find(|(m, _)| *m == member) {
                Some((_, mine)) => *mine = (*mine).max(theirs),
                None => self.versions.push((member, theirs)),
            }
        }
    }
}

/// `Ok` when the origin's clock covers every other member's own version (every stream forked
/// into the capture was joined back into the origin); otherwise the `end_capture` error
/// (`Error::Capture`, CUDA's `cudaErrorStreamCaptureUnjoined`). `origin` and `members` are
/// `(member id, clock)`; the origin may be among `members`.
pub fn check_joined<'a>(
    origin: (u64, &JoinClock),
    members: impl IntoIterator<Item = (u64, &'a JoinClock)>,
) -> Result<()> {
    let (origin_id, origin_clock) = origin;
    let unjoined = members.into_iter().any(|(member, clock)| {
        member != origin_id && origin_clock.version(member) < clock.version(member)
    });
    if unjoined {
        return Err(Error::capture(
            "end_capture",
            "a stream that joined the capture was not joined back into the origin stream \
             (cudaErrorStreamCaptureUnjoined)",
        ));
    }
    Ok(())
}

#[cold]
fn refuse(place: &Place, op: &'static str) -> Result<()> {
    match forbidding(place) {
        None => Ok(()),
        Some((mode, stream, mine)) => Err(Error::capture(
            op,
            format!(
                "potentially unsafe call during a {mode:?}-mode capture on {place} (begun on \
                 stream {stream}{}); refused, the capture goes on",
                if mine { " by this thread" } else { "" }
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_capture_governs_every_cuda_device_and_nothing_else() {
        assert!(same_domain(&Place::Cuda(0), &Place::Cuda(3)));
        assert!(same_domain(&Place::Hip(1), &Place::Hip(0)));
        assert!(!same_domain(&Place::Cuda(0), &Place::Hip(0)));
        assert!(!same_domain(&Place::Cuda(0), &Place::Cpu));
        assert!(!same_domain(&Place::Wgpu(0), &Place::Wgpu(1)));
        assert!(same_domain(&Place::Cpu, &Place::Cpu));
    }

    fn refused(place: &Place) -> bool {
        matches!(
            check_unsafe_call(place, "synchronize"),
            Err(Error::Capture { .. })
        )
    }

    fn refused_elsewhere(place: &Place) -> bool {
        let place = place.clone();
        std::thread::spawn(move || refused(&place))
            .join()
            .unwrap_or(false)
    }

    /// Each mode forbids what CUDA's does: `Global` every thread, `ThreadLocal` the capturing
    /// thread, `Relaxed` nothing; only within the capture's runtime; until the registration
    /// drops.
    /// (The places are this test's own, so tests running beside it are not disturbed.)
    #[test]
    fn each_mode_forbids_what_cudas_does_until_the_capture_ends() {
        let place = Place::Custom {
            device_type: "capture_rule_test".into(),
            id: 0,
        };
        let other = Place::Custom {
            device_type: "capture_rule_test".into(),
            id: 1,
        };
        let unrelated = Place::Custom {
            device_type: "capture_rule_test_unrelated".into(),
            id: 0,
        };
        for (mode, here, elsewhere) in [
            (CaptureMode::Global, true, true),
            (CaptureMode::ThreadLocal, true, false),
            (CaptureMode::Relaxed, false, false),
        ] {
            let registration = register(&place, mode, 1);
            assert_eq!(refused(&place), here, "{mode:?} on the capturing thread");
            assert_eq!(
                refused_elsewhere(&place),
                elsewhere,
                "{mode:?} on another thread"
            );
            assert_eq!(forbids_unsafe_calls(&place), here, "{mode:?}");
            assert_eq!(
                refused(&other),
                here,
                "{mode:?}: a plug-in's capture governs every device of its type"
            );
            assert!(
                !refused(&unrelated),
                "{mode:?} forbids nothing on another device type"
            );
            drop(registration);
            assert!(!refused(&place), "{mode:?}: still forbidden after the end");
            assert!(!refused_elsewhere(&place));
        }
    }

    /// Two captures: ending one leaves the other's rule in force.
    #[test]
    fn ending_one_capture_leaves_the_others() {
        let place = Place::Custom {
            device_type: "capture_rule_test_two".into(),
            id: 0,
        };
        let first = register(&place, CaptureMode::Global, 1);
        let second = register(&place, CaptureMode::ThreadLocal, 2);
        drop(first);
        assert!(refused(&place));
        assert!(!refused_elsewhere(&place));
        drop(second);
        assert!(!refused(&place));
    }
}
