//! One fuzz iteration: load (or reuse) the plug-in copy the input's first bytes describe, set the
//! plug-in's behaviour for this iteration, run the input's program of devstream operations
//! through the public API, then tear down and check the invariants.
//!
//! * **No crash, no sanitizer report:** any panic outside the deliberate ones (host functions the
//!   program makes panic) aborts (the panic hook), and libFuzzer keeps the input.
//! * **No hang:** a watchdog thread aborts when one operation (or the teardown) takes longer than
//!   [`WATCHDOG`]. Flags are user data: a program may wait on a flag it never sets, so a helper
//!   sets every flag to the highest value waited for whenever the main thread has been blocked
//!   in one operation for [`RELEASE_AFTER`] (as another thread of a real program would), and
//!   during the teardown until the work that may wait for them is done (the default streams,
//!   which outlive the input, included); a hang past that is devstream's.
//! * **No call on an object of another kind:** checked by the plug-in on every call.
//! * **Live counts back to zero:** devstream's live streams and events once everything is
//!   dropped; on a clean run (nothing misbehaved) also the plug-in's streams, events, graphs and
//!   memory (what devstream must release once the work is done).

use crate::load;
use crate::plugin::{
    self, delivery, optional, Accept, Behaviour, Config, DeviceTypeName, Devices, InitDevice,
    Instance,
};
use devstream_core::{
    Capabilities, CaptureMode, CaptureSupport, Completion, DeviceBackend, DeviceEvent, DeviceFlag,
    DeviceGraph, DeviceStream, EventFlags, HostBuffer, Place, StreamOptions,
};
use devstream_plugin::{
    PluginBackend, PluginEvent, PluginFlag, PluginGraph, PluginHostBuffer, PluginStream,
};
use libfuzzer_sys::arbitrary::Unstructured;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

/// One operation (or the teardown) taking longer than this is a hang.
const WATCHDOG: Duration = Duration::from_secs(45);
/// The main thread blocked this long in one operation: every flag is set to the highest value
/// waited for.
const RELEASE_AFTER: Duration = Duration::from_millis(100);
/// How long the teardown waits for devstream (and, on a clean run, the plug-in) to release
/// everything.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(15);
/// At most this many operations per input.
const MAX_OPS: usize = 96;
/// Objects of each kind the program keeps at most.
const MAX_OBJECTS: usize = 6;

/// The message of every deliberate panic (the panic hook lets these unwind).
const DELIBERATE: &str = "fuzz-deliberate";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the main thread is doing, for the watchdog.
struct Progress {
    op: Option<(String, Instant)>,
    log: Vec<String>,
}

static PROGRESS: Mutex<Progress> = Mutex::new(Progress {
    op: None,
    log: Vec::new(),
});

/// Flags with the highest value waited for.
static FLAGS: Mutex<Vec<(PluginFlag, u32)>> = Mutex::new(Vec::new());

/// What a re-entering plug-in call may use.
#[derive(Default, Clone)]
struct Targets {
    streams: Vec<PluginStream>,
    events: Vec<PluginEvent>,
    flags: Vec<PluginFlag>,
    place: Option<Place>,
    nonblocking_query: bool,
}

static TARGETS: Mutex<Option<Targets>> = Mutex::new(None);

fn setup() {
    static SETUP: Once = Once::new();
    SETUP.call_once(|| {
        // No discovery: the fuzz target loads its own copies only.
        std::env::set_var(devstream_plugin::discovery::DEVSTREAM_PLUGIN_PATH, "");
        std::env::remove_var(devstream_plugin::discovery::CUSTOM_DEVICE_ROOT);
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if message.starts_with(DELIBERATE) || info.payload().is::<DropPanics>() {
                return;
            }
            default_hook(info);
            eprintln!("==== devstream-plugin fuzz: a panic (operations so far below)");
            print_log();
            std::process::abort();
        }));
        plugin::set_reentry_hook(reenter);
        plugin::set_diagnostics(|| {
            print_log();
            print_threads();
        });
        std::thread::Builder::new()
            .name("fuzz watchdog".into())
            .spawn(watch)
            .expect("cannot start the watchdog");
    });
}

/// `DEVSTREAM_FUZZ_TRACE=1`: every input's operations are printed when the next one starts,
/// each with its answer, and the plug-in's misbehaviours and re-entries among them.
pub(crate) fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("DEVSTREAM_FUZZ_TRACE").is_some_and(|v| v == "1"))
}

fn print_log() {
    if let Ok(progress) = PROGRESS.try_lock() {
        for line in &progress.log {
            eprintln!("  {line}");
        }
        if let Some((op, since)) = &progress.op {
            eprintln!("  running: {op} for {:?}", since.elapsed());
        }
    }
}

fn watch() {
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let running = lock(&PROGRESS)
            .op
            .as_ref()
            .map(|(op, since)| (op.clone(), since.elapsed()));
        let Some((op, elapsed)) = running else {
            continue;
        };
        if elapsed > RELEASE_AFTER {
            release_flags();
        }
        if elapsed > WATCHDOG {
            eprintln!("==== devstream-plugin fuzz: HANG: {op} for {elapsed:?}");
            print_log();
            print_threads();
            std::process::abort();
        }
    }
}

/// `DEVSTREAM_FUZZ_GDB=1`: a hang prints every thread's stack (gdb attaches to the process).
fn print_threads() {
    if std::env::var_os("DEVSTREAM_FUZZ_GDB").is_none_or(|v| v != "1") {
        return;
    }
    let pid = std::process::id().to_string();
    // gdb writes straight to this process's output: a pipe read by this thread would fill while
    // gdb holds the thread stopped.
    let stacks = std::process::Command::new("gdb")
        .args(["-p", &pid, "-batch", "-ex", "thread apply all bt 40"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::inherit())
        .status();
    if let Err(error) = stacks {
        eprintln!("cannot run gdb: {error}");
    }
}

fn release_flags() {
    for (flag, value) in lock(&FLAGS).iter() {
        if flag.get() < *value {
            flag.set(*value);
        }
    }
}

fn note_wait(flag: &PluginFlag, value: u32) {
    let mut flags = lock(&FLAGS);
    match flags.iter_mut().find(|(f, _)| f.id() == flag.id()) {
        Some((_, highest)) => *highest = (*highest).max(value),
        None => flags.push((flag.clone(), value)),
    }
}

/// Adds `line` to the operations printed after a finding (only while [`trace`] is on: the
/// plug-in notes what it does inside the operations).
pub(crate) fn note(line: impl FnOnce() -> String) {
    if trace() {
        let line = line();
        lock(&PROGRESS).log.push(format!("    {line}"));
    }
}

/// Runs `body` as the operation `name` (watched); with [`trace`] on, its answer is noted.
fn step<T: std::fmt::Debug>(name: impl Into<String>, body: impl FnOnce() -> T) -> T {
    let name = name.into();
    {
        let mut progress = lock(&PROGRESS);
        progress.log.push(name.clone());
        progress.op = Some((name, Instant::now()));
    }
    let out = body();
    lock(&PROGRESS).op = None;
    note(|| {
        let mut answer = format!("-> {out:?}");
        answer.truncate(200);
        answer
    });
    out
}

/// The fuzz target.
pub fn run(data: &[u8]) {
    setup();
    {
        let mut progress = lock(&PROGRESS);
        if trace() && !progress.log.is_empty() {
            // What the previous input did (a finding may depend on what ran before it).
            eprintln!("---- previous input:\n  {}", progress.log.join("\n  "));
        }
        progress.log.clear();
    }
    let mut u = Unstructured::new(data);
    let config = decode_config(&mut u);
    let loaded = load::load(config);
    let Ok(info) = loaded.result.clone() else {
        return;
    };
    if info.places.is_empty() {
        return;
    }
    let behaviour = decode_behaviour(&mut u);
    lock(&PROGRESS).log.push(format!(
        "plug-in {} ({:?}), {behaviour:?}",
        info.device_type, loaded.instance.config
    ));
    loaded.instance.set_behaviour(behaviour);
    let mut world = World::new(loaded.instance, info.places, info.capabilities, behaviour);
    let mut ops = 0;
    while !u.is_empty() && ops < MAX_OPS {
        world.apply(&mut u);
        world.publish();
        ops += 1;
    }
    step("teardown", || world.teardown());
    loaded.instance.set_behaviour(Behaviour::default());
}

fn byte(u: &mut Unstructured<'_>) -> u8 {
    u.arbitrary().unwrap_or(0)
}

/// Every plug-in config an input can name: a fixed list (fewer than the instances a process
/// may load), so that an input means the same plug-in whatever ran before it in the process.
fn configs() -> &'static [Config] {
    static CONFIGS: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS.get_or_init(|| {
        use optional::*;
        let mut out = Vec::new();
        // Working plug-ins: every entry, or every entry but some (each fallback path).
        let masks = [
            ALL,
            ALL & !QUERY_STREAM,
            ALL & !QUERY_EVENT,
            ALL & !(QUERY_STREAM | QUERY_EVENT),
            ALL & !CALLBACK,
            ALL & !SYNC_STREAM,
            ALL & !WAIT_EVENT,
            ALL & !ASYNC_COPY,
            ALL & !SYNC_COPY,
            ALL & !HOST_MEMORY,
            ALL & !STREAMS,
            ALL & !CAPTURE,
            ALL & !INIT,
            ALL & !(CALLBACK | CAPTURE),
            // Like Paddle's own custom_cpu: null streams, no queries, callbacks or
            // stream synchronization, synchronous copies only.
            INIT | SYNC_COPY | WAIT_EVENT,
            SYNC_COPY,
        ];
        out.extend(masks.iter().map(|&mask| Config::working(mask)));
        let last = devstream_paddle_sys::KNOWN_LAYOUTS.len() - 1;
        for accept in [
            Accept::Neither,
            Accept::Pair(last),
            Accept::ParamsOnly(last),
            Accept::Paddle(0),
            Accept::Paddle(2),
        ] {
            out.push(Config {
                accept,
                ..Config::working(ALL)
            });
        }
        out.push(Config {
            devices: Devices::List(2),
            ..Config::working(ALL)
        });
        out.push(Config {
            init_device: InitDevice::Rewrite,
            sub_device_type: true,
            version: (0, 1, 7),
            ..Config::working(ALL)
        });
        out.push(Config {
            devices: Devices::List(2),
            init_device: InitDevice::Rewrite,
            ..Config::working(ALL & !(QUERY_STREAM | QUERY_EVENT))
        });
        // Plug-ins that fail to load, one way each.
        let broken = Config::working(ALL);
        out.extend([
            Config {
                accept: Accept::Refuse,
                ..broken
            },
            Config {
                accept: Accept::WriteThenRefuse,
                ..broken
            },
            Config {
                version: (0, 1, 0),
                ..broken
            },
            Config {
                version: (1, 0, 0),
                ..broken
            },
            Config {
                version: (0, 0, 0),
                ..broken
            },
            Config {
                version: (usize::MAX, 1, 1),
                ..broken
            },
            Config {
                name: DeviceTypeName::Null,
                ..broken
            },
            Config {
                name: DeviceTypeName::Invalid,
                ..broken
            },
            Config {
                name: DeviceTypeName::NotUtf8,
                ..broken
            },
            Config {
                beyond: true,
                ..broken
            },
            Config {
                replace_interface: true,
                ..broken
            },
            Config {
                params_beyond: true,
                ..broken
            },
            Config {
                initialize_fails: true,
                ..broken
            },
            Config {
                init_device: InitDevice::Fails,
                ..broken
            },
        ]);
        out.extend((0..10).map(|i| Config {
            missing_required: Some(i),
            ..broken
        }));
        out.extend(
            [
                Devices::CountFails,
                Devices::ListFails,
                Devices::Huge,
                Devices::Duplicate,
                Devices::BeyondCInt,
                Devices::WritesMore,
                Devices::List(0),
            ]
            .map(|devices| Config { devices, ..broken }),
        );
        assert!(out.len() <= plugin::MAX_INSTANCES);
        out
    })
}

fn decode_config(u: &mut Unstructured<'_>) -> Config {
    let configs = configs();
    // Mostly the plug-in with every entry.
    match byte(u) {
        0..=127 => configs[0],
        b => configs[usize::from(b) % configs.len()],
    }
}

/// `bytes` bytes of the input as a little-endian number (missing bytes are zero).
fn little_endian(u: &mut Unstructured<'_>, bytes: u32) -> u64 {
    (0..bytes).fold(0, |n, i| n | u64::from(byte(u)) << (8 * i))
}

fn decode_behaviour(u: &mut Unstructured<'_>) -> Behaviour {
    let seed = little_endian(u, 8);
    let mode = byte(u);
    if mode < 48 {
        return Behaviour {
            seed,
            ..Behaviour::default()
        };
    }
    let rate = byte(u);
    let calls = little_endian(u, 4) as u32;
    let odd_deliveries = byte(u);
    let deliveries = byte(u) & 0x1f;
    let reenter = byte(u);
    Behaviour {
        seed,
        rate: if mode & 1 == 0 { rate / 4 } else { rate },
        calls,
        odd_deliveries,
        deliveries: if mode & 2 == 0 {
            deliveries & !delivery::TWICE
        } else {
            deliveries
        },
        reenter: if mode & 4 == 0 { 0 } else { reenter / 2 },
    }
}

/// The re-entry hook: a non-blocking devstream call from inside a plug-in call.
fn reenter(draw: u32) {
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
struct DropPanics;

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
fn published_stream(index: usize) -> Option<PluginStream> {
    lock(&TARGETS)
        .as_ref()
        .and_then(|t| t.streams.get(index).cloned())
}

/// What a host function does (streams by their index in the program's list).
enum HostAction {
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
}

/// Held by the one host function that may block at a time (see [`HostAction::run`]).
static BLOCKING_HOST_FN: Mutex<()> = Mutex::new(());

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
    fn run(&self) {
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
        }
    }

    fn name(&self) -> &'static str {
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
        }
    }
}

/// What `synchronize` of a new stream answers on every place loaded so far (a capture devstream
/// still counts as in progress shows there).
fn synchronize_everywhere() -> String {
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
static DEFAULT_PLACES: Mutex<Vec<Place>> = Mutex::new(Vec::new());

struct World {
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

use devstream_plugin::PluginBuffer;

impl World {
    fn new(
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
    fn publish(&self) {
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
        let choice = byte(u) % 14;
        let or_nothing = |action: Option<HostAction>| action.unwrap_or(HostAction::Nothing);
        match choice {
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

    fn apply(&mut self, u: &mut Unstructured<'_>) {
        let op = byte(u) % 36;
        match op {
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

    fn teardown(&mut self) {
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
