//! Fuzz target `paddle_table`: devstream-paddle's C table as a hostile Paddle would call it.
//!
//! `InitPlugin` runs once per process and fills a 3.3 table for `devstream_cpu` (the graph
//! functions included: `DEVSTREAM_PADDLE_EMULATED_CAPTURE=1`). Each input is then a sequence of
//! table calls whose arguments are drawn from what is live and what is not: handles that are
//! live, destroyed, of another kind (a stream as an event, an event as a graph, an address as a
//! stream, ...), forged (a bit of a live handle flipped, arbitrary integers) or null; device
//! addresses inside, at the end of and past live allocations, freed, or host memory; host
//! pointers that are null or valid memory; sizes that are 0, small, at the limits or huge; device
//! ids that exist or not; out-parameters that are null or valid.
//!
//! A model of the live objects decides what each call must answer, and any disagreement panics
//! (libFuzzer reports it, as it does a sanitizer report or a crash):
//! * anything but a live object of the call's kind (or the null stream, where Paddle may pass
//!   it) answers `C_ERROR`, writes no out-parameter and acts on nothing: each live object is
//!   destroyed exactly once at the end of the input, and that destroy must succeed;
//! * while no capture is open, calls on live objects and ranges inside live allocations answer
//!   success (a stream's synchronisation may report a failing callback it ran; queries may
//!   answer "not ready"); while a capture is open, calls that CUDA's capture rules may refuse
//!   answer success or `C_ERROR`, never anything else;
//! * at the end of each input (captures ended, every stream synchronised, everything destroyed)
//!   the plug-in's live counts are zero for every kind.
//!
//! The host side of copies is a never-freed arena: work queued on a stream may still run after
//! the input ends (a destroyed stream's work runs on), as Paddle keeps such memory alive.

#![no_main]

/// AddressSanitizer's options for this target, whoever runs it: huge allocations answer null
/// (the plug-in must answer them with a status, which the model checks) instead of aborting;
/// freed memory kept from reuse up to 64 MiB (far more than one input frees between a free
/// and a later use of it), so that long runs stay well below libFuzzer's 2 GiB memory limit.
#[no_mangle]
pub extern "C" fn __asan_default_options() -> *const std::ffi::c_char {
    c"allocator_may_return_null=1:detect_stack_use_after_return=1:quarantine_size_mb=64".as_ptr()
}

use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::{Result as Drawn, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The largest allocation the plug-in grants (`DEVSTREAM_PADDLE_MEMORY_BYTES`): larger ones
/// answer success with a null pointer.
const BUDGET: usize = 16 << 20;
/// Bytes of the host arena copies read and write.
const ARENA: usize = 1 << 16;
/// The most calls one input makes.
const MOST_CALLS: usize = 200;
/// Written to out-parameters before a call: a failing call must leave it.
const UNWRITTEN: usize = 0x5eed_0000_0000_0ff0;

/// The table `InitPlugin` filled, and the arena.
struct Plugin {
    table: &'static C_DeviceInterface,
    arena: usize,
}

// SAFETY: the table is read-only once filled; its raw pointers are null reserved words.
unsafe impl Sync for Plugin {}
// SAFETY: as above.
unsafe impl Send for Plugin {}

fn plugin() -> &'static Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        std::env::set_var("DEVSTREAM_PADDLE_BACKENDS", "cpu");
        std::env::set_var("DEVSTREAM_PADDLE_EMULATED_CAPTURE", "1");
        std::env::set_var("DEVSTREAM_PADDLE_MEMORY_BYTES", BUDGET.to_string());
        let table = Box::leak(Box::new(C_DeviceInterface::zeroed()));
        table.size = std::mem::size_of::<C_DeviceInterface>();
        let mut params = CustomRuntimeParams::zeroed();
        params.size = std::mem::size_of::<CustomRuntimeParams>();
        params.interface = table;
        // SAFETY: whole, writable params and table of the sizes they announce.
        unsafe { devstream_paddle::InitPlugin(&mut params) };
        assert!(
            !params.device_type.is_null(),
            "InitPlugin registered nothing"
        );
        // SAFETY: the plug-in writes a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(params.device_type) };
        assert_eq!(name.to_str(), Ok("devstream_cpu"));
        let arena = Box::leak(vec![0u8; ARENA].into_boxed_slice());
        Plugin {
            table,
            arena: arena.as_mut_ptr() as usize,
        }
    })
}

/// Calls table function `$name` (filled by `InitPlugin`).
macro_rules! call {
    ($name:ident($($arg:expr),* $(,)?)) => {{
        let f = plugin().table.$name.expect(stringify!($name));
        // SAFETY: every pointer argument is null or valid for what the function reads or
        // writes (the fuzzer's contract with the plug-in); handles and addresses are integers
        // the plug-in checks.
        unsafe { f($($arg),*) }
    }};
}

/// What the callbacks the fuzzer queues do, by bit of their `user_data`.
const CALLBACK_FAILS: usize = 1;
const CALLBACK_QUERIES: usize = 2;
const CALLBACK_SYNCHRONIZES: usize = 4;

/// Callbacks run (a sanity count, and the reentrant calls' answers are checked in them).
static CALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// The callback of `stream_add_callback`: `user_data` is a set of `CALLBACK_*` bits.
unsafe extern "C" fn callback(
    device: C_Device,
    stream: C_Stream,
    user_data: *mut c_void,
    status: *mut C_Status,
) {
    CALLBACKS.fetch_add(1, Ordering::Relaxed);
    let what = user_data as usize;
    // A host function may call the API on its own stream: an answer, never a hang or a crash.
    if what & CALLBACK_QUERIES != 0 {
        let answer = call!(query_stream(device, stream));
        assert!(
            [C_SUCCESS, C_FAILED, C_ERROR].contains(&answer),
            "query_stream in a callback answered {answer:?}"
        );
    }
    if what & CALLBACK_SYNCHRONIZES != 0 {
        let answer = call!(synchronize_stream(device, stream));
        assert!(
            [C_SUCCESS, C_ERROR].contains(&answer),
            "synchronize_stream in a callback answered {answer:?}"
        );
    }
    if what & CALLBACK_FAILS != 0 {
        // SAFETY: the plug-in passes a writable status.
        unsafe { status.write(C_ERROR) };
    }
}

/// The kinds of things a call may be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Stream,
    Event,
    Graph,
    Exec,
    Device,
    Host,
}

const KINDS: [Kind; 6] = [
    Kind::Stream,
    Kind::Event,
    Kind::Graph,
    Kind::Exec,
    Kind::Device,
    Kind::Host,
];

/// A live stream.
struct StreamState {
    handle: usize,
    /// Work queued on it may have failed (a failing callback, a graph holding one, or a wait
    /// on such work), so its synchronisation may answer `C_ERROR`.
    may_fail: bool,
    /// The capture it began, if open.
    origin: Option<u64>,
    /// The capture it joined, if open.
    joined: Option<u64>,
}

/// A live event.
struct EventState {
    handle: usize,
    /// Its last record was in this capture (waiting on it, querying it: CUDA's capture rules).
    captured: Option<u64>,
    /// The work it captured may have failed.
    may_fail: bool,
}

/// A live graph or executable graph.
struct GraphState {
    handle: usize,
    /// Its captured work holds a failing callback.
    may_fail: bool,
}

/// An open capture.
struct Capture {
    id: u64,
    /// A failing callback was captured.
    may_fail: bool,
}

/// What is live, as the fuzzer made it.
#[derive(Default)]
struct Model {
    streams: Vec<StreamState>,
    events: Vec<EventState>,
    graphs: Vec<GraphState>,
    execs: Vec<GraphState>,
    /// Device allocations: (address, size).
    device: Vec<(usize, usize)>,
    /// Host allocations: (address, size).
    host: Vec<(usize, usize)>,
    /// Destroyed handles and freed addresses (the latest).
    dead: Vec<usize>,
    captures: Vec<Capture>,
    next_capture: u64,
    /// The null stream's work may have failed.
    null_may_fail: bool,
    /// The thread racing this one's calls with its own, if started.
    racer: Option<Racer>,
}

impl Model {
    /// While a capture is open, CUDA's rules let calls refuse work they would otherwise do.
    fn relaxed(&self) -> bool {
        !self.captures.is_empty()
    }

    fn live(&self, kind: Kind) -> Vec<usize> {
        match kind {
            Kind::Stream => self.streams.iter().map(|s| s.handle).collect(),
            Kind::Event => self.events.iter().map(|e| e.handle).collect(),
            Kind::Graph => self.graphs.iter().map(|g| g.handle).collect(),
            Kind::Exec => self.execs.iter().map(|g| g.handle).collect(),
            Kind::Device => self.device.iter().map(|a| a.0).collect(),
            Kind::Host => self.host.iter().map(|a| a.0).collect(),
        }
    }

    fn is_live(&self, kind: Kind, value: usize) -> bool {
        value != 0 && self.live(kind).contains(&value)
    }

    fn stream(&mut self, handle: usize) -> Option<&mut StreamState> {
        self.streams.iter_mut().find(|s| s.handle == handle)
    }

    fn event(&mut self, handle: usize) -> Option<&mut EventState> {
        self.events.iter_mut().find(|e| e.handle == handle)
    }

    fn bury(&mut self, value: usize) {
        if self.dead.len() >= 64 {
            self.dead.remove(0);
        }
        self.dead.push(value);
    }

    /// The live device allocation holding `[addr, addr + size)`, if any.
    fn inside(&self, addr: usize, size: usize) -> bool {
        self.device
            .iter()
            .any(|&(start, len)| addr >= start && size <= len && addr - start <= len - size)
    }

    /// Whether the stream `handle` (0: the null stream) may report a failure.
    fn may_fail(&self, handle: usize) -> bool {
        if handle == 0 {
            return self.null_may_fail;
        }
        self.streams
            .iter()
            .any(|s| s.handle == handle && s.may_fail)
    }

    /// `handle` (0: the null stream) was synchronised: its failures are reported.
    fn synchronized(&mut self, handle: usize) {
        if handle == 0 {
            self.null_may_fail = false;
        } else if let Some(s) = self.stream(handle) {
            s.may_fail = false;
        }
    }

    /// Work on `handle` (0: the null stream) may fail.
    fn taint(&mut self, handle: usize) {
        if handle == 0 {
            self.null_may_fail = true;
        } else if let Some(s) = self.stream(handle) {
            s.may_fail = true;
        }
    }

    /// The capture stream `handle` is in (began or joined), if open.
    fn capture_of(&self, handle: usize) -> Option<u64> {
        self.streams
            .iter()
            .find(|s| s.handle == handle)
            .and_then(|s| s.origin.or(s.joined))
    }

    /// Capture `id` ended (its graph made or not).
    fn end_capture(&mut self, id: u64) -> bool {
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
fn expect(model: &Model, what: &str, answer: C_Status, valid: bool, ok: &[C_Status]) {
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

/// Whether each call is printed (`PADDLE_TABLE_TRACE=1`, to read a finding's calls).
fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("PADDLE_TABLE_TRACE").is_some())
}

/// The fuzzer's draws from one input.
struct Draw<'a, 'b> {
    u: &'b mut Unstructured<'a>,
}

impl Draw<'_, '_> {
    fn byte(&mut self) -> Drawn<u8> {
        self.u.arbitrary()
    }

    fn index(&mut self, len: usize) -> Drawn<usize> {
        if len == 0 {
            return Ok(0);
        }
        self.u.choose_index(len)
    }

    fn flag(&mut self) -> Drawn<bool> {
        self.u.arbitrary()
    }

    /// A device pointer: id 0 mostly; sometimes another id or null. Answers whether it names
    /// the device.
    fn device(&mut self, slot: &mut C_Device_st) -> Drawn<(C_Device, bool)> {
        Ok(match self.byte()? % 32 {
            0 => {
                slot.id = 1;
                (slot as *mut C_Device_st, false)
            }
            1 => {
                slot.id = self.u.arbitrary::<c_int>()?;
                (slot as *mut C_Device_st, slot.id == 0)
            }
            2 => (null_mut(), false),
            _ => {
                slot.id = 0;
                (slot as *mut C_Device_st, true)
            }
        })
    }

    /// Something given where a `want` is expected: live of that kind mostly, else of another
    /// kind, destroyed, forged, arbitrary or null.
    fn value(&mut self, model: &Model, want: Kind) -> Drawn<usize> {
        let pick = |d: &mut Self, values: Vec<usize>| -> Drawn<Option<usize>> {
            if values.is_empty() {
                return Ok(None);
            }
            let i = d.index(values.len())?;
            Ok(Some(values[i]))
        };
        let choice = self.byte()? % 16;
        let drawn = match choice {
            0..=8 => pick(self, model.live(want))?,
            9 | 10 => {
                let kind = KINDS[self.index(KINDS.len())?];
                pick(self, model.live(kind))?
            }
            11 => pick(self, model.dead.clone())?,
            12 | 13 => {
                // Forged from a live handle: one bit flipped (tag, generation, index, low).
                let all: Vec<usize> = KINDS.iter().flat_map(|&k| model.live(k)).collect();
                match pick(self, all)? {
                    Some(v) => {
                        let bit = [63, 62, 61, 60, 59, 40, 24, 23, 5, 4, 3, 0][self.index(12)?];
                        Some(v ^ (1 << bit))
                    }
                    None => None,
                }
            }
            14 => Some(self.u.arbitrary::<usize>()?),
            _ => Some(0),
        };
        Ok(drawn.unwrap_or(0))
    }

    /// A device address for `size` bytes: inside, at the end of or past a live allocation
    /// mostly, else anything [`Draw::value`] draws.
    fn address(&mut self, model: &Model, size: usize) -> Drawn<usize> {
        if model.device.is_empty() || self.byte()? % 4 == 0 {
            return self.value(model, Kind::Device);
        }
        let (start, len) = model.device[self.index(model.device.len())?];
        let offset = match self.byte()? % 4 {
            0 => 0,
            1 => len.saturating_sub(size),
            2 => len,
            _ => self.index(len.max(1))?,
        };
        Ok(start.wrapping_add(offset))
    }

    /// A size: small mostly, else 0, a power of two, the budget's edges, or huge.
    fn size(&mut self) -> Drawn<usize> {
        Ok(match self.byte()? % 16 {
            0 => 0,
            1 => 1 << self.index(20)?,
            2 => BUDGET,
            3 => BUDGET + 1,
            4 => [1 << 46, 1 << 62, usize::MAX, usize::MAX - 255][self.index(4)?],
            5 => self.u.arbitrary()?,
            _ => self.index(4097)?,
        })
    }

    /// A host pointer for `size` bytes: inside the arena (when it fits), or null. Answers
    /// whether it is non-null.
    fn host_pointer(&mut self, size: usize) -> Drawn<Option<usize>> {
        if self.byte()? % 8 == 0 || size > ARENA {
            return Ok(None);
        }
        let offset = self.index(ARENA - size + 1)?;
        Ok(Some(plugin().arena + offset))
    }
}

/// A thread that, from its start to the input's clean-up, makes read-only calls (queries,
/// event synchronisation, capture info) on every stream and event handle the input made,
/// live or destroyed since: a destroy or a reuse of a slot racing a use on another thread
/// must leave that use working on a valid object or answering `C_ERROR`, never touching freed
/// memory. Its answers depend on timing, so only their range is checked.
struct Racer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// The stream and event handles of the current input (both kinds: each call also gets the
/// other kind's handles).
static RACED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

impl Racer {
    fn start(seed: u64) -> Racer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as usize
            };
            let mut device = C_Device_st { id: 0 };
            let dev: C_Device = &mut device;
            while !flag.load(Ordering::Acquire) {
                let handles = RACED.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if handles.is_empty() {
                    std::thread::yield_now();
                    continue;
                }
                let h = handles[next() % handles.len()];
                let answer = match next() % 4 {
                    0 => call!(query_stream(dev, h as C_Stream)),
                    1 => call!(query_event(dev, h as C_Event)),
                    2 => call!(synchronize_event(dev, h as C_Event)),
                    _ => {
                        let mut status: C_StreamCaptureStatus = 0;
                        call!(cuda_stream_capture_info(
                            dev,
                            h as C_Stream,
                            &mut status,
                            null_mut(),
                            null_mut(),
                            null_mut(),
                            null_mut(),
                            null_mut()
                        ))
                    }
                };
                assert!(
                    [C_SUCCESS, C_FAILED, C_ERROR].contains(&answer),
                    "a racing call answered {answer:?}"
                );
            }
        });
        Racer { stop, thread }
    }

    /// A handle for the racer to use.
    fn offer(handle: usize) {
        RACED.lock().unwrap_or_else(|p| p.into_inner()).push(handle);
    }

    /// The input is over: no handle of it is used any more.
    fn forget() {
        RACED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        if self.thread.join().is_err() {
            panic!("the racing thread panicked");
        }
    }
}

/// One input: its calls, then the cleanup and the live-count check.
fn run(data: &[u8]) {
    let plugin = plugin();
    let _ = plugin.table;
    let mut u = Unstructured::new(data);
    let mut model = Model {
        next_capture: 1,
        ..Model::default()
    };
    for _ in 0..MOST_CALLS {
        if u.is_empty() {
            break;
        }
        let mut draw = Draw { u: &mut u };
        if step(&mut draw, &mut model).is_err() {
            break;
        }
    }
    clean_up(&mut model);
}

/// One call drawn from the input.
fn step(d: &mut Draw<'_, '_>, m: &mut Model) -> Drawn<()> {
    let mut device_slot = C_Device_st { id: 0 };
    let (dev, dev_ok) = d.device(&mut device_slot)?;
    let op = d.byte()? % 37;
    match op {
        0 => {
            let null_out = d.byte()? % 8 == 0;
            let mut out = UNWRITTEN as C_Stream;
            let out_ptr = if null_out { null_mut() } else { &mut out };
            let answer = call!(create_stream(dev, out_ptr));
            expect(
                m,
                "create_stream",
                answer,
                dev_ok && !null_out,
                &[C_SUCCESS],
            );
            if answer == C_SUCCESS {
                assert!(!out.is_null() && out as usize != UNWRITTEN);
                Racer::offer(out as usize);
                m.streams.push(StreamState {
                    handle: out as usize,
                    may_fail: false,
                    origin: None,
                    joined: None,
                });
                // A new stream inherits nothing: its synchronisation succeeds.
                if !m.relaxed() {
                    let answer = call!(synchronize_stream(dev, out));
                    expect(
                        m,
                        "synchronize_stream of a new stream",
                        answer,
                        true,
                        &[C_SUCCESS],
                    );
                }
            } else {
                assert_eq!(out as usize, UNWRITTEN, "create_stream wrote on failure");
            }
        }
        1 => {
            let s = d.value(m, Kind::Stream)?;
            let valid = dev_ok && m.is_live(Kind::Stream, s);
            let answer = call!(destroy_stream(dev, s as C_Stream));
            // Destroying a live stream always succeeds, even capturing.
            assert!(
                !valid || answer == C_SUCCESS,
                "destroy_stream of a live stream answered {answer:?}"
            );
            expect(m, "destroy_stream", answer, valid, &[C_SUCCESS]);
            if valid {
                let origin = m.stream(s).and_then(|st| st.origin);
                if let Some(id) = origin {
                    m.end_capture(id);
                }
                m.streams.retain(|st| st.handle != s);
                m.bury(s);
            }
        }
        2 | 3 => {
            let s = stream_arg(d, m)?;
            let valid = dev_ok && (s == 0 || m.is_live(Kind::Stream, s));
            let captured = m.capture_of(s).is_some();
            if op == 2 {
                let answer = call!(query_stream(dev, s as C_Stream));
                expect(m, "query_stream", answer, valid, &[C_SUCCESS, C_FAILED]);
                let _ = captured;
            } else {
                let answer = call!(synchronize_stream(dev, s as C_Stream));
                let ok: &[C_Status] = if m.may_fail(s) {
                    &[C_SUCCESS, C_ERROR]
                } else {
                    &[C_SUCCESS]
                };
                expect(m, "synchronize_stream", answer, valid, ok);
                if valid && !m.relaxed() {
                    m.synchronized(s);
                }
            }
        }
        4 => {
            let s = stream_arg(d, m)?;
            let none = d.byte()? % 8 == 0;
            let what = (d.byte()? % 8) as usize;
            let valid = dev_ok && !none && (s == 0 || m.is_live(Kind::Stream, s));
            let f: C_Callback = if none { None } else { Some(callback) };
            let answer = call!(stream_add_callback(
                dev,
                s as C_Stream,
                f,
                what as *mut c_void
            ));
            expect(m, "stream_add_callback", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS && what & CALLBACK_FAILS != 0 {
                match m.capture_of(s) {
                    Some(id) => {
                        if let Some(c) = m.captures.iter_mut().find(|c| c.id == id) {
                            c.may_fail = true;
                        }
                    }
                    None => m.taint(s),
                }
            }
            // A callback that synchronises its stream gets an error, which its stream may
            // then report too.
            if answer == C_SUCCESS && what & CALLBACK_SYNCHRONIZES != 0 {
                m.taint(s);
            }
        }
        5 => {
            let null_out = d.byte()? % 8 == 0;
            let mut out = UNWRITTEN as C_Event;
            let out_ptr = if null_out { null_mut() } else { &mut out };
            let answer = call!(create_event(dev, out_ptr));
            expect(m, "create_event", answer, dev_ok && !null_out, &[C_SUCCESS]);
            if answer == C_SUCCESS {
                assert!(!out.is_null() && out as usize != UNWRITTEN);
                Racer::offer(out as usize);
                m.events.push(EventState {
                    handle: out as usize,
                    captured: None,
                    may_fail: false,
                });
                // A new event is complete (never recorded).
                if !m.relaxed() {
                    let answer = call!(query_event(dev, out));
                    expect(m, "query_event of a new event", answer, true, &[C_SUCCESS]);
                }
            } else {
                assert_eq!(out as usize, UNWRITTEN, "create_event wrote on failure");
            }
        }
        6 => {
            // `destroy_event` names no device in the table's contract (it is not read).
            let e = d.value(m, Kind::Event)?;
            let valid = m.is_live(Kind::Event, e);
            let answer = call!(destroy_event(dev, e as C_Event));
            assert!(
                !valid || answer == C_SUCCESS,
                "destroy_event of a live event answered {answer:?}"
            );
            expect(m, "destroy_event", answer, valid, &[C_SUCCESS]);
            if valid {
                m.events.retain(|ev| ev.handle != e);
                m.bury(e);
            }
        }
        7 => {
            let s = stream_arg(d, m)?;
            let e = d.value(m, Kind::Event)?;
            let valid =
                dev_ok && (s == 0 || m.is_live(Kind::Stream, s)) && m.is_live(Kind::Event, e);
            let answer = call!(record_event(dev, s as C_Stream, e as C_Event));
            expect(m, "record_event", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS {
                let capture = m.capture_of(s);
                let may_fail = m.may_fail(s);
                if let Some(ev) = m.event(e) {
                    ev.captured = capture;
                    ev.may_fail = may_fail;
                }
            }
        }
        8 | 9 => {
            let e = d.value(m, Kind::Event)?;
            let valid = m.is_live(Kind::Event, e);
            let captured = m
                .events
                .iter()
                .any(|ev| ev.handle == e && ev.captured.is_some());
            if op == 8 {
                let answer = call!(query_event(dev, e as C_Event));
                let ok: &[C_Status] = if captured {
                    &[C_SUCCESS, C_FAILED, C_ERROR]
                } else {
                    &[C_SUCCESS, C_FAILED]
                };
                expect(m, "query_event", answer, valid, ok);
            } else {
                let answer = call!(synchronize_event(dev, e as C_Event));
                let ok: &[C_Status] = if captured {
                    &[C_SUCCESS, C_ERROR]
                } else {
                    &[C_SUCCESS]
                };
                expect(m, "synchronize_event", answer, valid, ok);
            }
        }
        10 => {
            let s = stream_arg(d, m)?;
            let e = d.value(m, Kind::Event)?;
            let valid =
                dev_ok && (s == 0 || m.is_live(Kind::Stream, s)) && m.is_live(Kind::Event, e);
            let captured = m
                .events
                .iter()
                .any(|ev| ev.handle == e && ev.captured.is_some());
            let answer = call!(stream_wait_event(dev, s as C_Stream, e as C_Event));
            let ok: &[C_Status] = if captured {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_SUCCESS]
            };
            expect(m, "stream_wait_event", answer, valid, ok);
            if answer == C_SUCCESS {
                let (capture, may_fail) = m
                    .events
                    .iter()
                    .find(|ev| ev.handle == e)
                    .map(|ev| (ev.captured, ev.may_fail))
                    .unwrap_or((None, false));
                let open = capture.filter(|id| m.captures.iter().any(|c| c.id == *id));
                if may_fail {
                    m.taint(s);
                }
                if let (Some(id), Some(st)) = (open, m.stream(s)) {
                    if st.origin.is_none() {
                        st.joined = Some(id);
                    }
                }
            }
        }
        11 => {
            let size = d.size()?;
            let null_out = d.byte()? % 8 == 0;
            let mut out = UNWRITTEN as *mut c_void;
            let out_ptr = if null_out { null_mut() } else { &mut out };
            let answer = call!(device_memory_allocate(dev, out_ptr, size));
            // A devstream buffer is allocated in the null stream's order and waited for, so
            // the answer may carry that stream's earlier failure (as `cudaMalloc` may return
            // errors of earlier asynchronous work).
            let ok = sync_answers(m, 0);
            expect(m, "device_memory_allocate", answer, dev_ok && !null_out, ok);
            if answer == C_SUCCESS {
                if size > BUDGET {
                    assert!(
                        out.is_null(),
                        "{size} bytes: more than the budget, yet granted"
                    );
                } else if !m.relaxed() {
                    assert!(!out.is_null(), "{size} bytes refused within the budget");
                }
                if !out.is_null() {
                    assert_ne!(out as usize, UNWRITTEN);
                    assert!(
                        !m.inside(out as usize, size.max(1)),
                        "an address handed out twice"
                    );
                    m.device.push((out as usize, size));
                }
            } else {
                assert_eq!(
                    out as usize, UNWRITTEN,
                    "device_memory_allocate wrote on failure"
                );
            }
        }
        12 => {
            let ptr = d.address(m, 0)?;
            let valid = dev_ok && m.is_live(Kind::Device, ptr);
            let answer = call!(device_memory_deallocate(dev, ptr as *mut c_void, 0));
            expect(m, "device_memory_deallocate", answer, valid, &[C_SUCCESS]);
            if valid {
                assert_eq!(answer, C_SUCCESS, "freeing a live allocation");
                m.device.retain(|a| a.0 != ptr);
                m.bury(ptr);
            }
        }
        13 => {
            let size = d.size()?;
            let ptr = d.address(m, size)?;
            let value = d.byte()?;
            let valid = dev_ok && (size == 0 || m.inside(ptr, size));
            let answer = call!(device_memory_set(dev, ptr as *mut c_void, value, size));
            let ok = sync_answers(m, 0);
            expect(m, "device_memory_set", answer, valid, ok);
            if valid && size != 0 && !m.relaxed() {
                m.synchronized(0);
            }
        }
        14 => {
            let size = if d.flag()? { d.index(4097)? } else { d.size()? };
            if (1 << 30..1 << 40).contains(&size) {
                // A real host's request: granted or not by the system, no finding either way
                // (and past the fuzzer's memory limit).
                return Ok(());
            }
            let mut out = UNWRITTEN as *mut c_void;
            let null_out = d.byte()? % 8 == 0;
            let out_ptr = if null_out { null_mut() } else { &mut out };
            let answer = call!(host_memory_allocate(dev, out_ptr, size));
            if size >= 1 << 40 {
                // More than any host has: refused (C_FAILED), with nothing written.
                assert_ne!(answer, C_SUCCESS, "host_memory_allocate({size}) granted");
            } else {
                expect(
                    m,
                    "host_memory_allocate",
                    answer,
                    dev_ok && !null_out,
                    &[C_SUCCESS],
                );
            }
            if answer == C_SUCCESS {
                assert!(!out.is_null() && out as usize != UNWRITTEN);
                m.host.push((out as usize, size));
            } else {
                assert_eq!(
                    out as usize, UNWRITTEN,
                    "host_memory_allocate wrote on failure"
                );
            }
        }
        15 => {
            let ptr = d.value(m, Kind::Host)?;
            let valid = m.is_live(Kind::Host, ptr);
            let answer = call!(host_memory_deallocate(dev, ptr as *mut c_void, 0));
            expect(m, "host_memory_deallocate", answer, valid, &[C_SUCCESS]);
            if valid {
                assert_eq!(answer, C_SUCCESS, "freeing a live host allocation");
                m.host.retain(|a| a.0 != ptr);
                m.bury(ptr);
            }
        }
        16..=23 => copy(d, m, op, dev, dev_ok)?,
        24 => {
            let answer = call!(synchronize_device(dev));
            let any_fail = m.null_may_fail || m.streams.iter().any(|s| s.may_fail);
            let ok: &[C_Status] = if any_fail {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_SUCCESS]
            };
            expect(m, "synchronize_device", answer, dev_ok, ok);
            if dev_ok && !m.relaxed() {
                m.null_may_fail = false;
                for s in &mut m.streams {
                    s.may_fail = false;
                }
            }
        }
        25 => {
            let s = stream_arg(d, m)?;
            let mode = match d.byte()? % 8 {
                7 => d.u.arbitrary::<c_int>()?,
                b => c_int::from(b % 3),
            };
            let free = m.capture_of(s).is_none();
            let valid = dev_ok && s != 0 && m.is_live(Kind::Stream, s) && (0..3).contains(&mode);
            let answer = call!(cuda_stream_begin_capture(dev, s as C_Stream, mode));
            let ok: &[C_Status] = if free { &[C_SUCCESS] } else { &[C_ERROR] };
            expect(m, "cuda_stream_begin_capture", answer, valid, ok);
            if answer == C_SUCCESS {
                let id = m.next_capture;
                m.next_capture += 1;
                m.captures.push(Capture {
                    id,
                    may_fail: false,
                });
                if let Some(st) = m.stream(s) {
                    st.origin = Some(id);
                    st.joined = None;
                }
            }
        }
        26 => {
            let s = stream_arg(d, m)?;
            let null_out = d.byte()? % 8 == 0;
            let mut graph = UNWRITTEN as C_CudaGraph;
            let out_ptr = if null_out { null_mut() } else { &mut graph };
            let origin = m
                .streams
                .iter()
                .find(|st| st.handle == s)
                .and_then(|st| st.origin);
            let valid = dev_ok && !null_out && m.is_live(Kind::Stream, s);
            let answer = call!(cuda_stream_end_captrue(dev, s as C_Stream, out_ptr));
            // Not capturing: refused. A capture's end may fail (an invalidated capture, a
            // stream that joined and was not joined back) and ends it all the same.
            let ok: &[C_Status] = if origin.is_some() {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_ERROR]
            };
            expect(m, "cuda_stream_end_captrue", answer, valid, ok);
            let mut may_fail = false;
            if let (true, Some(id)) = (valid, origin) {
                may_fail = m.end_capture(id);
            }
            if answer == C_SUCCESS {
                assert!(!graph.is_null() && graph as usize != UNWRITTEN);
                m.graphs.push(GraphState {
                    handle: graph as usize,
                    may_fail,
                });
            } else if !null_out {
                assert_eq!(graph as usize, UNWRITTEN, "end_capture wrote on failure");
            }
        }
        27 => {
            let s = stream_arg(d, m)?;
            let null_status = d.byte()? % 8 == 0;
            let mut status: C_StreamCaptureStatus = -7;
            let mut id: std::ffi::c_ulonglong = 7;
            let status_ptr = if null_status { null_mut() } else { &mut status };
            let valid = dev_ok && !null_status && (s == 0 || m.is_live(Kind::Stream, s));
            let answer = call!(cuda_stream_capture_info(
                dev,
                s as C_Stream,
                status_ptr,
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ));
            expect(m, "cuda_stream_capture_info", answer, valid, &[C_SUCCESS]);
            if answer != C_SUCCESS {
                assert_eq!((status, id), (-7, 7), "capture_info wrote on failure");
            } else if m.capture_of(s).is_none() && !m.relaxed() {
                assert_eq!(status, C_StreamCaptureStatusNone, "no capture open");
            }
        }
        28 => {
            let g = d.value(m, Kind::Graph)?;
            let null_exec = d.byte()? % 8 == 0;
            let null_graph = d.byte()? % 8 == 0;
            let mut graph = g as C_CudaGraph;
            let mut exec = UNWRITTEN as C_GraphExec;
            let exec_ptr = if null_exec { null_mut() } else { &mut exec };
            let graph_ptr = if null_graph { null_mut() } else { &mut graph };
            let valid = !null_exec && !null_graph && m.is_live(Kind::Graph, g);
            let answer = call!(cuda_graph_instantiate(
                exec_ptr,
                graph_ptr,
                null_mut(),
                null_mut(),
                0
            ));
            expect(m, "cuda_graph_instantiate", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS {
                assert!(!exec.is_null() && exec as usize != UNWRITTEN);
                let may_fail = m.graphs.iter().any(|gr| gr.handle == g && gr.may_fail);
                m.execs.push(GraphState {
                    handle: exec as usize,
                    may_fail,
                });
            } else {
                assert_eq!(exec as usize, UNWRITTEN, "instantiate wrote on failure");
            }
        }
        29 => {
            let x = d.value(m, Kind::Exec)?;
            let s = stream_arg(d, m)?;
            let valid =
                dev_ok && m.is_live(Kind::Exec, x) && (s == 0 || m.is_live(Kind::Stream, s));
            let answer = call!(cuda_graph_launch(dev, x as C_GraphExec, s as C_Stream));
            expect(m, "cuda_graph_launch", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS && m.execs.iter().any(|g| g.handle == x && g.may_fail) {
                match m.capture_of(s) {
                    Some(id) => {
                        if let Some(c) = m.captures.iter_mut().find(|c| c.id == id) {
                            c.may_fail = true;
                        }
                    }
                    None => m.taint(s),
                }
            }
        }
        30 => {
            let g = d.value(m, Kind::Graph)?;
            let valid = m.is_live(Kind::Graph, g);
            let answer = call!(cuda_graph_destroy(g as C_CudaGraph));
            expect(m, "cuda_graph_destroy", answer, valid, &[C_SUCCESS]);
            if valid {
                assert_eq!(answer, C_SUCCESS, "destroying a live graph");
                m.graphs.retain(|gr| gr.handle != g);
                m.bury(g);
            }
        }
        31 => {
            let x = d.value(m, Kind::Exec)?;
            let valid = m.is_live(Kind::Exec, x);
            let answer = call!(cuda_graph_exec_destroy(x as C_GraphExec));
            expect(m, "cuda_graph_exec_destroy", answer, valid, &[C_SUCCESS]);
            if valid {
                assert_eq!(answer, C_SUCCESS, "destroying a live exec");
                m.execs.retain(|gr| gr.handle != x);
                m.bury(x);
            }
        }
        32 => {
            let g = d.value(m, Kind::Graph)?;
            let mut nodes_slot: C_CudaGraphNode = null_mut();
            let nodes = if d.byte()? % 4 == 0 {
                &mut nodes_slot as *mut C_CudaGraphNode
            } else {
                null_mut()
            };
            let null_count = d.byte()? % 8 == 0;
            let mut count = 77usize;
            let count_ptr = if null_count { null_mut() } else { &mut count };
            let valid = m.is_live(Kind::Graph, g) && nodes.is_null() && !null_count;
            let answer = call!(cuda_graph_get_nodes(g as C_CudaGraph, nodes, count_ptr));
            expect(m, "cuda_graph_get_nodes", answer, valid, &[C_SUCCESS]);
            if answer != C_SUCCESS {
                assert_eq!(count, 77, "get_nodes wrote on failure");
            }
        }
        33 => {
            let g = d.value(m, Kind::Graph)?;
            let null_hooks = d.byte()? % 8 == 0;
            let mut hooks = C_GraphHookManager {
                size: 77,
                hooks: null_mut(),
                user_data: null_mut(),
            };
            let hooks_ptr = if null_hooks { null_mut() } else { &mut hooks };
            let valid = m.is_live(Kind::Graph, g) && !null_hooks;
            let answer = call!(get_parameter_setter_for_exec_graph(
                g as C_CudaGraph,
                hooks_ptr
            ));
            expect(
                m,
                "get_parameter_setter_for_exec_graph",
                answer,
                valid,
                &[C_SUCCESS],
            );
            if answer != C_SUCCESS {
                assert_eq!(hooks.size, 77, "get_parameter_setter wrote on failure");
            }
        }
        34 => device_info(d, m, dev, dev_ok)?,
        35 => init_plugin_again(d)?,
        _ => {
            let seed = d.u.arbitrary::<u64>()?;
            m.racer.get_or_insert_with(|| Racer::start(seed));
        }
    }
    Ok(())
}

/// A stream argument: the null stream sometimes, else [`Draw::value`].
fn stream_arg(d: &mut Draw<'_, '_>, m: &Model) -> Drawn<usize> {
    d.value(m, Kind::Stream)
}

/// What a call that synchronises `stream` answers when valid.
fn sync_answers(m: &Model, stream: usize) -> &'static [C_Status] {
    if m.may_fail(stream) {
        &[C_SUCCESS, C_ERROR]
    } else {
        &[C_SUCCESS]
    }
}

/// The copies: ops 16..=19 synchronous (h2d, d2h, d2d, p2p), 20..=23 asynchronous.
fn copy(d: &mut Draw<'_, '_>, m: &mut Model, op: u8, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    let size = d.size()?;
    let asynchronous = op >= 20;
    let stream = if asynchronous { stream_arg(d, m)? } else { 0 };
    let stream_ok = stream == 0 || m.is_live(Kind::Stream, stream);
    let mut second_slot = C_Device_st { id: 0 };
    let (answer, valid, name) = match op % 4 {
        0 => {
            let dst = d.address(m, size)?;
            let src = d.host_pointer(size)?;
            let valid =
                dev_ok && stream_ok && (size == 0 || (m.inside(dst, size) && src.is_some()));
            if valid && size > ARENA {
                return Ok(());
            }
            let src = src.unwrap_or(0) as *const c_void;
            let answer = if asynchronous {
                call!(async_memory_copy_h2d(
                    dev,
                    stream as C_Stream,
                    dst as *mut c_void,
                    src,
                    size
                ))
            } else {
                call!(memory_copy_h2d(dev, dst as *mut c_void, src, size))
            };
            (answer, valid, "memory_copy_h2d")
        }
        1 => {
            let src = d.address(m, size)?;
            let dst = d.host_pointer(size)?;
            let valid =
                dev_ok && stream_ok && (size == 0 || (m.inside(src, size) && dst.is_some()));
            if valid && size > ARENA {
                return Ok(());
            }
            let dst = dst.unwrap_or(0) as *mut c_void;
            let answer = if asynchronous {
                call!(async_memory_copy_d2h(
                    dev,
                    stream as C_Stream,
                    dst,
                    src as *const c_void,
                    size
                ))
            } else {
                call!(memory_copy_d2h(dev, dst, src as *const c_void, size))
            };
            (answer, valid, "memory_copy_d2h")
        }
        2 => {
            let dst = d.address(m, size)?;
            let src = d.address(m, size)?;
            let valid =
                dev_ok && stream_ok && (size == 0 || (m.inside(dst, size) && m.inside(src, size)));
            let (dst, src) = (dst as *mut c_void, src as *const c_void);
            let answer = if asynchronous {
                call!(async_memory_copy_d2d(
                    dev,
                    stream as C_Stream,
                    dst,
                    src,
                    size
                ))
            } else {
                call!(memory_copy_d2d(dev, dst, src, size))
            };
            (answer, valid, "memory_copy_d2d")
        }
        _ => {
            let (src_dev, src_ok) = d.device(&mut second_slot)?;
            let dst = d.address(m, size)?;
            let src = d.address(m, size)?;
            let valid = dev_ok
                && src_ok
                && stream_ok
                && (size == 0 || (m.inside(dst, size) && m.inside(src, size)));
            let (dst, src) = (dst as *mut c_void, src as *const c_void);
            let answer = if asynchronous {
                call!(async_memory_copy_p2p(
                    dev,
                    src_dev,
                    stream as C_Stream,
                    dst,
                    src,
                    size
                ))
            } else {
                call!(memory_copy_p2p(dev, src_dev, dst, src, size))
            };
            (answer, valid, "memory_copy_p2p")
        }
    };
    let name = if asynchronous {
        format!("async_{name}")
    } else {
        name.to_string()
    };
    let ok = if asynchronous {
        &[C_SUCCESS][..]
    } else {
        sync_answers(m, 0)
    };
    expect(m, &name, answer, valid, ok);
    if valid && !asynchronous && size != 0 && !m.relaxed() {
        m.synchronized(0);
    }
    Ok(())
}

/// The device-management and size queries.
fn device_info(d: &mut Draw<'_, '_>, m: &Model, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    let mut out = UNWRITTEN;
    let null_out = d.byte()? % 8 == 0;
    let out_ptr: *mut usize = if null_out { null_mut() } else { &mut out };
    let (name, answer, valid) = match d.byte()? % 14 {
        0 => ("initialize", call!(initialize()), true),
        1 => ("finalize", call!(finalize()), true),
        2 => ("init_device", call!(init_device(dev)), dev_ok),
        3 => ("deinit_device", call!(deinit_device(dev)), dev_ok),
        4 => ("set_device", call!(set_device(dev)), dev_ok),
        5 => {
            let mut got = C_Device_st { id: -9 };
            let ptr = if null_out { null_mut() } else { &mut got };
            let answer = call!(get_device(ptr));
            if answer == C_SUCCESS {
                assert_eq!(got.id, 0, "one device");
            }
            ("get_device", answer, !null_out)
        }
        6 => {
            let answer = call!(get_device_count(out_ptr));
            if answer == C_SUCCESS {
                assert_eq!(out, 1, "one device");
            }
            ("get_device_count", answer, !null_out)
        }
        7 => {
            let mut list = [UNWRITTEN; 2];
            let ptr = if null_out {
                null_mut()
            } else {
                list.as_mut_ptr()
            };
            let answer = call!(get_device_list(ptr));
            if answer == C_SUCCESS {
                assert_eq!(list, [0, UNWRITTEN], "one device, listed once");
            }
            ("get_device_list", answer, !null_out)
        }
        8 => {
            let mut free = UNWRITTEN;
            let answer = call!(device_memory_stats(dev, out_ptr, &mut free));
            if answer == C_SUCCESS {
                assert!(free <= out, "free {free} of {out}");
            }
            ("device_memory_stats", answer, dev_ok && !null_out)
        }
        9 => (
            "device_min_chunk_size",
            call!(device_min_chunk_size(dev, out_ptr)),
            dev_ok && !null_out,
        ),
        10 => (
            "device_max_chunk_size",
            call!(device_max_chunk_size(dev, out_ptr)),
            dev_ok && !null_out,
        ),
        11 => (
            "device_max_alloc_size",
            call!(device_max_alloc_size(dev, out_ptr)),
            dev_ok && !null_out,
        ),
        12 => (
            "device_extra_padding_size",
            call!(device_extra_padding_size(dev, out_ptr)),
            dev_ok && !null_out,
        ),
        _ => (
            "device_realloc_size",
            call!(device_realloc_size(dev, out_ptr)),
            dev_ok && !null_out,
        ),
    };
    expect(m, name, answer, valid, &[C_SUCCESS]);
    if answer != C_SUCCESS {
        assert_eq!(out, UNWRITTEN, "{name} wrote on failure");
    }
    Ok(())
}

/// `InitPlugin` called again with arbitrary announced sizes, in buffers of exactly those sizes
/// (at least the words read at offsets 0 and 8): the type is registered already, so nothing
/// is written; a write past an announced size is a heap overflow the sanitizer reports.
fn init_plugin_again(d: &mut Draw<'_, '_>) -> Drawn<()> {
    let params_size: usize = [0, 16, 56, 88, 96, 97, 4096][d.index(7)?];
    let table_size: usize = [8, 16, 912, 920, 976, 1032, 1128, 1129][d.index(8)?];
    // Words, so that the structs the plug-in reads are aligned.
    let mut params = vec![0u64; params_size.max(16).div_ceil(8)];
    let mut table = vec![0u64; table_size.div_ceil(8)];
    table[0] = table_size as u64;
    let interface = if d.flag()? {
        table.as_mut_ptr()
    } else {
        null_mut()
    };
    params[0] = params_size as u64;
    params[1] = interface as u64;
    let before = (params.clone(), table.clone());
    // SAFETY: both buffers hold at least the sizes announced (and the words at 0 and 8).
    unsafe { devstream_paddle::InitPlugin(params.as_mut_ptr().cast()) };
    assert!(
        before == (params, table),
        "InitPlugin wrote after its type was registered"
    );
    Ok(())
}

/// Ends every capture, synchronises and destroys everything, and checks that nothing is live.
fn clean_up(m: &mut Model) {
    if let Some(racer) = m.racer.take() {
        racer.stop();
    }
    Racer::forget();
    let mut dev = C_Device_st { id: 0 };
    let dev: C_Device = &mut dev;
    let origins: Vec<(usize, u64)> = m
        .streams
        .iter()
        .filter_map(|s| s.origin.map(|id| (s.handle, id)))
        .collect();
    for (s, id) in origins {
        let mut graph = null_mut();
        let answer = call!(cuda_stream_end_captrue(dev, s as C_Stream, &mut graph));
        let may_fail = m.end_capture(id);
        if answer == C_SUCCESS {
            m.graphs.push(GraphState {
                handle: graph as usize,
                may_fail,
            });
        } else {
            assert_eq!(answer, C_ERROR, "end_capture answered {answer:?}");
        }
    }
    assert!(m.captures.is_empty(), "a capture left open");
    for x in std::mem::take(&mut m.execs) {
        assert_eq!(
            call!(cuda_graph_exec_destroy(x.handle as C_GraphExec)),
            C_SUCCESS
        );
    }
    for g in std::mem::take(&mut m.graphs) {
        assert_eq!(
            call!(cuda_graph_destroy(g.handle as C_CudaGraph)),
            C_SUCCESS
        );
    }
    let handles: Vec<usize> = m.streams.iter().map(|s| s.handle).chain([0]).collect();
    for s in handles {
        let answer = call!(synchronize_stream(dev, s as C_Stream));
        let ok = sync_answers(m, s);
        assert!(
            ok.contains(&answer),
            "synchronize_stream at the end answered {answer:?}"
        );
    }
    for e in std::mem::take(&mut m.events) {
        assert_eq!(call!(destroy_event(dev, e.handle as C_Event)), C_SUCCESS);
    }
    for s in std::mem::take(&mut m.streams) {
        assert_eq!(call!(destroy_stream(dev, s.handle as C_Stream)), C_SUCCESS);
    }
    for (ptr, _) in std::mem::take(&mut m.device) {
        assert_eq!(
            call!(device_memory_deallocate(dev, ptr as *mut c_void, 0)),
            C_SUCCESS
        );
    }
    for (ptr, _) in std::mem::take(&mut m.host) {
        assert_eq!(
            call!(host_memory_deallocate(dev, ptr as *mut c_void, 0)),
            C_SUCCESS
        );
    }
    let mut live = [usize::MAX; 6];
    // SAFETY: room for six counts.
    assert!(unsafe { devstream_paddle::devstream_paddle_live(0, live.as_mut_ptr()) });
    assert_eq!(
        live, [0; 6],
        "live streams, events, device and host allocations, graphs, execs after clean-up"
    );
}

fuzz_target!(|data: &[u8]| run(data));
