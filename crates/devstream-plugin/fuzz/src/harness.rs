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
//!   which outlive the input, included). Callbacks the plug-in holds as "never" are run then
//!   too: work that waits for a host function the plug-in does not run (a host function given a
//!   buffer waits for the one given it before) cannot end before it, whatever devstream does.
//!   A hang past that is devstream's.
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

mod decode;
mod host_fn;
mod watch;
mod world;

use decode::*;
use host_fn::*;
pub(crate) use watch::*;
use world::*;

/// One operation (or the teardown) taking longer than this is a hang.
const WATCHDOG: Duration = Duration::from_secs(45);
/// The main thread blocked this long in one operation: every flag is set to the highest value
/// waited for, and the callbacks the plug-in holds as "never" are run.
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

/// The plug-in copy of the running iteration, whose callbacks held as "never" the watchdog
/// runs when the main thread blocks.
static CURRENT: Mutex<Option<&'static plugin::Instance>> = Mutex::new(None);

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
            eprintln!("  {}", devstream_plugin::capture_diagnostics());
            if let Some(instance) = *lock(&CURRENT) {
                eprintln!("  plug-in queues:\n  {}", instance.describe_queues());
            }
            print_threads();
        });
        std::thread::Builder::new()
            .name("fuzz watchdog".into())
            .spawn(watch)
            .expect("cannot start the watchdog");
    });
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
    *lock(&CURRENT) = Some(loaded.instance);
    let mut world = World::new(loaded.instance, info.places, info.capabilities, behaviour);
    let mut ops = 0;
    while !u.is_empty() && ops < MAX_OPS {
        world.apply(&mut u);
        world.publish();
        ops += 1;
    }
    step("teardown", || world.teardown());
    *lock(&CURRENT) = None;
    loaded.instance.set_behaviour(Behaviour::default());
}

fn byte(u: &mut Unstructured<'_>) -> u8 {
    u.arbitrary().unwrap_or(0)
}
