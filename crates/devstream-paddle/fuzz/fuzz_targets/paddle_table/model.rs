//! The model of what an input made live, and the check of each call's answer against it.

use crate::racer::Racer;
use devstream_paddle_sys::*;
use std::sync::OnceLock;

/// The kinds of things a call may be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Stream,
    Event,
    Graph,
    Exec,
    Device,
    Host,
}

pub(crate) const KINDS: [Kind; 6] = [
    Kind::Stream,
    Kind::Event,
    Kind::Graph,
    Kind::Exec,
    Kind::Device,
    Kind::Host,
];

/// A live stream.
pub(crate) struct StreamState {
    pub(crate) handle: usize,
    /// Work queued on it may have failed (a failing callback, a graph holding one, or a wait
    /// on such work), so its synchronisation may answer `C_ERROR`.
    pub(crate) may_fail: bool,
    /// The capture it began, if open.
    pub(crate) origin: Option<u64>,
    /// The capture it joined, if open.
    pub(crate) joined: Option<u64>,
}

/// A live event.
pub(crate) struct EventState {
    pub(crate) handle: usize,
    /// Its last record was in this capture (waiting on it, querying it: CUDA's capture rules).
    pub(crate) captured: Option<u64>,
    /// The work it captured may have failed.
    pub(crate) may_fail: bool,
}

/// A live graph or executable graph.
pub(crate) struct GraphState {
    pub(crate) handle: usize,
    /// Its captured work holds a failing callback.
    pub(crate) may_fail: bool,
}

/// An open capture.
pub(crate) struct Capture {
    pub(crate) id: u64,
    /// A failing callback was captured.
    pub(crate) may_fail: bool,
}

/// What is live, as the fuzzer made it.
#[derive(Default)]
pub(crate) struct Model {
    pub(crate) streams: Vec<StreamState>,
    pub(crate) events: Vec<EventState>,
    pub(crate) graphs: Vec<GraphState>,
    pub(crate) execs: Vec<GraphState>,
    /// Device allocations: (address, size).
    pub(crate) device: Vec<(usize, usize)>,
    /// Host allocations: (address, size).
    pub(crate) host: Vec<(usize, usize)>,
    /// Destroyed handles and freed addresses (the latest).
    pub(crate) dead: Vec<usize>,
    pub(crate) captures: Vec<Capture>,
    pub(crate) next_capture: u64,
    /// The null stream's work may have failed.
    pub(crate) null_may_fail: bool,
    /// The thread racing this one's calls with its own, if started.
    pub(crate) racer: Option<Racer>,
}

impl Model {
    /// While a capture is open, CUDA's rules let calls refuse work they would otherwise do.
    pub(crate) fn relaxed(&self) -> bool {
        !self.captures.is_empty()
    }

    pub(crate) fn live(&self, kind: Kind) -> Vec<usize> {
        match kind {
            Kind::Stream => self.streams.iter().map(|s| s.handle).collect(),
            Kind::Event => self.events.iter().map(|e| e.handle).collect(),
            Kind::Graph => self.graphs.iter().map(|g| g.handle).collect(),
            Kind::Exec => self.execs.iter().map(|g| g.handle).collect(),
            Kind::Device => self.device.iter().map(|a| a.0).collect(),
            Kind::Host => self.host.iter().map(|a| a.0).collect(),
        }
    }

    pub(crate) fn is_live(&self, kind: Kind, value: usize) -> bool {
        value != 0 && self.live(kind).contains(&value)
    }

    pub(crate) fn stream(&mut self, handle: usize) -> Option<&mut StreamState> {
        self.streams.iter_mut().find(|s| s.handle == handle)
    }

    pub(crate) fn event(&mut self, handle: usize) -> Option<&mut EventState> {
        self.events.iter_mut().find(|e| e.handle == handle)
    }

    pub(crate) fn bury(&mut self, value: usize) {
        if self.dead.len() >= 64 {
            self.dead.remove(0);
        }
        self.dead.push(value);
    }

    /// The live device allocation holding `[addr, addr + size)`, if any.
    pub(crate) fn inside(&self, addr: usize, size: usize) -> bool {
        self.device
            .iter()
            .any(|&(start, len)| addr >= start && size <= len && addr - start <= len - size)
    }

    /// Whether the stream `handle` (0: the null stream) may report a failure.
    pub(crate) fn may_fail(&self, handle: usize) -> bool {
        if handle == 0 {
            return self.null_may_fail;
        }
        self.streams
            .iter()
            .any(|s| s.handle == handle && s.may_fail)
    }

    /// `handle` (0: the null stream) was synchronised: its failures are reported.
    pub(crate) fn synchronized(&mut self, handle: usize) {
        if handle == 0 {
            self.null_may_fail = false;
        } else if let Some(s) = self.stream(handle) {
            s.may_fail = false;
        }
    }

    /// Work on `handle` (0: the null stream) may fail.
    pub(crate) fn taint(&mut self, handle: usize) {
        if handle == 0 {
            self.null_may_fail = true;
        } else if let Some(s) = self.stream(handle) {
            s.may_fail = true;
        }
    }

    /// Work queued on stream `handle` (0: the null stream) may fail: the capture it is in,
    /// if any, else the stream itself.
    pub(crate) fn work_may_fail(&mut self, handle: usize) {
        match self.capture_of(handle) {
            Some(id) => {
                if let Some(c) = self.captures.iter_mut().find(|c| c.id == id) {
                    c.may_fail = true;
                }
            }
            None => self.taint(handle),
        }
    }

    /// The live `handle` of `kind` was destroyed or freed: the model forgets it (a stream's
    /// capture ends with it) and remembers it as dead.
    pub(crate) fn forget(&mut self, kind: Kind, handle: usize) {
        match kind {
            Kind::Stream => {
                if let Some(id) = self.stream(handle).and_then(|st| st.origin) {
                    self.end_capture(id);
                }
                self.streams.retain(|st| st.handle != handle);
            }
            Kind::Event => self.events.retain(|ev| ev.handle != handle),
            Kind::Graph => self.graphs.retain(|gr| gr.handle != handle),
            Kind::Exec => self.execs.retain(|gr| gr.handle != handle),
            Kind::Device => self.device.retain(|a| a.0 != handle),
            Kind::Host => self.host.retain(|a| a.0 != handle),
        }
        self.bury(handle);
    }

    /// The capture stream `handle` is in (began or joined), if open.
    pub(crate) fn capture_of(&self, handle: usize) -> Option<u64> {
        self.streams
            .iter()
            .find(|s| s.handle == handle)
            .and_then(|s| s.origin.or(s.joined))
    }

    /// Capture `id` ended (its graph made or not).
    pub(crate) fn end_capture(&mut self, id: u64) -> bool {
        let mut may_fail = false;
        self.captures.retain(|c| {
            if c.id == id {
                may_fail = c.may_fail;
            }
            c.id != id
        });
        for s in &mut self.streams {
            if s.origin == Some(id) {
                s.origin = None;
            }
            if s.joined == Some(id) {
                s.joined = None;
            }
        }
        may_fail
    }
}

/// Checks a call's answer. `valid`: every argument names a live object of its kind, a range
/// inside a live allocation, a real device, a writable out-parameter. `ok`: what a valid call
/// answers while no capture is open.
pub(crate) fn expect(model: &Model, what: &str, answer: C_Status, valid: bool, ok: &[C_Status]) {
    if trace() {
        eprintln!(
            "paddle_table: {what} -> {answer:?} (valid: {valid}, relaxed: {})",
            model.relaxed()
        );
    }
    assert!(
        answer != C_WARNING && answer != C_INTERNAL_ERROR,
        "{what} answered {answer:?}"
    );
    if !valid {
        assert_eq!(
            answer, C_ERROR,
            "{what}: refused arguments must answer C_ERROR"
        );
    } else if !model.relaxed() {
        assert!(
            ok.contains(&answer),
            "{what} answered {answer:?}, not one of {ok:?}"
        );
    }
}

/// Checks the answer of `what`, which destroys or frees `handle` of `kind` (`valid`: it is live
/// and the device named, where the call names one, is real): a live one must be destroyed,
/// whatever captures are open, and the model forgets it.
pub(crate) fn expect_destroyed(
    m: &mut Model,
    what: &str,
    (kind, handle): (Kind, usize),
    valid: bool,
    answer: C_Status,
) {
    expect(m, what, answer, valid, &[C_SUCCESS]);
    if valid {
        assert_eq!(answer, C_SUCCESS, "{what} of a live {kind:?}");
        m.forget(kind, handle);
    }
}

/// Whether each call is printed (`PADDLE_TABLE_TRACE=1`, to read a finding's calls).
fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("PADDLE_TABLE_TRACE").is_some())
}

/// What a call that synchronises `stream` answers when valid.
pub(crate) fn sync_answers(m: &Model, stream: usize) -> &'static [C_Status] {
    if m.may_fail(stream) {
        &[C_SUCCESS, C_ERROR]
    } else {
        &[C_SUCCESS]
    }
}
