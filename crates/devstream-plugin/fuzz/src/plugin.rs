//! The misbehaving plug-in: a Paddle custom-device table (`device_ext.h`, declared in
//! `devstream_plugin::sys`) whose functions live in the fuzz binary (instrumented, under the
//! sanitizer) and misbehave as the current [`Behaviour`] says.
//!
//! * **One instance per loaded copy.** Each copy of the shim library devstream loads is an
//!   [`Instance`] with its load [`Config`]; its table holds `f::<N>` (the instance's number as a
//!   const parameter), so every call knows its instance without a global "current" one.
//! * **A real asynchronous runtime.** A stream is a queue of tasks run in order by a pool thread;
//!   an event marks a point of a stream (`recorded`/`done` generations); device memory is heap
//!   memory whose address is the device pointer; captures record nodes (copies, callbacks,
//!   waits) that every launch of the graph replays, as CUDA's stream capture does.
//! * **Misbehaviour.** Each call draws from the behaviour (seeded by the fuzz input; one counter
//!   per function, so a draw does not depend on other threads' calls): fail with a status (having
//!   done the work or not), leave an out-parameter unwritten, write null, garbage, a duplicate of
//!   a live handle or a handle of another kind; run a callback inline, late (on another thread,
//!   out of stream order), twice, or never (held until the end of the iteration); queue it and
//!   answer an error; re-enter devstream (through a hook the harness installs) before the call.
//!   A completion is never claimed falsely (a query or synchronize that answers success is
//!   true): no host can defend against that.
//! * **Checks.** Every handle devstream passes must be one this instance gave out as that kind
//!   (and not destroyed more often than given out), every device pointer must lie in memory it
//!   gave out and that is still live, and out-parameters must arrive zeroed. A violation aborts
//!   with a message (libFuzzer then keeps the input).

use crate::pool;
use devstream_plugin::sys::*;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::{c_char, c_ulonglong, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// How many copies (instances) one process may load.
pub const MAX_INSTANCES: usize = 96;

/// Device memory larger than this is refused with `C_FAILED` (resource exhausted).
const MAX_ALLOCATION: usize = 1 << 20;

/// Freed ranges an instance keeps (see [`Freed`]): at most this many, of at most
/// [`QUARANTINE_BYTES`] in all; the oldest go first.
const QUARANTINE_RANGES: usize = 256;
/// See [`QUARANTINE_RANGES`].
const QUARANTINE_BYTES: usize = 16 << 20;

/// Optional table entries ([`Config::optional`]).
pub mod optional {
    /// `initialize`, `finalize`, `init_device`, `deinit_device`.
    pub const INIT: u16 = 1 << 0;
    /// `create_stream`, `destroy_stream`.
    pub const STREAMS: u16 = 1 << 1;
    /// `query_stream`.
    pub const QUERY_STREAM: u16 = 1 << 2;
    /// `query_event`.
    pub const QUERY_EVENT: u16 = 1 << 3;
    /// `stream_add_callback`.
    pub const CALLBACK: u16 = 1 << 4;
    /// `synchronize_stream` (and `synchronize_device`).
    pub const SYNC_STREAM: u16 = 1 << 5;
    /// `stream_wait_event`.
    pub const WAIT_EVENT: u16 = 1 << 6;
    /// `async_memory_copy_*`.
    pub const ASYNC_COPY: u16 = 1 << 7;
    /// `memory_copy_*`.
    pub const SYNC_COPY: u16 = 1 << 8;
    /// `host_memory_allocate`, `host_memory_deallocate`.
    pub const HOST_MEMORY: u16 = 1 << 9;
    /// The graph-capture functions (read by devstream from a 3.3 table only).
    pub const CAPTURE: u16 = 1 << 10;
    /// Every optional entry.
    pub const ALL: u16 = (1 << 11) - 1;
}

/// Which offers `InitPlugin` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accept {
    /// Writes nothing, ever.
    Refuse,
    /// Writes the device type but no version (a refusal with effects).
    WriteThenRefuse,
    /// Checks no size: fills the 3.3 table whatever is offered.
    Neither,
    /// Paddle's own check for `KNOWN_LAYOUTS[i]`: either size matches.
    Paddle(usize),
    /// Both sizes must be `KNOWN_LAYOUTS[i]`'s.
    Pair(usize),
    /// Only the params size of `KNOWN_LAYOUTS[i]` is checked.
    ParamsOnly(usize),
}

/// What `InitPlugin` writes as the device type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceTypeName {
    /// `fuzz<N>`.
    Valid,
    /// A null pointer.
    Null,
    /// `"not a type"`.
    Invalid,
    /// Bytes that are not UTF-8.
    NotUtf8,
}

/// What `get_device_count` / `get_device_list` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Devices {
    /// `n` devices, ids 0, 1, ...
    List(u8),
    /// `get_device_count` fails.
    CountFails,
    /// `get_device_list` fails.
    ListFails,
    /// 2^40 devices.
    Huge,
    /// Device 0 twice.
    Duplicate,
    /// An id beyond C `int`.
    BeyondCInt,
    /// One device, but eight more entries written than reported.
    WritesMore,
}

/// What `init_device` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InitDevice {
    /// Keeps the id.
    Keep,
    /// Replaces the id with a "physical" one (id + 1000).
    Rewrite,
    /// Fails.
    Fails,
}

/// What a plug-in copy is, as far as loading goes (fixed for its life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Which offers it accepts.
    pub accept: Accept,
    /// The runtime version it reports.
    pub version: (usize, usize, usize),
    /// Its device type.
    pub name: DeviceTypeName,
    /// Whether it names a sub-device type.
    pub sub_device_type: bool,
    /// Optional entries it fills ([`optional`]).
    pub optional: u16,
    /// A required entry it leaves null (index into `REQUIRED` order).
    pub missing_required: Option<u8>,
    /// Writes a byte past the table it accepted.
    pub beyond: bool,
    /// Replaces `params->interface` with a table of its own.
    pub replace_interface: bool,
    /// Writes a byte past the params struct.
    pub params_beyond: bool,
    /// Its devices.
    pub devices: Devices,
    /// `initialize` fails.
    pub initialize_fails: bool,
    /// What `init_device` does.
    pub init_device: InitDevice,
}

impl Config {
    /// A plug-in that loads: Paddle 3.3's check, version 0.1.1, one device, every entry.
    pub fn working(optional: u16) -> Config {
        Config {
            accept: Accept::Paddle(KNOWN_LAYOUTS.len() - 1),
            version: (0, 1, 1),
            name: DeviceTypeName::Valid,
            sub_device_type: false,
            optional,
            missing_required: None,
            beyond: false,
            replace_interface: false,
            params_beyond: false,
            devices: Devices::List(1),
            initialize_fails: false,
            init_device: InitDevice::Keep,
        }
    }
}

/// The table functions, as the behaviour's draws name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Call {
    SetDevice,
    CreateStream,
    DestroyStream,
    QueryStream,
    AddCallback,
    CreateEvent,
    RecordEvent,
    DestroyEvent,
    QueryEvent,
    SynchronizeStream,
    SynchronizeEvent,
    StreamWaitEvent,
    DeviceAllocate,
    DeviceDeallocate,
    HostAllocate,
    HostDeallocate,
    Copy,
    BeginCapture,
    EndCapture,
    Instantiate,
    GraphLaunch,
    GraphDestroy,
    CaptureInfo,
    /// How a callback is delivered (not a table function).
    Delivery,
}

/// How many [`Call`]s there are.
pub const CALLS: usize = Call::Delivery as usize + 1;

/// Odd callback deliveries ([`Behaviour::deliveries`]).
pub mod delivery {
    /// Run inside `stream_add_callback` (answering success, `C_WARNING` or an error).
    pub const INLINE: u8 = 1 << 0;
    /// Run on another thread, out of stream order.
    pub const LATE: u8 = 1 << 1;
    /// Run twice.
    pub const TWICE: u8 = 1 << 2;
    /// Never run during the iteration (run when it ends).
    pub const NEVER: u8 = 1 << 3;
    /// Queued in order, but `stream_add_callback` answers an error.
    pub const QUEUED_ERROR: u8 = 1 << 4;
}

/// How the plug-in behaves during one iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Behaviour {
    /// Seeds every draw.
    pub seed: u64,
    /// Chance (out of 256) that a call of a family in `calls` misbehaves.
    pub rate: u8,
    /// Which [`Call`] families may misbehave (bit `Call as u8`).
    pub calls: u32,
    /// Chance (out of 256) that a callback is delivered oddly.
    pub odd_deliveries: u8,
    /// Which odd deliveries ([`delivery`]).
    pub deliveries: u8,
    /// Chance (out of 256) that a call re-enters devstream before it does its work.
    pub reenter: u8,
}

impl Behaviour {
    /// Whether nothing misbehaves.
    pub fn is_clean(&self) -> bool {
        (self.rate == 0 || self.calls == 0) && (self.odd_deliveries == 0 || self.deliveries == 0)
    }
}

/// What the harness runs when a call re-enters devstream (`draw` chooses the operation).
pub type ReentryHook = fn(draw: u32);
static REENTRY: OnceLock<ReentryHook> = OnceLock::new();

/// Installs the re-entry hook (once per process).
pub fn set_reentry_hook(hook: ReentryHook) {
    let _ = REENTRY.set(hook);
}

thread_local! {
    static REENTERED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What the harness prints after a violation (the operations so far).
static DIAGNOSTICS: OnceLock<fn()> = OnceLock::new();

/// Installs what a violation prints after its message.
pub fn set_diagnostics(print: fn()) {
    let _ = DIAGNOSTICS.set(print);
}

/// Aborts the process with an invariant violation (libFuzzer keeps the input as a crash).
pub fn violation(message: std::fmt::Arguments<'_>) -> ! {
    eprintln!("==== devstream-plugin fuzz: INVARIANT VIOLATED: {message}");
    if let Some(print) = DIAGNOSTICS.get() {
        print();
    }
    std::process::abort()
}

macro_rules! violation {
    ($($arg:tt)*) => { $crate::plugin::violation(format_args!($($arg)*)) };
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What kind of object a handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Stream,
    Event,
    Graph,
    Exec,
    Device,
    Host,
}

type CallbackFn = unsafe extern "C" fn(C_Device, C_Stream, *mut c_void, *mut C_Status);

/// A callback devstream handed over.
#[derive(Clone, Copy)]
struct Pending {
    callback: CallbackFn,
    device: usize,
    stream: usize,
    data: usize,
}

impl Pending {
    fn call(&self) {
        let mut status = C_ERROR;
        // SAFETY: devstream's callback with the arguments it gave (the device cell outlives the
        // runtime; the data is devstream's to interpret).
        unsafe {
            (self.callback)(
                self.device as C_Device,
                self.stream as C_Stream,
                self.data as *mut c_void,
                &mut status,
            )
        };
    }
}

/// How a queued callback is delivered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Ordered,
    Late,
    Twice,
    Never,
}

/// Copy directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

/// A node of a captured graph (also a stream task).
#[derive(Clone)]
enum Node {
    Copy {
        direction: Direction,
        dst: usize,
        src: usize,
        len: usize,
    },
    Callback(Pending),
    /// Waits until the event's `done` reaches `generation` (or the event is gone).
    Wait {
        event: usize,
        generation: u64,
    },
}

enum Task {
    Node(Node),
    Callback(Pending, Delivery),
    Record { event: usize, generation: u64 },
    Launch(Arc<Vec<Node>>),
}

/// When and where an object was made (the iteration, the calling thread).
#[derive(Clone, Debug)]
struct Born {
    iteration: u64,
    thread: String,
}

impl Born {
    fn now(iteration: u64) -> Born {
        Born {
            iteration,
            thread: std::thread::current()
                .name()
                .unwrap_or("unnamed")
                .to_owned(),
        }
    }
}

struct StreamObj {
    born: Born,
    /// How many times the handle was given out and not yet destroyed.
    refs: usize,
    queue: VecDeque<Task>,
    running: bool,
    submitted: u64,
    done: u64,
    capture: Option<u64>,
    /// Destroyed while work was queued: removed once drained.
    dead: bool,
}

impl StreamObj {
    fn new(refs: usize, born: Born) -> StreamObj {
        StreamObj {
            born,
            refs,
            queue: VecDeque::new(),
            running: false,
            submitted: 0,
            done: 0,
            capture: None,
            dead: false,
        }
    }
}

struct EventObj {
    born: Born,
    refs: usize,
    recorded: u64,
    done: u64,
    /// Recorded into this capture (last).
    captured: Option<u64>,
}

struct CaptureObj {
    born: Born,
    origin: usize,
    members: Vec<usize>,
    nodes: Vec<Node>,
    invalidated: bool,
    ended: bool,
}

struct GraphObj {
    born: Born,
    refs: usize,
    nodes: Arc<Vec<Node>>,
}

struct Memory {
    born: Born,
    refs: usize,
    len: usize,
    backing: Box<[u8]>,
}

/// Plug-in-side objects alive now (for the clean-run check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PluginLive {
    /// Streams (not counting the null stream).
    pub streams: usize,
    /// Events (not counting the null event).
    pub events: usize,
    /// Captured graphs.
    pub graphs: usize,
    /// Instantiated graphs.
    pub execs: usize,
    /// Device allocations.
    pub device: usize,
    /// Host allocations.
    pub host: usize,
}

/// A range devstream freed, kept from the process's allocator while it is remembered: the
/// plug-in's memory comes from the same heap as devstream's own (its staged copies), so a range
/// given back to the heap could be handed to devstream again, and a legitimate copy from that
/// new allocation would look like a use of the freed one.
struct Freed {
    kind: Kind,
    base: usize,
    len: usize,
    _backing: Box<[u8]>,
}

struct State {
    next_handle: usize,
    streams: HashMap<usize, StreamObj>,
    events: HashMap<usize, EventObj>,
    graphs: HashMap<usize, GraphObj>,
    execs: HashMap<usize, GraphObj>,
    device: BTreeMap<usize, Memory>,
    host: BTreeMap<usize, Memory>,
    /// Recently freed device and host ranges (a later use of one is devstream's error).
    freed: VecDeque<Freed>,
    /// The bytes `freed` holds.
    freed_bytes: usize,
    /// Garbage device pointers given out: copies there are refused, not violations.
    garbage_device: bool,
    /// Handles given out and not yet destroyed, by kind and value (duplicates count).
    given: HashMap<(Kind, usize), usize>,
    captures: HashMap<u64, CaptureObj>,
    next_capture: u64,
    /// Callbacks delivered "never": run when the iteration ends.
    never: Vec<Pending>,
}

/// One loaded copy of the plug-in.
pub struct Instance {
    /// Its number (the const parameter of its table functions).
    pub n: usize,
    /// How it loads.
    pub config: Config,
    device_type: CString,
    state: Mutex<State>,
    changed: Condvar,
    behaviour: RwLock<Behaviour>,
    draws: [AtomicU64; CALLS],
    /// Counts the iterations (each [`Instance::set_behaviour`] starts one).
    iteration: AtomicU64,
}

static INSTANCES: [OnceLock<Instance>; MAX_INSTANCES] = [const { OnceLock::new() }; MAX_INSTANCES];

/// Instance `n` (which must exist).
pub fn instance(n: usize) -> &'static Instance {
    INSTANCES[n]
        .get()
        .unwrap_or_else(|| violation!("plug-in function of instance {n}, which does not exist"))
}

/// Creates instance `n` with `config`.
pub fn create_instance(n: usize, config: Config) -> &'static Instance {
    let device_type = match config.name {
        DeviceTypeName::Valid | DeviceTypeName::Null => format!("fuzz{n}"),
        DeviceTypeName::Invalid => "not a type".to_owned(),
        DeviceTypeName::NotUtf8 => "fuzz\u{7f}".to_owned(),
    };
    let mut device_type = device_type.into_bytes();
    if config.name == DeviceTypeName::NotUtf8 {
        device_type.push(0xff);
    }
    let mut streams = HashMap::new();
    streams.insert(0, StreamObj::new(usize::MAX / 2, Born::now(0)));
    let mut events = HashMap::new();
    events.insert(
        0,
        EventObj {
            born: Born::now(0),
            refs: usize::MAX / 2,
            recorded: 0,
            done: 0,
            captured: None,
        },
    );
    let instance = Instance {
        n,
        config,
        device_type: CString::new(device_type).expect("no NUL in the device type"),
        state: Mutex::new(State {
            next_handle: 0x1000 * (n + 1),
            streams,
            events,
            graphs: HashMap::new(),
            execs: HashMap::new(),
            device: BTreeMap::new(),
            host: BTreeMap::new(),
            freed: VecDeque::new(),
            freed_bytes: 0,
            garbage_device: false,
            given: HashMap::new(),
            captures: HashMap::new(),
            next_capture: 1,
            never: Vec::new(),
        }),
        changed: Condvar::new(),
        behaviour: RwLock::new(Behaviour::default()),
        draws: [const { AtomicU64::new(0) }; CALLS],
        iteration: AtomicU64::new(0),
    };
    if INSTANCES[n].set(instance).is_err() {
        violation!("instance {n} created twice");
    }
    instance_ref(n)
}

fn instance_ref(n: usize) -> &'static Instance {
    INSTANCES[n].get().expect("just created")
}

/// The address of the `InitPlugin` the shim forwards to, and the context for instance `n`.
pub fn init_plugin_entry(n: usize) -> (InitEntry, *mut c_void) {
    (init_plugin, (n + 1) as *mut c_void)
}

/// The function the shim's `InitPlugin` forwards to.
pub type InitEntry = unsafe extern "C" fn(*mut c_void, *mut CustomRuntimeParams);

fn ids_of(devices: Devices) -> Vec<usize> {
    match devices {
        Devices::List(n) => (0..usize::from(n)).collect(),
        Devices::Duplicate => vec![0, 0],
        Devices::BeyondCInt => vec![1 << 40],
        Devices::WritesMore => vec![0],
        Devices::CountFails | Devices::ListFails | Devices::Huge => Vec::new(),
    }
}

unsafe extern "C" fn init_plugin(context: *mut c_void, params: *mut CustomRuntimeParams) {
    let n = (context as usize).wrapping_sub(1);
    if n >= MAX_INSTANCES || params.is_null() {
        violation!("InitPlugin with context {context:?} and params {params:?}");
    }
    let instance = instance(n);
    let config = instance.config;
    // SAFETY: devstream's params and table buffers (zeroed, far larger than any layout).
    unsafe {
        let params_size = (*params).size;
        let interface = (*params).interface;
        if interface.is_null() {
            violation!("InitPlugin: params->interface is null");
        }
        let table_size = (*interface).size;
        let layout = |i: usize| KNOWN_LAYOUTS[i.min(KNOWN_LAYOUTS.len() - 1)];
        let accepted: Option<AbiLayout> = match config.accept {
            Accept::Refuse => None,
            Accept::WriteThenRefuse => {
                (*params).device_type = instance.device_type.as_ptr() as *mut c_char;
                None
            }
            Accept::Neither => Some(LAYOUT_PADDLE_3_3),
            Accept::Paddle(i) => {
                let l = layout(i);
                (params_size == l.params_size || table_size == l.interface_size).then_some(l)
            }
            Accept::Pair(i) => {
                let l = layout(i);
                (params_size == l.params_size && table_size == l.interface_size).then_some(l)
            }
            Accept::ParamsOnly(i) => {
                let l = layout(i);
                (params_size == l.params_size).then_some(l)
            }
        };
        let Some(layout) = accepted else { return };
        let table = table_for(n, &config);
        // Only the 3.3 layout matches this struct past the stable prefix; the other layouts'
        // later entries are left null.
        let filled = if layout == LAYOUT_PADDLE_3_3 {
            layout.interface_size
        } else {
            STABLE_PREFIX_SIZE
        };
        let word = std::mem::size_of::<usize>();
        std::ptr::copy_nonoverlapping(
            (&table as *const C_DeviceInterface as *const u8).add(word),
            (interface as *mut u8).add(word),
            filled - word,
        );
        if config.beyond {
            *(interface as *mut u8).add(layout.interface_size.max(MAX_KNOWN_INTERFACE_SIZE) + 16) =
                1;
        }
        if config.params_beyond {
            *(params as *mut u8).add(PARAMS_SIZE_3 + 4) = 1;
        }
        let (major, minor, patch) = config.version;
        (*params).version = CustomRuntimeVersion {
            major,
            minor,
            patch,
        };
        if config.name != DeviceTypeName::Null {
            (*params).device_type = instance.device_type.as_ptr() as *mut c_char;
        }
        if config.sub_device_type {
            (*params).sub_device_type = c"fuzz-sub".as_ptr() as *mut c_char;
        }
        if config.replace_interface {
            (*params).interface = Box::leak(Box::new(table));
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A misbehaviour drawn for one call: `None` behaves, `Some(v)` misbehaves in variant `v`.
type Draw = Option<u32>;

impl Instance {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Sets the behaviour for the next iteration and restarts the draws.
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.behaviour.write().unwrap_or_else(|e| e.into_inner()) = behaviour;
        for draw in &self.draws {
            draw.store(0, Ordering::SeqCst);
        }
        self.iteration.fetch_add(1, Ordering::SeqCst);
    }

    fn born(&self) -> Born {
        Born::now(self.iteration.load(Ordering::SeqCst))
    }

    fn behaviour(&self) -> Behaviour {
        *self.behaviour.read().unwrap_or_else(|e| e.into_inner())
    }

    fn random(&self, call: Call, salt: u64) -> u64 {
        let behaviour = self.behaviour();
        let k = self.draws[call as usize].fetch_add(1, Ordering::Relaxed);
        splitmix(behaviour.seed ^ ((call as u64) << 56) ^ (salt << 40) ^ k)
    }

    fn draw(&self, call: Call) -> Draw {
        let behaviour = self.behaviour();
        if behaviour.rate == 0 || behaviour.calls & (1 << call as u32) == 0 {
            return None;
        }
        let r = self.random(call, 0);
        ((r & 0xff) < u64::from(behaviour.rate)).then_some((r >> 8) as u32)
    }

    /// Re-enters devstream through the harness's hook, as the behaviour says (never nested more
    /// than twice on one thread).
    fn maybe_reenter(&self, call: Call) {
        let behaviour = self.behaviour();
        if behaviour.reenter == 0 {
            return;
        }
        let r = self.random(call, 1);
        if (r & 0xff) >= u64::from(behaviour.reenter) {
            return;
        }
        let Some(hook) = REENTRY.get() else { return };
        let depth = REENTERED.with(|d| d.get());
        if depth >= 2 {
            return;
        }
        REENTERED.with(|d| d.set(depth + 1));
        hook((r >> 8) as u32);
        REENTERED.with(|d| d.set(depth));
    }

    fn fresh(&self, state: &mut State) -> usize {
        state.next_handle += 0x10;
        state.next_handle
    }

    fn give(state: &mut State, kind: Kind, handle: usize) {
        if handle != 0 {
            *state.given.entry((kind, handle)).or_insert(0) += 1;
        }
    }

    /// Checks that devstream passes a handle it was given as `kind` (null is always allowed).
    fn check(state: &State, kind: Kind, handle: usize, call: &str) {
        if handle != 0 && state.given.get(&(kind, handle)).copied().unwrap_or(0) == 0 {
            violation!(
                "{call}: devstream passed {handle:#x} as a {kind:?}: never given out as one, or \
                 destroyed as often as it was given out"
            );
        }
    }

    /// [`Self::check`] and one fewer outstanding: a destroy.
    fn take(state: &mut State, kind: Kind, handle: usize, call: &str) {
        Self::check(state, kind, handle, call);
        if handle != 0 {
            let count = state.given.get_mut(&(kind, handle)).expect("checked");
            *count -= 1;
            if *count == 0 {
                state.given.remove(&(kind, handle));
            }
        }
    }

    fn check_device(&self, device: C_Device, call: &str) {
        if device.is_null() {
            violation!("{call}: a null device");
        }
        // SAFETY: devstream's device cell.
        let id = unsafe { (*device).id };
        let ids = ids_of(self.config.devices);
        let ok = usize::try_from(id)
            .ok()
            .is_some_and(|id| ids.contains(&id) || (id >= 1000 && ids.contains(&(id - 1000))));
        if !ok {
            violation!(
                "{call}: device id {id} is not one of instance {}'s ({ids:?})",
                self.n
            );
        }
    }

    /// An out-parameter devstream must have zeroed.
    fn check_zeroed<T>(out: *mut *mut T, call: &str) {
        if out.is_null() {
            violation!("{call}: a null out-parameter");
        }
        // SAFETY: devstream's out-parameter.
        if !unsafe { *out }.is_null() {
            violation!("{call}: the out-parameter was not zeroed");
        }
    }

    /// Writes a handle of `kind` for a create call, misbehaving as `draw` says. `make` creates a
    /// fresh object and returns its handle. Answers the status.
    fn write_handle<T>(
        &self,
        state: &mut State,
        draw: Draw,
        kind: Kind,
        out: *mut *mut T,
        make: &mut dyn FnMut(&mut State) -> usize,
    ) -> C_Status {
        let write = |state: &mut State, handle: usize| {
            Self::give(state, kind, handle);
            // SAFETY: devstream's out-parameter (checked non-null).
            unsafe { *out = handle as *mut T };
        };
        let Some(v) = draw else {
            let handle = make(state);
            write(state, handle);
            return C_SUCCESS;
        };
        match v % 8 {
            0 => {
                write(state, 0);
                C_SUCCESS
            }
            1 => C_SUCCESS,
            2 => {
                let garbage = 0xbad0_0000 + (v as usize & 0xfff0);
                write(state, garbage);
                C_SUCCESS
            }
            3 => {
                let live: Vec<usize> = match kind {
                    Kind::Stream => state
                        .streams
                        .iter()
                        .filter(|(&h, s)| h != 0 && !s.dead)
                        .map(|(&h, _)| h)
                        .collect(),
                    Kind::Event => state.events.keys().copied().filter(|&h| h != 0).collect(),
                    Kind::Graph => state.graphs.keys().copied().collect(),
                    Kind::Exec => state.execs.keys().copied().collect(),
                    Kind::Device | Kind::Host => Vec::new(),
                };
                let handle = if live.is_empty() {
                    make(state)
                } else {
                    let mut live = live;
                    live.sort_unstable();
                    let handle = live[(v as usize / 8) % live.len()];
                    match kind {
                        Kind::Stream => state.streams.get_mut(&handle).expect("live").refs += 1,
                        Kind::Event => state.events.get_mut(&handle).expect("live").refs += 1,
                        Kind::Graph => state.graphs.get_mut(&handle).expect("live").refs += 1,
                        Kind::Exec => state.execs.get_mut(&handle).expect("live").refs += 1,
                        Kind::Device | Kind::Host => {}
                    }
                    handle
                };
                write(state, handle);
                C_SUCCESS
            }
            4 => {
                let mut other: Vec<usize> = state
                    .given
                    .keys()
                    .filter(|(k, _)| *k != kind && *k != Kind::Device && *k != Kind::Host)
                    .map(|&(_, h)| h)
                    .collect();
                other.sort_unstable();
                if other.is_empty() {
                    let handle = make(state);
                    write(state, handle);
                } else {
                    let handle = other[(v as usize / 8) % other.len()];
                    write(state, handle);
                }
                C_SUCCESS
            }
            5 => C_ERROR,
            6 => {
                let handle = make(state);
                write(state, handle);
                C_ERROR
            }
            _ => {
                let handle = make(state);
                write(state, handle);
                C_WARNING
            }
        }
    }

    /// A status for a call that misbehaves in variant `v`: whether to do the work, and what to
    /// answer.
    fn odd_status(v: u32) -> (bool, C_Status) {
        match v % 4 {
            0 => (false, C_ERROR),
            1 => (true, C_ERROR),
            2 => (false, C_INTERNAL_ERROR),
            _ => (true, C_WARNING),
        }
    }

    // ---- device management ----

    fn initialize(&self) -> C_Status {
        if self.config.initialize_fails {
            C_ERROR
        } else {
            C_SUCCESS
        }
    }

    fn finalize(&self) -> C_Status {
        C_SUCCESS
    }

    fn init_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "init_device");
        match self.config.init_device {
            InitDevice::Keep => C_SUCCESS,
            InitDevice::Rewrite => {
                // SAFETY: devstream's device cell, which init_device may rewrite.
                unsafe { (*device).id += 1000 };
                C_SUCCESS
            }
            InitDevice::Fails => C_ERROR,
        }
    }

    fn deinit_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "deinit_device");
        C_SUCCESS
    }

    fn set_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "set_device");
        match self.draw(Call::SetDevice) {
            None => C_SUCCESS,
            Some(v) => Self::odd_status(v).1,
        }
    }

    fn get_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "get_device");
        C_SUCCESS
    }

    fn get_device_count(&self, count: *mut usize) -> C_Status {
        let n = match self.config.devices {
            Devices::CountFails => return C_ERROR,
            Devices::Huge => 1 << 40,
            devices => ids_of(devices).len(),
        };
        // SAFETY: devstream's out-parameter.
        unsafe { *count = n };
        C_SUCCESS
    }

    fn get_device_list(&self, list: *mut usize) -> C_Status {
        let mut ids = match self.config.devices {
            Devices::ListFails => return C_ERROR,
            devices => ids_of(devices),
        };
        if self.config.devices == Devices::WritesMore {
            ids.extend(100..108);
        }
        for (i, id) in ids.into_iter().enumerate() {
            // SAFETY: devstream gives room for the count and 64 entries more.
            unsafe { *list.add(i) = id };
        }
        C_SUCCESS
    }

    // ---- streams ----

    fn create_stream(&self, device: C_Device, out: *mut C_Stream) -> C_Status {
        self.maybe_reenter(Call::CreateStream);
        self.check_device(device, "create_stream");
        Self::check_zeroed(out, "create_stream");
        let draw = self.draw(Call::CreateStream);
        let mut state = self.state();
        self.write_handle(&mut state, draw, Kind::Stream, out, &mut |state| {
            let handle = self.fresh(state);
            state.streams.insert(handle, StreamObj::new(1, self.born()));
            handle
        })
    }

    fn destroy_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
        self.maybe_reenter(Call::DestroyStream);
        self.check_device(device, "destroy_stream");
        let draw = self.draw(Call::DestroyStream);
        let mut state = self.state();
        let handle = stream as usize;
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        Self::check(&state, Kind::Stream, handle, "destroy_stream");
        if !act || handle == 0 {
            return status;
        }
        Self::take(&mut state, Kind::Stream, handle, "destroy_stream");
        let Some(s) = state.streams.get_mut(&handle) else {
            return C_ERROR;
        };
        s.refs -= 1;
        if s.refs == 0 {
            if let Some(id) = s.capture.take() {
                // A destroyed stream leaves its capture; the one that began it ends it.
                if let Some(capture) = state.captures.get_mut(&id) {
                    capture.invalidated = true;
                    capture.members.retain(|&m| m != handle);
                    if capture.origin == handle {
                        capture.ended = true;
                        let members = std::mem::take(&mut capture.members);
                        for member in members {
                            if let Some(s) = state.streams.get_mut(&member) {
                                if s.capture == Some(id) {
                                    s.capture = None;
                                }
                            }
                        }
                    }
                }
            }
            let s = state.streams.get_mut(&handle).expect("present");
            if s.running || !s.queue.is_empty() {
                s.dead = true;
            } else {
                state.streams.remove(&handle);
            }
        }
        status
    }

    /// The stream object for `handle`, or `None` (a handle devstream got as garbage, or of
    /// another kind).
    fn stream<'a>(state: &'a mut State, handle: usize, call: &str) -> Option<&'a mut StreamObj> {
        Self::check(state, Kind::Stream, handle, call);
        state.streams.get_mut(&handle).filter(|s| !s.dead)
    }

    /// Puts `task` on the stream (or into its capture as a node).
    fn push(&'static self, state: &mut State, handle: usize, task: Task) {
        let s = state
            .streams
            .get_mut(&handle)
            .expect("checked by the caller");
        if let Some(id) = s.capture {
            let node = match task {
                Task::Node(node) => Some(node),
                Task::Callback(pending, _) => Some(Node::Callback(pending)),
                Task::Record { .. } | Task::Launch(_) => None,
            };
            if let (Some(node), Some(capture)) = (node, state.captures.get_mut(&id)) {
                capture.nodes.push(node);
            }
            return;
        }
        s.queue.push_back(task);
        s.submitted += 1;
        if !s.running {
            s.running = true;
            pool::spawn(move || self.drain(handle));
        }
    }

    fn drain(&'static self, handle: usize) {
        loop {
            let task = {
                let mut state = self.state();
                let Some(s) = state.streams.get_mut(&handle) else {
                    return;
                };
                match s.queue.pop_front() {
                    Some(task) => task,
                    None => {
                        s.running = false;
                        if s.dead {
                            state.streams.remove(&handle);
                        }
                        self.changed.notify_all();
                        return;
                    }
                }
            };
            self.execute(task);
            let mut state = self.state();
            if let Some(s) = state.streams.get_mut(&handle) {
                s.done += 1;
            }
            self.changed.notify_all();
        }
    }

    fn execute(&'static self, task: Task) {
        match task {
            Task::Node(node) => self.run_node(&node),
            Task::Callback(pending, delivery) => match delivery {
                Delivery::Ordered => pending.call(),
                Delivery::Twice => {
                    pending.call();
                    pending.call();
                }
                Delivery::Late => pool::spawn(move || pending.call()),
                Delivery::Never => self.state().never.push(pending),
            },
            Task::Record { event, generation } => {
                let mut state = self.state();
                if let Some(e) = state.events.get_mut(&event) {
                    e.done = e.done.max(generation);
                }
            }
            Task::Launch(nodes) => {
                for node in nodes.iter() {
                    self.run_node(node);
                }
            }
        }
    }

    fn run_node(&self, node: &Node) {
        match node {
            Node::Copy {
                direction,
                dst,
                src,
                len,
            } => {
                let state = self.state();
                if self.copy_allowed(&state, *direction, *dst, *src, *len, "a queued copy") {
                    // SAFETY: device ranges checked live above (held under the lock); host
                    // ranges are devstream's (the sanitizer checks them).
                    unsafe { std::ptr::copy(*src as *const u8, *dst as *mut u8, *len) };
                }
            }
            Node::Callback(pending) => pending.call(),
            Node::Wait { event, generation } => {
                let mut state = self.state();
                while state
                    .events
                    .get(event)
                    .is_some_and(|e| e.done < *generation)
                {
                    state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    /// Whether a copy may touch its ranges: the device side must lie in live memory this
    /// instance gave out (freed memory or memory never given out is a violation; a garbage
    /// pointer it gave out is refused).
    fn copy_allowed(
        &self,
        state: &State,
        direction: Direction,
        dst: usize,
        src: usize,
        len: usize,
        what: &str,
    ) -> bool {
        let device_sides: &[usize] = match direction {
            Direction::HostToDevice => &[dst],
            Direction::DeviceToHost => &[src],
            Direction::DeviceToDevice => &[dst, src],
        };
        let host_side = match direction {
            Direction::HostToDevice => Some(src),
            Direction::DeviceToHost => Some(dst),
            Direction::DeviceToDevice => None,
        };
        for &start in device_sides {
            if !Self::within(&state.device, start, len) {
                if Self::freed(state, Kind::Device, start, len) {
                    violation!(
                        "{what} {direction:?} of {len} bytes touches device memory \
                         {start:#x} that devstream freed"
                    );
                }
                if state.garbage_device {
                    return false;
                }
                violation!(
                    "{what} {direction:?} of {len} bytes at device address {start:#x}, which \
                     is no live allocation of this plug-in"
                );
            }
        }
        if let Some(start) = host_side {
            if Self::freed(state, Kind::Host, start, len) && !Self::within(&state.host, start, len)
            {
                violation!(
                    "{what} {direction:?} of {len} bytes touches host memory {start:#x} that \
                     devstream freed through host_memory_deallocate"
                );
            }
        }
        true
    }

    fn within(memory: &BTreeMap<usize, Memory>, start: usize, len: usize) -> bool {
        memory
            .range(..=start)
            .next_back()
            .is_some_and(|(&base, m)| {
                start
                    .checked_add(len)
                    .is_some_and(|end| end <= base + m.len)
            })
    }

    fn freed(state: &State, kind: Kind, start: usize, len: usize) -> bool {
        state.freed.iter().any(|f| {
            f.kind == kind
                && start < f.base.saturating_add(f.len)
                && f.base < start.saturating_add(len)
        })
    }

    fn query_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
        self.maybe_reenter(Call::QueryStream);
        self.check_device(device, "query_stream");
        let draw = self.draw(Call::QueryStream);
        let mut state = self.state();
        let Some(s) = Self::stream(&mut state, stream as usize, "query_stream") else {
            return C_ERROR;
        };
        if let Some(id) = s.capture {
            Self::invalidate(&mut state, id);
            return C_ERROR;
        }
        if let Some(v) = draw {
            return Self::odd_status(v).1;
        }
        if s.done == s.submitted {
            C_SUCCESS
        } else {
            C_FAILED
        }
    }

    fn invalidate(state: &mut State, id: u64) {
        if let Some(capture) = state.captures.get_mut(&id) {
            capture.invalidated = true;
        }
    }

    fn synchronize_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
        self.check_device(device, "synchronize_stream");
        let draw = self.draw(Call::SynchronizeStream);
        let handle = stream as usize;
        let mut state = self.state();
        let Some(s) = Self::stream(&mut state, handle, "synchronize_stream") else {
            return C_ERROR;
        };
        if let Some(id) = s.capture {
            Self::invalidate(&mut state, id);
            return C_ERROR;
        }
        if let Some(v) = draw {
            return Self::odd_status(v).1;
        }
        let target = s.submitted;
        while state.streams.get(&handle).is_some_and(|s| s.done < target) {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        C_SUCCESS
    }

    fn synchronize_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "synchronize_device");
        C_SUCCESS
    }

    fn add_callback(
        &'static self,
        device: C_Device,
        stream: C_Stream,
        callback: C_Callback,
        data: *mut c_void,
    ) -> C_Status {
        self.maybe_reenter(Call::AddCallback);
        self.check_device(device, "stream_add_callback");
        let Some(callback) = callback else {
            violation!("stream_add_callback: a null callback");
        };
        let pending = Pending {
            callback,
            device: device as usize,
            stream: stream as usize,
            data: data as usize,
        };
        let draw = self.draw(Call::AddCallback);
        let behaviour = self.behaviour();
        let odd = {
            let r = self.random(Call::Delivery, 0);
            ((r & 0xff) < u64::from(behaviour.odd_deliveries) && behaviour.deliveries != 0).then(
                || {
                    let modes: Vec<u8> = (0..5)
                        .map(|b| 1u8 << b)
                        .filter(|m| behaviour.deliveries & m != 0)
                        .collect();
                    (modes[((r >> 8) as usize) % modes.len()], (r >> 16) as u32)
                },
            )
        };
        let mut state = self.state();
        let handle = stream as usize;
        let Some(s) = Self::stream(&mut state, handle, "stream_add_callback") else {
            return C_ERROR;
        };
        if s.capture.is_some() {
            // Kept by the graph: every launch runs it, in order.
            self.push(
                &mut state,
                handle,
                Task::Callback(pending, Delivery::Ordered),
            );
            return C_SUCCESS;
        }
        if let Some(v) = draw {
            let (act, status) = Self::odd_status(v);
            if act {
                self.push(
                    &mut state,
                    handle,
                    Task::Callback(pending, Delivery::Ordered),
                );
            }
            return status;
        }
        match odd {
            None => {
                self.push(
                    &mut state,
                    handle,
                    Task::Callback(pending, Delivery::Ordered),
                );
                C_SUCCESS
            }
            Some((delivery::INLINE, v)) => {
                drop(state);
                pending.call();
                [C_SUCCESS, C_WARNING, C_ERROR][v as usize % 3]
            }
            Some((delivery::LATE, _)) => {
                self.push(&mut state, handle, Task::Callback(pending, Delivery::Late));
                C_SUCCESS
            }
            Some((delivery::TWICE, _)) => {
                self.push(&mut state, handle, Task::Callback(pending, Delivery::Twice));
                C_SUCCESS
            }
            Some((delivery::NEVER, _)) => {
                self.push(&mut state, handle, Task::Callback(pending, Delivery::Never));
                C_SUCCESS
            }
            Some((_, v)) => {
                self.push(
                    &mut state,
                    handle,
                    Task::Callback(pending, Delivery::Ordered),
                );
                [C_ERROR, C_FAILED, C_INTERNAL_ERROR][v as usize % 3]
            }
        }
    }

    // ---- events ----

    fn create_event(&self, device: C_Device, out: *mut C_Event) -> C_Status {
        self.maybe_reenter(Call::CreateEvent);
        self.check_device(device, "create_event");
        Self::check_zeroed(out, "create_event");
        let draw = self.draw(Call::CreateEvent);
        let mut state = self.state();
        self.write_handle(&mut state, draw, Kind::Event, out, &mut |state| {
            let handle = self.fresh(state);
            state.events.insert(
                handle,
                EventObj {
                    born: self.born(),
                    refs: 1,
                    recorded: 0,
                    done: 0,
                    captured: None,
                },
            );
            handle
        })
    }

    fn record_event(&'static self, device: C_Device, stream: C_Stream, event: C_Event) -> C_Status {
        self.maybe_reenter(Call::RecordEvent);
        self.check_device(device, "record_event");
        let draw = self.draw(Call::RecordEvent);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let (s, e) = (stream as usize, event as usize);
        Self::check(&state, Kind::Event, e, "record_event");
        let Some(capture) = Self::stream(&mut state, s, "record_event").map(|s| s.capture) else {
            return C_ERROR;
        };
        let Some(ev) = state.events.get_mut(&e) else {
            return C_ERROR;
        };
        if !act {
            return status;
        }
        match capture {
            Some(id) => {
                ev.captured = Some(id);
                ev.done = ev.recorded;
            }
            None => {
                ev.captured = None;
                ev.recorded += 1;
                let generation = ev.recorded;
                self.push(
                    &mut state,
                    s,
                    Task::Record {
                        event: e,
                        generation,
                    },
                );
            }
        }
        status
    }

    fn destroy_event(&self, device: C_Device, event: C_Event) -> C_Status {
        self.maybe_reenter(Call::DestroyEvent);
        self.check_device(device, "destroy_event");
        let draw = self.draw(Call::DestroyEvent);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let e = event as usize;
        Self::check(&state, Kind::Event, e, "destroy_event");
        if !act || e == 0 {
            return status;
        }
        Self::take(&mut state, Kind::Event, e, "destroy_event");
        if let Some(ev) = state.events.get_mut(&e) {
            ev.refs -= 1;
            if ev.refs == 0 {
                state.events.remove(&e);
                self.changed.notify_all();
            }
        }
        status
    }

    /// Whether asking about the event breaks a capture (a record into a capture in progress,
    /// as CUDA's `CUDA_ERROR_CAPTURED_EVENT`): the capture is invalidated.
    fn captured_event_refused(state: &mut State, event: usize) -> bool {
        let Some(id) = state.events.get(&event).and_then(|e| e.captured) else {
            return false;
        };
        match state.captures.get_mut(&id) {
            Some(capture) if !capture.ended => {
                capture.invalidated = true;
                true
            }
            _ => false,
        }
    }

    fn query_event(&self, device: C_Device, event: C_Event) -> C_Status {
        self.maybe_reenter(Call::QueryEvent);
        self.check_device(device, "query_event");
        let draw = self.draw(Call::QueryEvent);
        let mut state = self.state();
        let e = event as usize;
        Self::check(&state, Kind::Event, e, "query_event");
        if !state.events.contains_key(&e) || Self::captured_event_refused(&mut state, e) {
            return C_ERROR;
        }
        if let Some(v) = draw {
            return Self::odd_status(v).1;
        }
        let ev = &state.events[&e];
        if ev.done >= ev.recorded {
            C_SUCCESS
        } else {
            C_FAILED
        }
    }

    fn synchronize_event(&self, device: C_Device, event: C_Event) -> C_Status {
        self.check_device(device, "synchronize_event");
        let draw = self.draw(Call::SynchronizeEvent);
        let mut state = self.state();
        let e = event as usize;
        Self::check(&state, Kind::Event, e, "synchronize_event");
        if !state.events.contains_key(&e) || Self::captured_event_refused(&mut state, e) {
            return C_ERROR;
        }
        if let Some(v) = draw {
            return Self::odd_status(v).1;
        }
        let target = state.events[&e].recorded;
        while state.events.get(&e).is_some_and(|ev| ev.done < target) {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        C_SUCCESS
    }

    fn stream_wait_event(
        &'static self,
        device: C_Device,
        stream: C_Stream,
        event: C_Event,
    ) -> C_Status {
        self.maybe_reenter(Call::StreamWaitEvent);
        self.check_device(device, "stream_wait_event");
        let draw = self.draw(Call::StreamWaitEvent);
        let mut state = self.state();
        let (s, e) = (stream as usize, event as usize);
        Self::check(&state, Kind::Event, e, "stream_wait_event");
        let Some(capture) = Self::stream(&mut state, s, "stream_wait_event").map(|s| s.capture)
        else {
            return C_ERROR;
        };
        let Some(ev) = state.events.get(&e) else {
            return C_ERROR;
        };
        let (act, status) = draw.map_or((true, C_SUCCESS), |v| match v % 3 {
            // Success without waiting: ordering lost, memory safe.
            2 => (false, C_SUCCESS),
            v => Self::odd_status(v),
        });
        if !act {
            return status;
        }
        let (captured, generation) = (ev.captured, ev.recorded);
        match (captured, capture) {
            (Some(id), None) if state.captures.get(&id).is_some_and(|c| !c.ended) => {
                // Joins the capture (CUDA's fork/join).
                let capture = state.captures.get_mut(&id).expect("present");
                capture.members.push(s);
                state.streams.get_mut(&s).expect("present").capture = Some(id);
            }
            (Some(id), Some(mine)) if id == mine => {}
            (Some(_), _) => {}
            (None, _) => {
                if state.events[&e].done < generation {
                    self.push(
                        &mut state,
                        s,
                        Task::Node(Node::Wait {
                            event: e,
                            generation,
                        }),
                    );
                }
            }
        }
        status
    }

    // ---- memory ----

    fn allocate(
        &self,
        kind: Kind,
        device: C_Device,
        out: *mut *mut c_void,
        len: usize,
        call: Call,
    ) -> C_Status {
        self.maybe_reenter(call);
        self.check_device(device, "allocate");
        Self::check_zeroed(out, "allocate");
        let draw = self.draw(call);
        let mut state = self.state();
        let fresh = |state: &mut State| -> Option<usize> {
            if len > MAX_ALLOCATION {
                return None;
            }
            let backing = vec![0u8; len.max(1)].into_boxed_slice();
            let address = backing.as_ptr() as usize;
            let memory = Memory {
                born: self.born(),
                refs: 1,
                len,
                backing,
            };
            let map = if kind == Kind::Device {
                &mut state.device
            } else {
                &mut state.host
            };
            map.insert(address, memory);
            Some(address)
        };
        let mut write = |state: &mut State, address: usize| {
            Self::give(state, kind, address);
            // SAFETY: devstream's out-parameter.
            unsafe { *out = address as *mut c_void };
        };
        let Some(v) = draw else {
            return match fresh(&mut state) {
                Some(address) => {
                    write(&mut state, address);
                    C_SUCCESS
                }
                None => C_FAILED,
            };
        };
        let with_fresh =
            |state: &mut State, status: C_Status, write: &mut dyn FnMut(&mut State, usize)| {
                if let Some(address) = fresh(state) {
                    write(state, address);
                }
                status
            };
        match (v % 8, kind) {
            (0, _) => C_SUCCESS,
            (1, _) => C_FAILED,
            (2, _) => with_fresh(&mut state, C_ERROR, &mut write),
            (3, _) => with_fresh(&mut state, C_WARNING, &mut write),
            (4, Kind::Device) => {
                state.garbage_device = true;
                write(&mut state, usize::MAX - 0xff);
                C_SUCCESS
            }
            (5, Kind::Device) => {
                state.garbage_device = true;
                write(&mut state, 0x10);
                C_SUCCESS
            }
            (6, Kind::Device) => {
                let live: Vec<usize> = state.device.keys().copied().collect();
                if live.is_empty() {
                    with_fresh(&mut state, C_SUCCESS, &mut write)
                } else {
                    let address = live[(v as usize / 8) % live.len()];
                    if state.device[&address].len < len {
                        // Too small to stand for this allocation: a fresh one instead.
                        return with_fresh(&mut state, C_SUCCESS, &mut write);
                    }
                    state.device.get_mut(&address).expect("live").refs += 1;
                    write(&mut state, address);
                    C_SUCCESS
                }
            }
            (7, _) => with_fresh(&mut state, C_FAILED, &mut write),
            _ => with_fresh(&mut state, C_SUCCESS, &mut write),
        }
    }

    fn deallocate(
        &self,
        kind: Kind,
        device: C_Device,
        ptr: *mut c_void,
        len: usize,
        call: Call,
    ) -> C_Status {
        self.maybe_reenter(call);
        self.check_device(device, "deallocate");
        let draw = self.draw(call);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let address = ptr as usize;
        Self::check(&state, kind, address, "deallocate");
        if !act {
            return status;
        }
        Self::take(&mut state, kind, address, "deallocate");
        let map = if kind == Kind::Device {
            &mut state.device
        } else {
            &mut state.host
        };
        let Some(memory) = map.get_mut(&address) else {
            return status;
        };
        if memory.len.max(1) < len {
            violation!(
                "deallocate of {address:#x} with {len} bytes; {} were allocated",
                memory.len
            );
        }
        memory.refs -= 1;
        if memory.refs == 0 {
            let memory = map.remove(&address).expect("present");
            let len = memory.len.max(1);
            state.freed_bytes += len;
            state.freed.push_back(Freed {
                kind,
                base: address,
                len,
                _backing: memory.backing,
            });
            while state.freed.len() > QUARANTINE_RANGES || state.freed_bytes > QUARANTINE_BYTES {
                match state.freed.pop_front() {
                    Some(oldest) => state.freed_bytes -= oldest.len,
                    None => break,
                }
            }
        }
        status
    }

    fn copy_sync(
        &self,
        direction: Direction,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
    ) -> C_Status {
        self.maybe_reenter(Call::Copy);
        let draw = self.draw(Call::Copy);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let state = self.state();
        if !self.copy_allowed(
            &state,
            direction,
            dst as usize,
            src as usize,
            len,
            "memory_copy",
        ) {
            return C_ERROR;
        }
        if act {
            // SAFETY: checked as in `run_node`.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
        }
        status
    }

    fn copy_async(
        &'static self,
        direction: Direction,
        device: C_Device,
        stream: C_Stream,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
    ) -> C_Status {
        self.maybe_reenter(Call::Copy);
        self.check_device(device, "async_memory_copy");
        let draw = self.draw(Call::Copy);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let handle = stream as usize;
        if Self::stream(&mut state, handle, "async_memory_copy").is_none() {
            return C_ERROR;
        }
        let (dst, src) = (dst as usize, src as usize);
        if !self.copy_allowed(&state, direction, dst, src, len, "async_memory_copy") {
            return C_ERROR;
        }
        if act {
            let node = Node::Copy {
                direction,
                dst,
                src,
                len,
            };
            self.push(&mut state, handle, Task::Node(node));
        }
        status
    }

    // ---- capture ----

    fn begin_capture(&self, device: C_Device, stream: C_Stream) -> C_Status {
        self.check_device(device, "cuda_stream_begin_capture");
        let draw = self.draw(Call::BeginCapture);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let handle = stream as usize;
        let Some(s) = Self::stream(&mut state, handle, "cuda_stream_begin_capture") else {
            return C_ERROR;
        };
        if let Some(id) = s.capture {
            Self::invalidate(&mut state, id);
            return C_ERROR;
        }
        if !act {
            return status;
        }
        let id = state.next_capture;
        state.next_capture += 1;
        state.streams.get_mut(&handle).expect("present").capture = Some(id);
        state.captures.insert(
            id,
            CaptureObj {
                born: self.born(),
                origin: handle,
                members: vec![handle],
                nodes: Vec::new(),
                invalidated: false,
                ended: false,
            },
        );
        status
    }

    fn end_capture(&self, device: C_Device, stream: C_Stream, out: *mut C_CudaGraph) -> C_Status {
        self.check_device(device, "cuda_stream_end_captrue");
        Self::check_zeroed(out, "cuda_stream_end_captrue");
        let draw = self.draw(Call::EndCapture);
        let mut state = self.state();
        let handle = stream as usize;
        let Some(s) = Self::stream(&mut state, handle, "cuda_stream_end_captrue") else {
            return C_ERROR;
        };
        let Some(id) = s.capture else {
            return C_ERROR;
        };
        if state.captures[&id].origin != handle {
            return C_ERROR;
        }
        let mut capture = state.captures.remove(&id).expect("present");
        capture.ended = true;
        for member in &capture.members {
            if let Some(s) = state.streams.get_mut(member) {
                if s.capture == Some(id) {
                    s.capture = None;
                }
            }
        }
        // Events recorded into it stand for no work any more; questions are answered again.
        state.captures.insert(
            id,
            CaptureObj {
                born: capture.born.clone(),
                origin: handle,
                members: Vec::new(),
                nodes: Vec::new(),
                invalidated: capture.invalidated,
                ended: true,
            },
        );
        if capture.invalidated {
            return C_ERROR;
        }
        let nodes = Arc::new(capture.nodes);
        self.write_handle(&mut state, draw, Kind::Graph, out, &mut |state| {
            let handle = self.fresh(state);
            state.graphs.insert(
                handle,
                GraphObj {
                    born: self.born(),
                    refs: 1,
                    nodes: nodes.clone(),
                },
            );
            handle
        })
    }

    fn instantiate(
        &self,
        exec: *mut C_GraphExec,
        graph: *mut C_CudaGraph,
        log: *mut c_char,
        log_size: usize,
    ) -> C_Status {
        Self::check_zeroed(exec, "cuda_graph_instantiate");
        if graph.is_null() {
            violation!("cuda_graph_instantiate: a null graph pointer");
        }
        let draw = self.draw(Call::Instantiate);
        if let Some(v) = draw {
            if v % 8 == 5 && !log.is_null() {
                // A log filling the whole buffer, without a terminating NUL.
                // SAFETY: devstream's log buffer of `log_size` bytes.
                unsafe { std::ptr::write_bytes(log, b'x', log_size) };
            }
        }
        let mut state = self.state();
        // SAFETY: devstream's pointer to the graph handle.
        let g = unsafe { *graph } as usize;
        Self::check(&state, Kind::Graph, g, "cuda_graph_instantiate");
        let Some(nodes) = state.graphs.get(&g).map(|g| g.nodes.clone()) else {
            return C_ERROR;
        };
        self.write_handle(&mut state, draw, Kind::Exec, exec, &mut |state| {
            let handle = self.fresh(state);
            state.execs.insert(
                handle,
                GraphObj {
                    born: self.born(),
                    refs: 1,
                    nodes: nodes.clone(),
                },
            );
            handle
        })
    }

    fn graph_launch(
        &'static self,
        device: C_Device,
        exec: C_GraphExec,
        stream: C_Stream,
    ) -> C_Status {
        self.check_device(device, "cuda_graph_launch");
        let draw = self.draw(Call::GraphLaunch);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let (x, s) = (exec as usize, stream as usize);
        Self::check(&state, Kind::Exec, x, "cuda_graph_launch");
        let Some(capture) = Self::stream(&mut state, s, "cuda_graph_launch").map(|s| s.capture)
        else {
            return C_ERROR;
        };
        let Some(nodes) = state.execs.get(&x).map(|g| g.nodes.clone()) else {
            return C_ERROR;
        };
        if capture.is_some() {
            return C_ERROR;
        }
        if act {
            self.push(&mut state, s, Task::Launch(nodes));
        }
        status
    }

    fn graph_destroy(&self, kind: Kind, handle: usize) -> C_Status {
        let draw = self.draw(Call::GraphDestroy);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let call = if kind == Kind::Graph {
            "cuda_graph_destroy"
        } else {
            "cuda_graph_exec_destroy"
        };
        Self::check(&state, kind, handle, call);
        if !act || handle == 0 {
            return status;
        }
        Self::take(&mut state, kind, handle, call);
        let map = if kind == Kind::Graph {
            &mut state.graphs
        } else {
            &mut state.execs
        };
        if let Some(g) = map.get_mut(&handle) {
            g.refs -= 1;
            if g.refs == 0 {
                map.remove(&handle);
            }
        }
        status
    }

    #[allow(clippy::too_many_arguments)]
    fn capture_info(
        &self,
        device: C_Device,
        stream: C_Stream,
        status_out: *mut C_StreamCaptureStatus,
        id_out: *mut c_ulonglong,
        graph_out: *mut C_CudaGraph,
        _dependencies: *mut C_CudaGraphNode,
        _edges: *mut *mut c_void,
        _count: *mut usize,
    ) -> C_Status {
        self.maybe_reenter(Call::CaptureInfo);
        self.check_device(device, "cuda_stream_capture_info");
        let draw = self.draw(Call::CaptureInfo);
        let mut state = self.state();
        let Some(s) = Self::stream(&mut state, stream as usize, "cuda_stream_capture_info") else {
            return C_ERROR;
        };
        let current = s.capture;
        let (status, id) = match current {
            None => (C_StreamCaptureStatusNone, 0),
            Some(id) if state.captures[&id].invalidated => (C_StreamCaptureStatusInvalidated, id),
            Some(id) => (C_StreamCaptureStatusActive, id),
        };
        let (status, id, answer) = match draw.map(|v| v % 4) {
            None => (status, id, C_SUCCESS),
            Some(0) => return C_ERROR,
            Some(1) => (7, id, C_SUCCESS),
            Some(2) => (status, id + 1000, C_SUCCESS),
            Some(_) => (C_StreamCaptureStatusActive, id, C_SUCCESS),
        };
        // SAFETY: devstream's out-parameters (null ones are skipped).
        unsafe {
            if !status_out.is_null() {
                *status_out = status;
            }
            if !id_out.is_null() {
                *id_out = id;
            }
            if !graph_out.is_null() {
                *graph_out = std::ptr::null_mut();
            }
        }
        answer
    }

    // ---- the iteration's end ----

    /// Runs the callbacks held as "never" (on pool threads: they may block).
    pub fn release_never(&self) {
        let never = std::mem::take(&mut self.state().never);
        for pending in never {
            pool::spawn(move || pending.call());
        }
    }

    /// Whether no stream of this instance has work queued or running.
    pub fn idle(&self) -> bool {
        let state = self.state();
        state.never.is_empty()
            && state
                .streams
                .values()
                .all(|s| !s.running && s.queue.is_empty())
    }

    /// Plug-in objects made during this iteration and alive now.
    pub fn live(&self) -> PluginLive {
        let state = self.state();
        let now = self.iteration.load(Ordering::SeqCst);
        let count =
            |born: &mut dyn Iterator<Item = &Born>| born.filter(|b| b.iteration == now).count();
        PluginLive {
            streams: count(&mut state.streams.values().map(|o| &o.born)),
            events: count(&mut state.events.values().map(|o| &o.born)),
            graphs: count(&mut state.graphs.values().map(|o| &o.born)),
            execs: count(&mut state.execs.values().map(|o| &o.born)),
            device: count(&mut state.device.values().map(|o| &o.born)),
            host: count(&mut state.host.values().map(|o| &o.born)),
        }
    }

    /// The objects made during this iteration and alive now, described.
    pub fn describe_live(&self) -> String {
        let state = self.state();
        let now = self.iteration.load(Ordering::SeqCst);
        let mut out = Vec::new();
        let mut note = |kind: &str, handle: usize, born: &Born| {
            if born.iteration == now {
                out.push(format!(
                    "{kind} {handle:#x} made on thread {:?}",
                    born.thread
                ));
            }
        };
        state
            .streams
            .iter()
            .for_each(|(h, o)| note("stream", *h, &o.born));
        state
            .events
            .iter()
            .for_each(|(h, o)| note("event", *h, &o.born));
        state
            .graphs
            .iter()
            .for_each(|(h, o)| note("graph", *h, &o.born));
        state
            .execs
            .iter()
            .for_each(|(h, o)| note("exec", *h, &o.born));
        state
            .device
            .iter()
            .for_each(|(h, o)| note("device memory", *h, &o.born));
        state
            .host
            .iter()
            .for_each(|(h, o)| note("host memory", *h, &o.born));
        out.join("; ")
    }

    /// Captures begun during this iteration and not ended.
    pub fn open_captures(&self) -> usize {
        let now = self.iteration.load(Ordering::SeqCst);
        self.state()
            .captures
            .values()
            .filter(|c| !c.ended && c.born.iteration == now)
            .count()
    }

    /// Waits until `done` holds of this instance, or `limit` passes; whether it held.
    pub fn wait_for(&self, limit: Duration, mut done: impl FnMut(&Instance) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

// ---- the table: one set of functions per instance number ----

macro_rules! forward {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) => |$i:ident| $body:expr; )*) => {$(
        unsafe extern "C" fn $name<const N: usize>($($arg: $ty),*) -> C_Status {
            let $i = instance(N);
            $body
        }
    )*};
}

forward! {
    initialize() => |i| i.initialize();
    finalize() => |i| i.finalize();
    init_device(d: C_Device) => |i| i.init_device(d);
    deinit_device(d: C_Device) => |i| i.deinit_device(d);
    set_device(d: C_Device) => |i| i.set_device(d);
    get_device(d: C_Device) => |i| i.get_device(d);
    create_stream(d: C_Device, out: *mut C_Stream) => |i| i.create_stream(d, out);
    destroy_stream(d: C_Device, s: C_Stream) => |i| i.destroy_stream(d, s);
    query_stream(d: C_Device, s: C_Stream) => |i| i.query_stream(d, s);
    stream_add_callback(d: C_Device, s: C_Stream, cb: C_Callback, data: *mut c_void)
        => |i| i.add_callback(d, s, cb, data);
    create_event(d: C_Device, out: *mut C_Event) => |i| i.create_event(d, out);
    record_event(d: C_Device, s: C_Stream, e: C_Event) => |i| i.record_event(d, s, e);
    destroy_event(d: C_Device, e: C_Event) => |i| i.destroy_event(d, e);
    query_event(d: C_Device, e: C_Event) => |i| i.query_event(d, e);
    synchronize_device(d: C_Device) => |i| i.synchronize_device(d);
    synchronize_stream(d: C_Device, s: C_Stream) => |i| i.synchronize_stream(d, s);
    synchronize_event(d: C_Device, e: C_Event) => |i| i.synchronize_event(d, e);
    stream_wait_event(d: C_Device, s: C_Stream, e: C_Event) => |i| i.stream_wait_event(d, s, e);
    device_memory_allocate(d: C_Device, out: *mut *mut c_void, len: usize)
        => |i| i.allocate(Kind::Device, d, out, len, Call::DeviceAllocate);
    device_memory_deallocate(d: C_Device, ptr: *mut c_void, len: usize)
        => |i| i.deallocate(Kind::Device, d, ptr, len, Call::DeviceDeallocate);
    host_memory_allocate(d: C_Device, out: *mut *mut c_void, len: usize)
        => |i| i.allocate(Kind::Host, d, out, len, Call::HostAllocate);
    host_memory_deallocate(d: C_Device, ptr: *mut c_void, len: usize)
        => |i| i.deallocate(Kind::Host, d, ptr, len, Call::HostDeallocate);
    memory_copy_h2d(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_h2d"); i.copy_sync(Direction::HostToDevice, dst, src, len) };
    memory_copy_d2h(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_d2h"); i.copy_sync(Direction::DeviceToHost, dst, src, len) };
    memory_copy_d2d(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_d2d"); i.copy_sync(Direction::DeviceToDevice, dst, src, len) };
    async_memory_copy_h2d(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::HostToDevice, d, s, dst, src, len);
    async_memory_copy_d2h(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::DeviceToHost, d, s, dst, src, len);
    async_memory_copy_d2d(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::DeviceToDevice, d, s, dst, src, len);
    get_device_count(count: *mut usize) => |i| i.get_device_count(count);
    get_device_list(list: *mut usize) => |i| i.get_device_list(list);
    begin_capture(d: C_Device, s: C_Stream, _mode: C_StreamCaptureMode) => |i| i.begin_capture(d, s);
    end_capture(d: C_Device, s: C_Stream, out: *mut C_CudaGraph) => |i| i.end_capture(d, s, out);
    graph_launch(d: C_Device, x: C_GraphExec, s: C_Stream) => |i| i.graph_launch(d, x, s);
    graph_destroy(g: C_CudaGraph) => |i| i.graph_destroy(Kind::Graph, g as usize);
    graph_exec_destroy(x: C_GraphExec) => |i| i.graph_destroy(Kind::Exec, x as usize);
    graph_instantiate(x: *mut C_GraphExec, g: *mut C_CudaGraph, _node: *mut *mut c_void, log: *mut c_char, size: usize)
        => |i| i.instantiate(x, g, log, size);
    capture_info(d: C_Device, s: C_Stream, st: *mut C_StreamCaptureStatus, id: *mut c_ulonglong,
        g: *mut C_CudaGraph, deps: *mut C_CudaGraphNode, edges: *mut *mut c_void, count: *mut usize)
        => |i| i.capture_info(d, s, st, id, g, deps, edges, count);
}

fn table<const N: usize>(config: &Config) -> C_DeviceInterface {
    use optional::*;
    let has = |bit: u16| config.optional & bit != 0;
    let mut t = C_DeviceInterface::zeroed();
    t.set_device = Some(set_device::<N>);
    t.get_device = Some(get_device::<N>);
    t.create_event = Some(create_event::<N>);
    t.record_event = Some(record_event::<N>);
    t.destroy_event = Some(destroy_event::<N>);
    t.synchronize_event = Some(synchronize_event::<N>);
    t.device_memory_allocate = Some(device_memory_allocate::<N>);
    t.device_memory_deallocate = Some(device_memory_deallocate::<N>);
    t.get_device_count = Some(get_device_count::<N>);
    t.get_device_list = Some(get_device_list::<N>);
    if has(INIT) {
        t.initialize = Some(initialize::<N>);
        t.finalize = Some(finalize::<N>);
        t.init_device = Some(init_device::<N>);
        t.deinit_device = Some(deinit_device::<N>);
    }
    if has(STREAMS) {
        t.create_stream = Some(create_stream::<N>);
        t.destroy_stream = Some(destroy_stream::<N>);
    }
    if has(QUERY_STREAM) {
        t.query_stream = Some(query_stream::<N>);
    }
    if has(QUERY_EVENT) {
        t.query_event = Some(query_event::<N>);
    }
    if has(CALLBACK) {
        t.stream_add_callback = Some(stream_add_callback::<N>);
    }
    if has(SYNC_STREAM) {
        t.synchronize_stream = Some(synchronize_stream::<N>);
        t.synchronize_device = Some(synchronize_device::<N>);
    }
    if has(WAIT_EVENT) {
        t.stream_wait_event = Some(stream_wait_event::<N>);
    }
    if has(ASYNC_COPY) {
        t.async_memory_copy_h2d = Some(async_memory_copy_h2d::<N>);
        t.async_memory_copy_d2h = Some(async_memory_copy_d2h::<N>);
        t.async_memory_copy_d2d = Some(async_memory_copy_d2d::<N>);
    }
    if has(SYNC_COPY) {
        t.memory_copy_h2d = Some(memory_copy_h2d::<N>);
        t.memory_copy_d2h = Some(memory_copy_d2h::<N>);
        t.memory_copy_d2d = Some(memory_copy_d2d::<N>);
    }
    if has(HOST_MEMORY) {
        t.host_memory_allocate = Some(host_memory_allocate::<N>);
        t.host_memory_deallocate = Some(host_memory_deallocate::<N>);
    }
    if has(CAPTURE) {
        t.cuda_stream_begin_capture = Some(begin_capture::<N>);
        t.cuda_stream_end_captrue = Some(end_capture::<N>);
        t.cuda_graph_launch = Some(graph_launch::<N>);
        t.cuda_graph_destroy = Some(graph_destroy::<N>);
        t.cuda_graph_exec_destroy = Some(graph_exec_destroy::<N>);
        t.cuda_graph_instantiate = Some(graph_instantiate::<N>);
        t.cuda_stream_capture_info = Some(capture_info::<N>);
    }
    match config.missing_required {
        Some(0) => t.set_device = None,
        Some(1) => t.get_device = None,
        Some(2) => t.create_event = None,
        Some(3) => t.record_event = None,
        Some(4) => t.destroy_event = None,
        Some(5) => t.synchronize_event = None,
        Some(6) => t.device_memory_allocate = None,
        Some(7) => t.device_memory_deallocate = None,
        Some(8) => t.get_device_count = None,
        Some(9) => t.get_device_list = None,
        _ => {}
    }
    t
}

macro_rules! tables {
    ($($n:literal)*) => {
        fn table_for(n: usize, config: &Config) -> C_DeviceInterface {
            match n {
                $($n => table::<$n>(config),)*
                _ => violation!("no table for instance {n}"),
            }
        }
        const _: () = assert!([$($n),*].len() == MAX_INSTANCES);
    };
}

tables!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91
    92 93 94 95
);
