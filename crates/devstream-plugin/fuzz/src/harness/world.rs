//! The program's objects and the operations the input drives on them, then the teardown that
//! checks the live counts.

use super::*;

/// What `synchronize` of a new stream answers on every place loaded so far (a capture devstream
/// still counts as in progress shows there).
pub(crate) fn synchronize_everywhere() -> String {
    load::all_places()
        .iter()
        .map(|place| {
            let answer = PluginBackend::new_stream(place, StreamOptions::default())
                .and_then(|s| s.synchronize());
            format!("{place}: {answer:?}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The places whose default stream devstream made (it keeps them for the process).
pub(crate) static DEFAULT_PLACES: Mutex<Vec<Place>> = Mutex::new(Vec::new());

pub(crate) struct World {
    instance: &'static Instance,
    places: Vec<Place>,
    caps: Capabilities,
    clean: bool,
    streams: Vec<PluginStream>,
    events: Vec<PluginEvent>,
    flags: Vec<PluginFlag>,
    buffers: Vec<PluginBuffer>,
    hosts: Vec<Arc<PluginHostBuffer>>,
    graphs: Vec<PluginGraph>,
    completions: Vec<Completion>,
}

use devstream_core::host_fn_launch::{launch_with, GivenBuffer};
use devstream_plugin::PluginBuffer;

/// Operation bytes from here to [`GIVEN_OP`] make a stream wait for a completion
/// ([`World::wait_completion`]).
const WAIT_COMPLETION_OP: u8 = 248;
/// Operation bytes from here on launch a host function given host buffers
/// ([`World::launch_given`]).
const GIVEN_OP: u8 = 252;
/// Host-action bytes that make a host function launch one given a buffer
/// ([`HostAction::Given`]).
const GIVEN_ACTION: std::ops::RangeInclusive<u8> = 244..=247;

impl World {
    pub(crate) fn new(
        instance: &'static Instance,
        places: Vec<Place>,
        caps: Capabilities,
        behaviour: Behaviour,
    ) -> World {
        World {
            instance,
            places,
            caps,
            clean: behaviour.is_clean(),
            streams: Vec::new(),
            events: Vec::new(),
            flags: Vec::new(),
            buffers: Vec::new(),
            hosts: Vec::new(),
            graphs: Vec::new(),
            completions: Vec::new(),
        }
    }

    /// Makes the current objects available to re-entering plug-in calls.
    pub(crate) fn publish(&self) {
        *lock(&TARGETS) = Some(Targets {
            streams: self.streams.clone(),
            events: self.events.clone(),
            flags: self.flags.clone(),
            place: self.places.first().cloned(),
            nonblocking_query: self.caps.nonblocking_query,
        });
    }

    fn place(&self, u: &mut Unstructured<'_>) -> Place {
        self.places[usize::from(byte(u)) % self.places.len()].clone()
    }

    fn index<T>(items: &[T], u: &mut Unstructured<'_>) -> Option<usize> {
        let b = usize::from(byte(u));
        (!items.is_empty()).then(|| b % items.len())
    }

    fn stream(&self, u: &mut Unstructured<'_>) -> Option<PluginStream> {
        Self::index(&self.streams, u).map(|i| self.streams[i].clone())
    }

    fn event(&self, u: &mut Unstructured<'_>) -> Option<PluginEvent> {
        Self::index(&self.events, u).map(|i| self.events[i].clone())
    }

    fn flag(&self, u: &mut Unstructured<'_>) -> Option<PluginFlag> {
        Self::index(&self.flags, u).map(|i| self.flags[i].clone())
    }

    fn host(&self, u: &mut Unstructured<'_>) -> Option<Arc<PluginHostBuffer>> {
        Self::index(&self.hosts, u).map(|i| self.hosts[i].clone())
    }

    fn keep<T>(items: &mut Vec<T>, item: T) {
        if items.len() >= MAX_OBJECTS {
            items.remove(0);
        }
        items.push(item);
    }

    /// A length: small mostly, sometimes absurd.
    fn length(u: &mut Unstructured<'_>) -> usize {
        match byte(u) {
            0..=239 => usize::from(byte(u)) + 1,
            240..=247 => usize::from(byte(u)) * 64,
            248 => 0,
            249 => 1 << 20,
            250 => (1 << 20) + 1,
            251 => 1 << 46,
            252 => 1 << 62,
            253 => usize::MAX / 2,
            _ => usize::MAX,
        }
    }

    fn offset(u: &mut Unstructured<'_>) -> usize {
        match byte(u) {
            0..=191 => 0,
            192..=251 => usize::from(byte(u)),
            252 => usize::MAX,
            _ => 1 << 40,
        }
    }

    fn host_action(&self, u: &mut Unstructured<'_>) -> HostAction {
        let raw = byte(u);
        let or_nothing = |action: Option<HostAction>| action.unwrap_or(HostAction::Nothing);
        // Added after the first 14, on bytes that decode no committed regression input's
        // action (checked by their traces), so those replay the programs they were found with.
        if GIVEN_ACTION.contains(&raw) {
            let s = Self::index(&self.streams, u);
            let h = self.host(u);
            return or_nothing(s.zip(h).map(|(s, h)| HostAction::Given(s, h)));
        }
        match raw % 14 {
            0 => HostAction::Nothing,
            1 => HostAction::Panic,
            2 => HostAction::PanicWithDropPanics,
            3 => or_nothing(Self::index(&self.streams, u).map(HostAction::Query)),
            4 => or_nothing(Self::index(&self.streams, u).map(HostAction::Synchronize)),
            5 => or_nothing(Self::index(&self.streams, u).map(HostAction::Record)),
            6 => {
                let s = Self::index(&self.streams, u);
                let e = self.event(u);
                or_nothing(s.zip(e).map(|(s, e)| HostAction::WaitEvent(s, e)))
            }
            7 => or_nothing(self.event(u).map(HostAction::QueryEvent)),
            8 => or_nothing(self.event(u).map(HostAction::SynchronizeEvent)),
            9 => or_nothing(self.host(u).map(HostAction::Read)),
            10 => or_nothing(self.host(u).map(HostAction::Write)),
            11 => {
                let v = u32::from(byte(u) % 8);
                or_nothing(self.flag(u).map(|f| HostAction::SetFlag(f, v)))
            }
            12 => or_nothing(Self::index(&self.streams, u).map(HostAction::Nested)),
            _ => HostAction::NewStream(self.place(u)),
        }
    }

    /// A host function given one or two of the program's host buffers
    /// (`devstream_core::host_fn_launch::launch_with`, as `Stream::launch_host_func_with`): it
    /// bumps the first byte of each, then does what a plain host function does (which may be
    /// reading or writing one of the buffers it was given: refused inside it while it runs).
    fn launch_given(&mut self, u: &mut Unstructured<'_>) {
        let (s, first) = (self.stream(u), self.host(u));
        let second = if byte(u) & 1 == 0 { self.host(u) } else { None };
        let (Some(s), Some(first)) = (s, first) else {
            return;
        };
        let action = self.host_action(u);
        let given: Vec<Arc<PluginHostBuffer>> = std::iter::once(first).chain(second).collect();
        let name = format!(
            "launch_host_func_with({} buffers, {}) on {}",
            given.len(),
            action.name(),
            s.id()
        );
        let _ = step(name, || {
            let buffers: Vec<&dyn GivenBuffer> = given
                .iter()
                .map(|h| h.as_ref() as &dyn GivenBuffer)
                .collect();
            launch_with(&s, &buffers, move |bytes| {
                for bytes in bytes.iter_mut() {
                    if let Some(first) = bytes.first_mut() {
                        *first = first.wrapping_add(1);
                    }
                }
                action.run();
            })
        });
    }

    /// `wait_completion` of an event's or a stream's completion (`DeviceStream::wait_completion`:
    /// the wait the facade makes for work of another backend, here on the plug-in's own work,
    /// its own stream's included), or of one the program made earlier and kept.
    fn wait_completion(&mut self, u: &mut Unstructured<'_>) {
        let Some(s) = self.stream(u) else {
            return;
        };
        let (awaited, what) = match byte(u) % 3 {
            0 => match self.event(u) {
                Some(e) => (e.completion(), format!("event {}", e.id())),
                None => return,
            },
            1 => match self.stream(u) {
                Some(t) => (t.completion(), format!("stream {}", t.id())),
                None => return,
            },
            _ => match Self::index(&self.completions, u) {
                Some(i) => (self.completions.remove(i), "a kept completion".to_owned()),
                None => return,
            },
        };
        let name = format!("wait_completion({what}) on {}", s.id());
        let _ = step(name, || s.wait_completion(awaited));
    }

    pub(crate) fn apply(&mut self, u: &mut Unstructured<'_>) {
        let op = byte(u);
        // The operations added after the first 36 take the top operation bytes, so the bytes
        // below keep what they decoded to and the committed corpus replays the programs it was
        // found with.
        if op >= GIVEN_OP || (op >= WAIT_COMPLETION_OP && extended()) {
            if op >= GIVEN_OP {
                self.launch_given(u);
            } else {
                self.wait_completion(u);
            }
            return;
        }
        match op % 36 {
            0 | 1 => {
                let place = self.place(u);
                let elide = byte(u) & 1 == 0;
                let options = StreamOptions {
                    elide_waits: elide,
                    ..StreamOptions::default()
                };
                if let Ok(s) = step(format!("Stream::new({place}, elide {elide})"), || {
                    PluginBackend::new_stream(&place, options)
                }) {
                    Self::keep(&mut self.streams, s);
                }
            }
            2 => {
                let place = self.place(u);
                if let Ok(s) = step(format!("default_stream({place})"), || {
                    PluginBackend::default_stream(&place)
                }) {
                    // A default stream lives for the process, and with it what it keeps (the
                    // waits it remembers): no clean-run check of the plug-in's objects.
                    self.clean = false;
                    let mut places = lock(&DEFAULT_PLACES);
                    if !places.contains(&place) {
                        places.push(place);
                    }
                    Self::keep(&mut self.streams, s);
                }
            }
            3 => {
                if let Some(i) = Self::index(&self.streams, u) {
                    let s = self.streams.remove(i);
                    self.publish();
                    step(format!("drop stream {}", s.id()), || drop(s));
                }
            }
            4 => {
                if let Some(i) = Self::index(&self.streams, u) {
                    let s = self.streams.remove(i);
                    self.publish();
                    step(format!("drop stream {} on another thread", s.id()), || {
                        std::thread::spawn(move || drop(s)).join().ok();
                    });
                }
            }
            5 => {
                let place = self.place(u);
                if let Ok(e) = step("Event::new", || {
                    PluginBackend::new_event(&place, EventFlags::default())
                }) {
                    Self::keep(&mut self.events, e);
                }
            }
            6 => {
                if let Some(s) = self.stream(u) {
                    if let Ok(e) = step(format!("record_event on {}", s.id()), || s.record_event())
                    {
                        Self::keep(&mut self.events, e);
                    }
                }
            }
            7 => {
                if let (Some(s), Some(e)) = (self.stream(u), self.event(u)) {
                    let _ = step(format!("record {} on {}", e.id(), s.id()), || s.record(&e));
                }
            }
            8 => {
                if let Some(i) = Self::index(&self.events, u) {
                    let e = self.events.remove(i);
                    step(format!("drop event {}", e.id()), || drop(e));
                }
            }
            9 => {
                if let (Some(s), Some(e)) = (self.stream(u), self.event(u)) {
                    let _ = step(format!("wait_event {} on {}", e.id(), s.id()), || {
                        s.wait_event(&e)
                    });
                }
            }
            10 => {
                if let (Some(s), Some(t)) = (self.stream(u), self.stream(u)) {
                    let _ = step(format!("{} wait_stream {}", s.id(), t.id()), || {
                        s.wait_stream(&t)
                    });
                }
            }
            11 => {
                if let Some(s) = self.stream(u) {
                    let _ = step(format!("query {}", s.id()), || s.query());
                }
            }
            12 => {
                if let Some(s) = self.stream(u) {
                    let _ = step(format!("synchronize {}", s.id()), || s.synchronize());
                }
            }
            13 => {
                if let Some(e) = self.event(u) {
                    let _ = step(format!("event query {}", e.id()), || e.query());
                }
            }
            14 => {
                if let Some(e) = self.event(u) {
                    let _ = step(format!("event synchronize {}", e.id()), || e.synchronize());
                }
            }
            15 | 16 => {
                if let Some(s) = self.stream(u) {
                    let action = self.host_action(u);
                    let name = format!("launch_host_func({}) on {}", action.name(), s.id());
                    let _ = step(name, || s.launch_host_func(Box::new(move || action.run())));
                }
            }
            17 => {
                let place = self.place(u);
                if let Ok(f) = step("Flag::new", || PluginBackend::new_flag(&place)) {
                    Self::keep(&mut self.flags, f);
                }
            }
            18 => {
                if let (Some(s), Some(f)) = (self.stream(u), self.flag(u)) {
                    let v = u32::from(byte(u) % 8);
                    note_wait(&f, v);
                    let _ = step(format!("wait_flag {} >= {v} on {}", f.id(), s.id()), || {
                        s.wait_flag(&f, v)
                    });
                }
            }
            19 => {
                if let (Some(s), Some(f)) = (self.stream(u), self.flag(u)) {
                    let v = u32::from(byte(u) % 8);
                    let _ = step(format!("write_flag {} = {v} on {}", f.id(), s.id()), || {
                        s.write_flag(&f, v)
                    });
                }
            }
            20 => {
                if let Some(f) = self.flag(u) {
                    let v = u32::from(byte(u) % 8);
                    step(format!("flag {} set {v}", f.id()), || f.set(v));
                }
            }
            21 => {
                if let Some(s) = self.stream(u) {
                    let len = Self::length(u);
                    if let Ok(b) = step(format!("alloc {len} on {}", s.id()), || s.alloc(len)) {
                        Self::keep(&mut self.buffers, b);
                    }
                }
            }
            22 => {
                if let Some(s) = self.stream(u) {
                    let len = Self::length(u);
                    if let Ok(h) = step(format!("alloc_host {len} on {}", s.id()), || {
                        s.alloc_host(len)
                    }) {
                        Self::keep(&mut self.hosts, Arc::new(h));
                    }
                }
            }
            23 => {
                if byte(u) & 1 == 0 {
                    if let Some(i) = Self::index(&self.buffers, u) {
                        let b = self.buffers.remove(i);
                        step("drop buffer", || drop(b));
                    }
                } else if let Some(i) = Self::index(&self.hosts, u) {
                    let h = self.hosts.remove(i);
                    step("drop host buffer", || drop(h));
                }
            }
            24 => {
                if let (Some(s), Some(b)) = (self.stream(u), Self::index(&self.buffers, u)) {
                    let (offset, len, value) = (Self::offset(u), Self::length(u), byte(u));
                    let b = &self.buffers[b];
                    let _ = step(format!("fill {offset}+{len} on {}", s.id()), || {
                        s.fill(b, offset, len, value)
                    });
                }
            }
            25 => {
                if let (Some(s), Some(b)) = (self.stream(u), Self::index(&self.buffers, u)) {
                    let offset = Self::offset(u);
                    let data = vec![byte(u); usize::from(byte(u)) + 1];
                    let b = &self.buffers[b];
                    let _ = step(
                        format!("copy_from_host {offset}+{} on {}", data.len(), s.id()),
                        || s.copy_from_host(b, offset, &data),
                    );
                }
            }
            26 => {
                let (s, b, h) = (self.stream(u), Self::index(&self.buffers, u), self.host(u));
                if let (Some(s), Some(b), Some(h)) = (s, b, h) {
                    let (d, o, len) = (Self::offset(u), Self::offset(u), Self::length(u));
                    let b = &self.buffers[b];
                    let _ = step(
                        format!("copy_host_to_device {d} {o} {len} on {}", s.id()),
                        || s.copy_host_to_device(b, d, &h, o, len),
                    );
                }
            }
            27 => {
                let (s, b, h) = (self.stream(u), Self::index(&self.buffers, u), self.host(u));
                if let (Some(s), Some(b), Some(h)) = (s, b, h) {
                    let (d, o, len) = (Self::offset(u), Self::offset(u), Self::length(u));
                    let b = &self.buffers[b];
                    let _ = step(
                        format!("copy_device_to_host {d} {o} {len} on {}", s.id()),
                        || s.copy_device_to_host(&h, d, b, o, len),
                    );
                }
            }
            28 => {
                let (s, a, b) = (
                    self.stream(u),
                    Self::index(&self.buffers, u),
                    Self::index(&self.buffers, u),
                );
                if let (Some(s), Some(a), Some(b)) = (s, a, b) {
                    let (d, o, len) = (Self::offset(u), Self::offset(u), Self::length(u));
                    let (a, b) = (&self.buffers[a], &self.buffers[b]);
                    let _ = step(
                        format!("copy_device_to_device {d} {o} {len} on {}", s.id()),
                        || s.copy_device_to_device(a, d, b, o, len),
                    );
                }
            }
            29 => {
                if let Some(h) = self.host(u) {
                    if byte(u) & 1 == 0 {
                        let mut out = vec![0u8; h.len().min(256)];
                        let _ = step("host read", || h.read(0, &mut out));
                    } else {
                        let data = vec![byte(u); h.len().min(256)];
                        let _ = step("host write", || h.write(0, &data));
                    }
                }
            }
            30 => {
                if let Some(s) = self.stream(u) {
                    let mode = match byte(u) % 3 {
                        0 => CaptureMode::Global,
                        1 => CaptureMode::ThreadLocal,
                        _ => CaptureMode::Relaxed,
                    };
                    let _ = step(format!("begin_capture({mode:?}) on {}", s.id()), || {
                        s.begin_capture(mode)
                    });
                }
            }
            31 => {
                if let Some(s) = self.stream(u) {
                    if let Ok(g) = step(format!("end_capture on {}", s.id()), || s.end_capture()) {
                        Self::keep(&mut self.graphs, g);
                    }
                }
            }
            32 => {
                if let (Some(g), Some(s)) = (Self::index(&self.graphs, u), self.stream(u)) {
                    if byte(u) & 3 == 0 {
                        let g = self.graphs.remove(g);
                        step("drop graph", || drop(g));
                    } else {
                        let g = &self.graphs[g];
                        let _ = step(format!("Graph::launch on {}", s.id()), || g.launch(&s));
                    }
                }
            }
            33 => {
                if let Some(s) = self.stream(u) {
                    let _ = step(format!("is_capturing {}", s.id()), || s.is_capturing());
                }
            }
            34 => {
                let completion = if byte(u) & 1 == 0 {
                    self.stream(u)
                        .map(|s| step("Stream::completion", || s.completion()))
                } else {
                    self.event(u)
                        .map(|e| step("Event::completion", || e.completion()))
                };
                if let Some(mut completion) = completion {
                    let mut cx = Context::from_waker(Waker::noop());
                    let _ = Pin::new(&mut completion).poll(&mut cx);
                    Self::keep(&mut self.completions, completion);
                }
            }
            _ => {
                // Another thread runs the next operation (thread-local capture rules, drops).
                step("next operation on another thread", || {
                    std::thread::scope(|scope| {
                        scope
                            .spawn(|| {
                                if !u.is_empty() {
                                    self.apply(u);
                                }
                            })
                            .join()
                            .ok();
                    })
                });
            }
        }
    }

    pub(crate) fn teardown(&mut self) {
        *lock(&TARGETS) = None;
        release_flags();
        // Polled once more, then dropped (abandoned or done).
        for mut completion in std::mem::take(&mut self.completions) {
            let mut cx = Context::from_waker(Waker::noop());
            let _ = Pin::new(&mut completion).poll(&mut cx);
        }
        // End the captures still open, then drop everything. The places' default streams
        // too, of every plug-in loaded so far: devstream keeps them (and a capture begun on
        // one) for the process, and a `Global` capture left there would hold back every
        // release of every plug-in from then on. `end_capture` whatever `is_capturing` says:
        // a plug-in may misreport its capture, and `end_capture` also ends what devstream
        // registered for the stream (an error where nothing was capturing).
        let defaults: Vec<PluginStream> = lock(&DEFAULT_PLACES)
            .iter()
            .filter_map(|place| PluginBackend::default_stream(place).ok())
            .collect();
        for s in self.streams.iter().cloned().chain(defaults) {
            if s.capabilities().capture != CaptureSupport::None {
                drop(s.end_capture());
            }
        }
        self.graphs.clear();
        self.events.clear();
        self.buffers.clear();
        self.hosts.clear();
        self.streams.clear();
        // The flags stay known (and released, here and by the watchdog) until the work that
        // may wait for them is done: a write queued before the teardown may lower a flag again
        // after a release, and a wait it leaves unreached on a default stream would hold that
        // stream's later work for the rest of the process, where a later input's synchronize
        // or capture would wait for it.
        release_flags();
        let defaults: Vec<PluginStream> = lock(&DEFAULT_PLACES)
            .iter()
            .filter_map(|place| PluginBackend::default_stream(place).ok())
            .collect();
        for s in defaults {
            // Hands the work the stream holds on the host to the plug-in and waits for it.
            drop(s.synchronize());
        }
        let quiet = |instance: &Instance| {
            release_flags();
            // Callbacks held as "never" are run now (more may arrive while work drains).
            instance.release_never();
            let live = PluginBackend::live_counts();
            live.streams == 0 && live.events == 0 && instance.idle() && crate::pool::busy() == 0
        };
        let quieted = self.instance.wait_for(TEARDOWN_LIMIT, quiet);
        lock(&FLAGS).clear();
        self.flags.clear();
        if !quieted {
            let live = PluginBackend::live_counts();
            plugin::violation(format_args!(
                "after the teardown devstream still has {} live streams and {} live events \
                 (plug-in idle: {}, pool jobs: {})",
                live.streams,
                live.events,
                self.instance.idle(),
                crate::pool::busy()
            ));
        }
        if self.clean {
            // What this iteration made must be released.
            let released = |instance: &Instance| {
                instance.live() == plugin::PluginLive::default() && instance.open_captures() == 0
            };
            if !self.instance.wait_for(TEARDOWN_LIMIT, released) {
                plugin::violation(format_args!(
                    "a clean run left plug-in objects: {:?} ({}), {} captures open; a new \
                     stream's synchronize on each place: {}",
                    self.instance.live(),
                    self.instance.describe_live(),
                    self.instance.open_captures(),
                    synchronize_everywhere()
                ));
            }
        }
    }
}
