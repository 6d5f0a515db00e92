//! What runs inside devstream's calls: the plug-in's re-entry hook and the host functions the
//! program submits.

use super::*;
use devstream_core::host_fn_launch::{launch_with, GivenBuffer};

/// The re-entry hook: a non-blocking devstream call from inside a plug-in call.
pub(crate) fn reenter(draw: u32) {
    let Ok(guard) = TARGETS.try_lock() else {
        return;
    };
    let Some(targets) = guard.clone() else { return };
    drop(guard);
    let pick = |n: usize| (draw as usize >> 4) % n.max(1);
    match draw % 8 {
        0 if targets.nonblocking_query => {
            if let Some(s) = targets.streams.get(pick(targets.streams.len())) {
                let _ = s.query();
            }
        }
        1 if targets.nonblocking_query => {
            if let Some(e) = targets.events.get(pick(targets.events.len())) {
                let _ = e.query();
            }
        }
        2 => {
            if let Some(s) = targets.streams.get(pick(targets.streams.len())) {
                let _ = s.record_event();
            }
        }
        3 => {
            if let Some(s) = targets.streams.get(pick(targets.streams.len())) {
                let _ = s.launch_host_func(Box::new(|| {}));
            }
        }
        4 => {
            if let Some(place) = &targets.place {
                let _ = PluginBackend::new_stream(place, StreamOptions::default());
            }
        }
        5 => {
            if let Some(f) = targets.flags.get(pick(targets.flags.len())) {
                f.set(f.get().saturating_add(1));
            }
        }
        6 => {
            if let Some(s) = targets.streams.get(pick(targets.streams.len())) {
                let _ = s.is_capturing();
            }
        }
        _ => {
            if let Some(e) = targets.events.get(pick(targets.events.len())) {
                drop(e.completion());
            }
        }
    }
}

/// Panics when dropped (a panic payload whose destructor panics).
pub(crate) struct DropPanics;

impl Drop for DropPanics {
    fn drop(&mut self) {
        panic!("{DELIBERATE} drop");
    }
}

/// The stream at `index` of the program's current streams (as last published), if any.
///
/// Host functions name streams by index and look them up when they run, rather than holding a
/// stream: a closure holding its own stream, captured into that stream's capture, would keep
/// the stream (and the capture) alive for good once the program drops it.
pub(crate) fn published_stream(index: usize) -> Option<PluginStream> {
    lock(&TARGETS)
        .as_ref()
        .and_then(|t| t.streams.get(index).cloned())
}

/// What a host function does (streams by their index in the program's list).
pub(crate) enum HostAction {
    Nothing,
    Panic,
    PanicWithDropPanics,
    Query(usize),
    Synchronize(usize),
    Record(usize),
    WaitEvent(usize, PluginEvent),
    QueryEvent(PluginEvent),
    SynchronizeEvent(PluginEvent),
    Read(Arc<PluginHostBuffer>),
    Write(Arc<PluginHostBuffer>),
    SetFlag(PluginFlag, u32),
    Nested(usize),
    NewStream(Place),
    /// Launches a host function given the buffer on the stream at the index (it bumps the
    /// buffer's first byte): `launch_with` from inside a host function.
    Given(usize, Arc<PluginHostBuffer>),
}

/// Held by the one host function that may block at a time (see [`HostAction::run`]).
pub(crate) static BLOCKING_HOST_FN: Mutex<()> = Mutex::new(());

impl HostAction {
    /// Whether the action may block (waits for other work; `query` synchronizes where the
    /// plug-in has no query function).
    fn may_block(&self) -> bool {
        matches!(
            self,
            HostAction::Query(_)
                | HostAction::Synchronize(_)
                | HostAction::QueryEvent(_)
                | HostAction::SynchronizeEvent(_)
                | HostAction::Read(_)
                | HostAction::Write(_)
        )
    }

    /// Runs the action. Only one host function blocks at a time: two that wait for each
    /// other's streams would block each other like two threads joining each other (devstream
    /// refuses only waits it can tell come back to the waiting host function through waits on
    /// events), and that deadlock would be the program's, not devstream's.
    pub(crate) fn run(&self) {
        let _alone = if self.may_block() {
            match BLOCKING_HOST_FN.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        } else {
            None
        };
        match self {
            HostAction::Nothing => {}
            HostAction::Panic => panic!("{DELIBERATE} host function"),
            HostAction::PanicWithDropPanics => std::panic::panic_any(DropPanics),
            HostAction::Query(s) => drop(published_stream(*s).map(|s| s.query())),
            HostAction::Synchronize(s) => drop(published_stream(*s).map(|s| s.synchronize())),
            HostAction::Record(s) => drop(published_stream(*s).map(|s| s.record_event())),
            HostAction::WaitEvent(s, e) => drop(published_stream(*s).map(|s| s.wait_event(e))),
            HostAction::QueryEvent(e) => drop(e.query()),
            HostAction::SynchronizeEvent(e) => drop(e.synchronize()),
            HostAction::Read(h) => {
                let mut out = vec![0u8; h.len().min(64)];
                drop(h.read(0, &mut out));
            }
            HostAction::Write(h) => drop(h.write(0, &vec![7u8; h.len().min(64)])),
            HostAction::SetFlag(f, v) => f.set(*v),
            HostAction::Nested(s) => {
                drop(published_stream(*s).map(|s| s.launch_host_func(Box::new(|| {}))))
            }
            HostAction::NewStream(place) => {
                drop(PluginBackend::new_stream(place, StreamOptions::default()))
            }
            HostAction::Given(s, h) => drop(published_stream(*s).map(|s| {
                let given: [&dyn GivenBuffer; 1] = [h.as_ref()];
                launch_with(&s, &given, |bytes| {
                    if let Some(first) = bytes[0].first_mut() {
                        *first = first.wrapping_add(1);
                    }
                })
            })),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            HostAction::Nothing => "nothing",
            HostAction::Panic => "panic",
            HostAction::PanicWithDropPanics => "panic (payload drop panics)",
            HostAction::Query(_) => "query",
            HostAction::Synchronize(_) => "synchronize",
            HostAction::Record(_) => "record",
            HostAction::WaitEvent(..) => "wait_event",
            HostAction::QueryEvent(_) => "event query",
            HostAction::SynchronizeEvent(_) => "event synchronize",
            HostAction::Read(_) => "host read",
            HostAction::Write(_) => "host write",
            HostAction::SetFlag(..) => "flag set",
            HostAction::Nested(_) => "nested launch_host_func",
            HostAction::NewStream(_) => "new stream",
            HostAction::Given(..) => "launch_host_func_with",
        }
    }
}
