//! The misbehaving plug-in: a Paddle custom-device table (`device_ext.h`, declared in
//! `devstream_paddle_sys`) whose functions live in the fuzz binary (instrumented, under the
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
use devstream_paddle_sys::*;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

mod calls;
mod capture;
mod inspect;
mod memory;
mod table;

use table::table_for;
