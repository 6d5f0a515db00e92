//! Model-based property test: random programs of up to 48 operations over up to 4 streams,
//! events and flags, run on each place and checked against a happens-before model.
//!
//! The model keeps a graph of every operation submitted to a stream. Edges: program order on
//! each stream, `wait_event` → the record the event captured at the time of the call,
//! `wait_stream` → the other stream's last operation, `wait_flag` on a stream's signal flag →
//! the write of that value, and gates: `wait_flag` on a flag only the host raises.
//!
//! Checks: every host task runs exactly once and after all its predecessors; a task sees every
//! signal value written before it; `query` (stream or event) is false while its work depends on
//! a closed gate and, when true, all that work has run; `synchronize` returns after all of it.
//! Gating is deterministic (flags the host raises), never sleep-and-hope; a synchronize is only
//! issued after releasing every gate it depends on, so no program can deadlock a correct
//! backend.
//!
//! Across backends ([`random_programs_across_backends_obey_happens_before`]) the odd stream
//! slots live on a place of another backend, and programs also capture a wait on an event of
//! the other backend (with a host function behind it) and launch the graph once or twice: each
//! replay is a task whose predecessor is the record the event captured when the wait was
//! captured.
//!
//! The hostile variant ([`hostile_programs_obey_happens_before`]) adds host functions that call
//! back into devstream: one reads its stream's host buffer (it must see exactly the copy before
//! it in stream order, and never wait for a copy after it); one queries its own stream (false:
//! it is not done) and an event just recorded on another stream (true means every task that
//! event captured has run; recorded on its own stream, it must be true and its synchronize
//! returns); one launches a host function and records an event on another stream (the launched
//! one runs once, after it; the event completes). A call inside a host function may answer a
//! typed error instead. It runs in a child process with short watchdogs, since a broken backend
//! can wedge a place: after a hang the program that hung is reported as it was (shrinking on a
//! wedged place would only mislead).

use crate::harness::{
    caps, for_each_place, for_each_place_isolated, not_applicable, within, Log, HANG, PATIENCE,
};
use devstream::{
    Capabilities, CaptureMode, DeviceBuffer, Event, EventFlags, Flag, HostBuffer, Place, Stream,
};
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_STREAMS: usize = 4;
const EVENT_SLOTS: usize = 4;
const GATES: usize = 2;
const MAX_OPS: usize = 48;
const MIN_CASES: u32 = 256;

/// One operation of a program. Slot numbers are reduced modulo the program's stream count.
#[derive(Clone, Debug)]
enum Op {
    /// A host function that appends its id to the log.
    Task(usize),
    /// Records event slot `event` on `stream` (`fresh`: `record_event()` into the slot).
    Record {
        stream: usize,
        event: usize,
        fresh: bool,
    },
    /// `stream.wait_event(slot)` (a never-recorded event if the slot is empty).
    WaitEvent { stream: usize, event: usize },
    /// `stream.wait_stream(other)`.
    WaitStream { stream: usize, other: usize },
    /// `stream.wait_flag(gate, next threshold)`: held until the host raises the gate.
    Gate { stream: usize, gate: usize },
    /// The host raises a gate by 1 to 3 thresholds (GEQ: releases all waits at or below).
    Release { gate: usize, steps: u8 },
    /// `stream.write_flag(its signal flag, next value)`.
    Signal(usize),
    /// `stream.wait_flag(other's signal flag, one of the values other has been asked to write)`.
    WaitSignal {
        stream: usize,
        other: usize,
        pick: u8,
    },
    /// `stream.query()`.
    Query(usize),
    /// `event.query()`.
    QueryEvent(usize),
    /// Releases what the stream depends on, then `stream.synchronize()`.
    Synchronize(usize),
    /// Releases what the event depends on, then `event.synchronize()`.
    SyncEvent(usize),
    /// Drops the stream handle (its work goes on); the slot gets a new stream when next used.
    DropStream(usize),
    /// Drops the event handle in the slot.
    DropEvent(usize),
    /// (Across backends) captures on a new stream of `stream`'s place a wait on the event in
    /// slot `event` (of the other backend) and a host function, then launches the graph on
    /// `stream` once or twice: each replay runs after the work the event captured when the
    /// wait was captured.
    CapturedWait {
        stream: usize,
        event: usize,
        launches: u8,
    },
    /// (Hostile) copies the stream's next value into its own host buffer (through its device
    /// buffer).
    Copy(usize),
    /// (Hostile) a host function that reads its stream's own host buffer.
    ReadTask(usize),
    /// (Hostile) records an event on `other`, then a host function on `stream` that queries its
    /// own stream and that event (and synchronizes it when it was recorded on its own stream).
    QueryTask { stream: usize, other: usize },
    /// (Hostile) a host function on `stream` that launches a host function on `other` and
    /// records an event on `other`.
    LaunchTask { stream: usize, other: usize },
}

#[derive(Clone, Debug)]
struct Program {
    streams: usize,
    ops: Vec<Op>,
}

/// The operations of a program: `hostile` adds host functions that call back into devstream,
/// `across` (programs over two places of different backends) adds captured waits across
/// backends.
fn op_strategy(hostile: bool, across: bool) -> BoxedStrategy<Op> {
    let s = || 0..MAX_STREAMS;
    let e = || 0..EVENT_SLOTS;
    let g = || 0..GATES;
    let base = prop_oneof![
        8 => s().prop_map(Op::Task),
        3 => (s(), e(), any::<bool>()).prop_map(|(stream, event, fresh)| Op::Record { stream, event, fresh }),
        3 => (s(), e()).prop_map(|(stream, event)| Op::WaitEvent { stream, event }),
        2 => (s(), s()).prop_map(|(stream, other)| Op::WaitStream { stream, other }),
        2 => (s(), g()).prop_map(|(stream, gate)| Op::Gate { stream, gate }),
        2 => (g(), any::<u8>()).prop_map(|(gate, steps)| Op::Release { gate, steps }),
        2 => s().prop_map(Op::Signal),
        2 => (s(), s(), any::<u8>()).prop_map(|(stream, other, pick)| Op::WaitSignal { stream, other, pick }),
        2 => s().prop_map(Op::Query),
        1 => e().prop_map(Op::QueryEvent),
        1 => s().prop_map(Op::Synchronize),
        1 => e().prop_map(Op::SyncEvent),
        1 => s().prop_map(Op::DropStream),
        1 => e().prop_map(Op::DropEvent),
    ];
    if across {
        let captured =
            (s(), e(), any::<u8>()).prop_map(|(stream, event, launches)| Op::CapturedWait {
                stream,
                event,
                launches,
            });
        return prop_oneof![5 => base, 1 => captured].boxed();
    }
    if !hostile {
        return base.boxed();
    }
    let calls_back = prop_oneof![
        3 => s().prop_map(Op::Copy),
        3 => s().prop_map(Op::ReadTask),
        2 => (s(), s()).prop_map(|(stream, other)| Op::QueryTask { stream, other }),
        2 => (s(), s()).prop_map(|(stream, other)| Op::LaunchTask { stream, other }),
    ];
    prop_oneof![3 => base, 1 => calls_back].boxed()
}

/// Programs made mostly of records and waits, many of them redundant (frameworks' defensive
/// waits), for the elision test.
fn wait_heavy_strategy() -> impl Strategy<Value = Program> {
    let s = || 0..MAX_STREAMS;
    let e = || 0..EVENT_SLOTS;
    let op = prop_oneof![
        4 => s().prop_map(Op::Task),
        4 => (s(), e(), any::<bool>()).prop_map(|(stream, event, fresh)| Op::Record { stream, event, fresh }),
        6 => (s(), e()).prop_map(|(stream, event)| Op::WaitEvent { stream, event }),
        4 => (s(), s()).prop_map(|(stream, other)| Op::WaitStream { stream, other }),
        1 => (s(), 0..GATES).prop_map(|(stream, gate)| Op::Gate { stream, gate }),
        1 => (0..GATES, any::<u8>()).prop_map(|(gate, steps)| Op::Release { gate, steps }),
        1 => s().prop_map(Op::Query),
        1 => e().prop_map(Op::QueryEvent),
        1 => s().prop_map(Op::DropStream),
    ];
    (2..=MAX_STREAMS, prop::collection::vec(op, 0..=MAX_OPS))
        .prop_map(|(streams, ops)| Program { streams, ops })
}

fn program_strategy(hostile: bool, across: bool) -> impl Strategy<Value = Program> {
    (
        1..=MAX_STREAMS,
        prop::collection::vec(op_strategy(hostile, across), 0..=MAX_OPS),
    )
        .prop_map(|(streams, ops)| Program { streams, ops })
}

/// A predecessor of a node: another node, or a gate reaching a threshold.
#[derive(Clone, Copy, Debug)]
enum Pred {
    Node(usize),
    Gate { gate: usize, threshold: u32 },
}

#[derive(Debug)]
struct Node {
    preds: Vec<Pred>,
    /// The task id, for host tasks.
    task: Option<u32>,
    /// `(instance, value)` for signal writes.
    write: Option<(usize, u32)>,
    /// The stream instance the node was submitted to.
    instance: usize,
}

/// One stream the program created (a slot gets a new instance after a drop).
struct Instance {
    stream: Option<Stream>,
    signal: Option<Flag>,
    last: Option<usize>,
    /// Node of each signal write, value `i + 1` at index `i`.
    writes: Vec<usize>,
    /// (Hostile) the device buffer and host buffer that `Copy` fills, made at first use.
    buffers: Option<(DeviceBuffer, Arc<HostBuffer>)>,
    /// (Hostile) how many `Copy`s were submitted: the host buffer holds this value after them.
    copies: u8,
}

struct EventSlot {
    event: Event,
    /// The record node the event captured (`None`: never recorded).
    capture: Option<usize>,
}

/// What a hostile host function saw through its calls back into devstream (`None`: the call
/// answered a typed error).
#[derive(Clone, Debug)]
enum Saw {
    /// A plain task.
    Nothing,
    /// `ReadTask`: the first bytes of its stream's host buffer.
    Buffer(Option<[u8; COPY_LEN]>),
    /// `QueryTask`: its own stream's query and the event's query.
    Query {
        own: Option<bool>,
        event: Option<bool>,
    },
    /// `LaunchTask` itself.
    Launcher,
    /// The host function a `LaunchTask` launched.
    Launched,
    /// A `LaunchTask` whose launch answered a typed error: its host function never runs.
    NotLaunched,
}

/// Bytes each `Copy` writes.
const COPY_LEN: usize = 4;

/// What had visibly completed before a wait call (see `Run::check_elided`).
struct BeforeWait {
    elided: u64,
    logged: BTreeSet<u32>,
    signals: Vec<u32>,
}

/// A log entry: the task id, the signal values it saw (indexed by instance), and what a hostile
/// host function saw.
type Entry = (u32, Vec<u32>, Saw);

struct Run<'a> {
    place: &'a Place,
    /// (Across backends) the place of another backend that the odd stream slots live on.
    partner: Option<&'a Place>,
    /// (Across backends) the gates on `partner`, raised together with `gates`.
    partner_gates: Vec<Flag>,
    caps: Capabilities,
    use_flags: bool,
    nodes: Vec<Node>,
    instances: Vec<Instance>,
    slots: Vec<Option<usize>>,
    events: Vec<Option<EventSlot>>,
    gates: Vec<Flag>,
    issued: [u32; GATES],
    raised: [u32; GATES],
    next_task: u32,
    log: Log<Entry>,
    /// How long a call may take before the run calls it a hang.
    patience: Duration,
    /// Set when a watchdog fired: the place may be wedged.
    wedged: Arc<AtomicBool>,
    /// (Hostile) `ReadTask` id → the value its read must see.
    reads: HashMap<u32, u8>,
    /// (Hostile) `QueryTask` id → (the record node of its event, recorded on its own stream).
    queries: HashMap<u32, (usize, bool)>,
    /// (Hostile) launched task id → the `LaunchTask` that launched it.
    launched: HashMap<u32, u32>,
    /// (Hostile) instances a `LaunchTask` launches onto: host functions may add work to them
    /// at any time, so a query right after their synchronize may be false.
    targeted: BTreeSet<usize>,
    /// (Hostile) events recorded inside host functions: each completes by the end.
    inner_events: Arc<Mutex<Vec<Event>>>,
    /// `Some(b)`: streams are built with `elide_waits(b)`; `None`: the default.
    elide: Option<bool>,
    /// Waits the backend elided (each checked to be implied by the model).
    elided: u64,
    /// Nodes that carry no work of their own (records, waits): ordering them is not needed.
    empty: BTreeSet<usize>,
}

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(fail(format!($($fmt)+)));
        }
    };
}

fn api<T>(what: &str, result: devstream::Result<T>) -> Result<T, TestCaseError> {
    result.map_err(|e| fail(format!("{what}: unexpected error {e:?}")))
}

impl<'a> Run<'a> {
    fn new(
        place: &'a Place,
        caps: Capabilities,
        patience: Duration,
        wedged: Arc<AtomicBool>,
    ) -> Result<Self, TestCaseError> {
        let use_flags = caps.flags;
        let gates = if use_flags {
            (0..GATES)
                .map(|_| api("Flag::new", Flag::new(place)))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        Ok(Run {
            place,
            partner: None,
            partner_gates: Vec::new(),
            caps,
            use_flags,
            nodes: Vec::new(),
            instances: Vec::new(),
            slots: vec![None; MAX_STREAMS],
            events: (0..EVENT_SLOTS).map(|_| None).collect(),
            gates,
            issued: [0; GATES],
            raised: [0; GATES],
            next_task: 0,
            log: Log::new(),
            patience,
            wedged,
            reads: HashMap::new(),
            queries: HashMap::new(),
            launched: HashMap::new(),
            targeted: BTreeSet::new(),
            inner_events: Arc::new(Mutex::new(Vec::new())),
            elide: None,
            elided: 0,
            empty: BTreeSet::new(),
        })
    }

    /// What had visibly completed before a wait call: the thread's elided count, the tasks
    /// logged, the signal values written.
    fn before_wait(&self) -> BeforeWait {
        BeforeWait {
            elided: devstream::elide::elided_on_this_thread(),
            logged: self.logged_ids().into_iter().collect(),
            signals: (self.signal_reader())(),
        }
    }

    /// Whether node `n` had completed before the wait (`before`): a task that had logged, a
    /// signal write whose value was visible, or any other node whose predecessors had all
    /// completed and whose gates were raised. Backends skip waits on completed work, so an
    /// elided wait may rely on it.
    fn done_before(&self, n: usize, before: &BeforeWait, memo: &mut HashMap<usize, bool>) -> bool {
        if let Some(&known) = memo.get(&n) {
            return known;
        }
        let node = &self.nodes[n];
        let done = if let Some(id) = node.task {
            before.logged.contains(&id)
        } else if let Some((instance, value)) = node.write {
            before.signals.get(instance).is_some_and(|&v| v >= value)
        } else {
            node.preds.iter().all(|p| match *p {
                Pred::Node(m) => self.done_before(m, before, memo),
                Pred::Gate { gate, threshold } => self.raised[gate] >= threshold,
            })
        };
        memo.insert(n, done);
        done
    }

    /// If the wait just issued on `instance` was elided (the thread's elided count moved past
    /// `before`), the model must find it redundant: had it been issued, it would have ordered
    /// the instance's later work after every ancestor of `target` (`None`: nothing); elided,
    /// the later work follows the ancestors of the instance's last node. Every ancestor
    /// missing from those must carry no work (a record or a wait) or have completed before
    /// the wait: otherwise later work could run before it, a reordering.
    fn check_elided(
        &mut self,
        before: &BeforeWait,
        instance: usize,
        target: Option<usize>,
        what: &str,
    ) -> Result<(), TestCaseError> {
        let elided = devstream::elide::elided_on_this_thread() - before.elided;
        if elided == 0 {
            return Ok(());
        }
        ensure!(
            self.elide != Some(false),
            "{what} was elided on a stream built with elide_waits(false)"
        );
        self.elided += elided;
        if let Some(target) = target {
            let have = self.instances[instance]
                .last
                .map(|last| self.ancestors(last))
                .unwrap_or_default();
            let mut memo = HashMap::new();
            let missing: Vec<usize> = self
                .ancestors(target)
                .into_iter()
                .filter(|&n| {
                    !have.contains(&n)
                        && !self.empty.contains(&n)
                        && !self.done_before(n, before, &mut memo)
                })
                .collect();
            ensure!(
                missing.is_empty(),
                "{what} on instance {instance} was elided, but nodes {missing:?} (ancestors of \
                 node {target}) are neither ordered before the stream's later work nor complete"
            );
        }
        Ok(())
    }

    /// The instance in a slot, creating a stream (and its signal flag) when the slot is empty.
    fn instance(&mut self, slot: usize) -> Result<usize, TestCaseError> {
        if let Some(i) = self.slots[slot] {
            return Ok(i);
        }
        let place = self.place_of(slot);
        let stream = match self.elide {
            None => api("Stream::new", Stream::new(place))?,
            Some(elide) => api(
                "Stream::builder",
                Stream::builder(place).elide_waits(elide).build(),
            )?,
        };
        let signal = if self.use_flags {
            Some(api("Flag::new", Flag::new(place))?)
        } else {
            None
        };
        self.instances.push(Instance {
            stream: Some(stream),
            signal,
            last: None,
            writes: Vec::new(),
            buffers: None,
            copies: 0,
        });
        let i = self.instances.len() - 1;
        self.slots[slot] = Some(i);
        Ok(i)
    }

    /// The place of a stream slot: the odd slots are on the partner place, when there is one.
    fn place_of(&self, slot: usize) -> &'a Place {
        match self.partner {
            Some(partner) if slot % 2 == 1 => partner,
            _ => self.place,
        }
    }

    /// The gate flag `gate` on the place of `instance`'s stream.
    fn gate_for(&self, instance: usize, gate: usize) -> &Flag {
        if self.partner.is_some() && self.stream(instance).place() != self.place {
            &self.partner_gates[gate]
        } else {
            &self.gates[gate]
        }
    }

    fn stream(&self, instance: usize) -> &Stream {
        self.instances[instance]
            .stream
            .as_ref()
            .expect("slots only name live instances")
    }

    /// Appends a node to an instance: program order plus `extra` predecessors.
    fn push(
        &mut self,
        instance: usize,
        extra: Vec<Pred>,
        task: Option<u32>,
        write: Option<(usize, u32)>,
    ) -> usize {
        let mut preds: Vec<Pred> = self.instances[instance]
            .last
            .map(Pred::Node)
            .into_iter()
            .collect();
        preds.extend(extra);
        self.nodes.push(Node {
            preds,
            task,
            write,
            instance,
        });
        let n = self.nodes.len() - 1;
        self.instances[instance].last = Some(n);
        n
    }

    /// All ancestors of `node`, itself included.
    fn ancestors(&self, node: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![node];
        while let Some(n) = todo.pop() {
            if seen.insert(n) {
                for p in &self.nodes[n].preds {
                    if let Pred::Node(m) = p {
                        todo.push(*m);
                    }
                }
            }
        }
        seen
    }

    /// The highest threshold of each gate that `node`'s ancestors wait for.
    fn gates_needed(&self, node: usize) -> [u32; GATES] {
        let mut need = [0; GATES];
        for n in self.ancestors(node) {
            for p in &self.nodes[n].preds {
                if let Pred::Gate { gate, threshold } = *p {
                    need[gate] = need[gate].max(threshold);
                }
            }
        }
        need
    }

    /// Whether `node` cannot complete because some ancestor waits on a closed gate.
    fn blocked(&self, node: usize) -> bool {
        let need = self.gates_needed(node);
        (0..GATES).any(|g| need[g] > self.raised[g])
    }

    fn raise(&mut self, gate: usize, value: u32) {
        if value > self.raised[gate] {
            self.raised[gate] = value;
            self.gates[gate].set(value);
            if let Some(flag) = self.partner_gates.get(gate) {
                flag.set(value);
            }
        }
    }

    /// Releases every gate `node` depends on (every issued gate when streams do not run
    /// concurrently, since then any earlier held work may hold it).
    fn release_for(&mut self, node: Option<usize>) {
        let need = if !self.caps.concurrent_streams {
            self.issued
        } else {
            match node {
                Some(n) => self.gates_needed(n),
                None => [0; GATES],
            }
        };
        for (g, threshold) in need.into_iter().enumerate() {
            self.raise(g, threshold);
        }
    }

    fn logged_ids(&self) -> Vec<u32> {
        self.log.entries().into_iter().map(|(id, ..)| id).collect()
    }

    /// Every task among `node`'s ancestors has run.
    fn check_done(&self, node: Option<usize>, what: &str) -> Result<(), TestCaseError> {
        let Some(node) = node else { return Ok(()) };
        let logged: BTreeSet<u32> = self.logged_ids().into_iter().collect();
        for n in self.ancestors(node) {
            if let Some(id) = self.nodes[n].task {
                ensure!(
                    logged.contains(&id),
                    "{what}: task {id} has not run (log {:?})",
                    self.logged_ids()
                );
            }
        }
        Ok(())
    }

    /// A watchdog around a call that must return once the gates it needs are open.
    fn guarded<T: Send + 'static>(&self, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let gates: Vec<Flag> = self
            .gates
            .iter()
            .chain(&self.partner_gates)
            .cloned()
            .collect();
        let wedged = self.wedged.clone();
        within(self.patience, what, f, move || {
            wedged.store(true, Ordering::SeqCst);
            for g in gates {
                g.set(u32::MAX);
            }
        })
    }

    /// A closure that reads every instance's signal flag (what a host task saw).
    fn signal_reader(&self) -> impl Fn() -> Vec<u32> + Send + 'static {
        let signals: Vec<Option<Flag>> = self.instances.iter().map(|x| x.signal.clone()).collect();
        move || {
            signals
                .iter()
                .map(|f| f.as_ref().map_or(0, Flag::get))
                .collect()
        }
    }

    /// The instance's device and host buffers for `Copy`, allocated at first use.
    fn buffers(&mut self, instance: usize) -> Result<(), TestCaseError> {
        if self.instances[instance].buffers.is_none() {
            let stream = self.stream(instance).clone();
            let dev = api("alloc", stream.alloc(COPY_LEN))?;
            let host = api("alloc_host", stream.alloc_host(COPY_LEN))?;
            self.instances[instance].buffers = Some((dev, Arc::new(host)));
        }
        Ok(())
    }

    fn task_id(&mut self) -> u32 {
        let id = self.next_task;
        self.next_task += 1;
        id
    }

    /// Checks a query answer: false while the work depends on a closed gate; when true, all the
    /// work has run.
    fn check_query(
        &mut self,
        answer: Option<bool>,
        node: Option<usize>,
        what: &str,
    ) -> Result<(), TestCaseError> {
        let answer = match answer {
            Some(a) => a,
            None => return Ok(()),
        };
        if let Some(n) = node {
            if self.blocked(n) {
                ensure!(
                    !answer,
                    "{what} is true while its work waits on a closed gate"
                );
            }
        }
        if answer {
            self.check_done(node, what)?;
        }
        Ok(())
    }

    /// [`Op::CapturedWait`]: nothing unless the event in slot `event` is of another backend
    /// than the stream slot's place and that place captures waits across backends and host
    /// functions. Each replay of the captured host function logs the next of the task ids
    /// queued for its launch (launches on one stream replay in launch order).
    fn captured_wait(
        &mut self,
        slot: usize,
        event: usize,
        launches: u8,
    ) -> Result<(), TestCaseError> {
        let i = self.instance(slot)?;
        let Some(slot_ref) = &self.events[event] else {
            return Ok(());
        };
        let place = self.stream(i).place().clone();
        let caps = self.stream(i).capabilities();
        let foreign = slot_ref
            .event
            .place()
            .is_some_and(|there| crate::harness::other_backend(&place, &there));
        if !foreign || !caps.capture_foreign_waits || !caps.capture_host_funcs {
            return Ok(());
        }
        let (e, capture) = (slot_ref.event.clone(), slot_ref.capture);
        let ids: Arc<Mutex<VecDeque<u32>>> = Arc::default();
        let capturing = api("Stream::new", Stream::new(&place))?;
        api(
            "begin_capture",
            capturing.begin_capture(CaptureMode::Relaxed),
        )?;
        api("captured wait_event", capturing.wait_event(&e))?;
        let (seen, log, queued) = (self.signal_reader(), self.log.clone(), ids.clone());
        api(
            "captured launch_host_func",
            capturing.launch_host_func(move || {
                let id = queued.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                if let Some(id) = id {
                    log.push((id, seen(), Saw::Nothing));
                }
            }),
        )?;
        let graph = api("end_capture", capturing.end_capture())?;
        for _ in 0..=launches % 2 {
            let id = self.task_id();
            ids.lock().unwrap_or_else(|e| e.into_inner()).push_back(id);
            api("Graph::launch", graph.launch(self.stream(i)))?;
            self.push(
                i,
                capture.map(Pred::Node).into_iter().collect(),
                Some(id),
                None,
            );
        }
        Ok(())
    }

    fn step(&mut self, op: &Op, streams: usize) -> Result<(), TestCaseError> {
        let slot = |s: usize| s % streams;
        match *op {
            Op::Task(s) => {
                let i = self.instance(slot(s))?;
                let id = self.task_id();
                let seen = self.signal_reader();
                let log = self.log.clone();
                api(
                    "launch_host_func",
                    self.stream(i).launch_host_func(move || {
                        log.push((id, seen(), Saw::Nothing));
                    }),
                )?;
                self.push(i, vec![], Some(id), None);
            }
            Op::Record {
                stream,
                event,
                fresh,
            } => {
                let i = self.instance(slot(stream))?;
                // (Across backends) an event of another place cannot be recorded here: the slot
                // gets a new one, which for the model is the same as re-recording it.
                let foreign = self.events[event].as_ref().is_some_and(|slot| {
                    slot.event.place().as_ref() != Some(self.stream(i).place())
                });
                if fresh || foreign || self.events[event].is_none() {
                    let e = if fresh {
                        api("record_event", self.stream(i).record_event())?
                    } else {
                        let place = self.stream(i).place().clone();
                        let e = api("Event::new", Event::new(&place, EventFlags::default()))?;
                        api("record", e.record(self.stream(i)))?;
                        e
                    };
                    let n = self.push(i, vec![], None, None);
                    self.empty.insert(n);
                    self.events[event] = Some(EventSlot {
                        event: e,
                        capture: Some(n),
                    });
                } else {
                    let e = self.events[event].as_ref().expect("checked").event.clone();
                    api("record", e.record(self.stream(i)))?;
                    let n = self.push(i, vec![], None, None);
                    self.empty.insert(n);
                    self.events[event].as_mut().expect("checked").capture = Some(n);
                }
            }
            Op::WaitEvent { stream, event } => {
                let i = self.instance(slot(stream))?;
                if self.events[event].is_none() {
                    let e = api("Event::new", Event::new(self.place, EventFlags::default()))?;
                    self.events[event] = Some(EventSlot {
                        event: e,
                        capture: None,
                    });
                }
                let slot_ref = self.events[event].as_ref().expect("filled");
                let (e, capture) = (slot_ref.event.clone(), slot_ref.capture);
                let before = self.before_wait();
                api("wait_event", self.stream(i).wait_event(&e))?;
                self.check_elided(&before, i, capture, "wait_event")?;
                let n = self.push(i, capture.map(Pred::Node).into_iter().collect(), None, None);
                self.empty.insert(n);
            }
            Op::WaitStream { stream, other } => {
                let i = self.instance(slot(stream))?;
                let o = self.instance(slot(other))?;
                let other_stream = self.stream(o).clone();
                let before = self.before_wait();
                api("wait_stream", self.stream(i).wait_stream(&other_stream))?;
                let target = self.instances[o].last;
                self.check_elided(&before, i, target, "wait_stream")?;
                let extra = self.instances[o].last.map(Pred::Node).into_iter().collect();
                let n = self.push(i, extra, None, None);
                self.empty.insert(n);
            }
            Op::Gate { stream, gate } if self.use_flags => {
                let i = self.instance(slot(stream))?;
                self.issued[gate] += 1;
                let threshold = self.issued[gate];
                let flag = self.gate_for(i, gate).clone();
                api("wait_flag", self.stream(i).wait_flag(&flag, threshold))?;
                self.push(i, vec![Pred::Gate { gate, threshold }], None, None);
            }
            Op::Release { gate, steps } if self.use_flags => {
                let target = (self.raised[gate] + 1 + u32::from(steps % 3)).min(self.issued[gate]);
                self.raise(gate, target);
            }
            Op::Signal(s) if self.use_flags => {
                let i = self.instance(slot(s))?;
                let value = self.instances[i].writes.len() as u32 + 1;
                let flag = self.instances[i].signal.clone().expect("flags on");
                api("write_flag", self.stream(i).write_flag(&flag, value))?;
                let n = self.push(i, vec![], None, Some((i, value)));
                self.instances[i].writes.push(n);
            }
            Op::WaitSignal {
                stream,
                other,
                pick,
            } if self.use_flags => {
                let i = self.instance(slot(stream))?;
                let o = self.instance(slot(other))?;
                if self.stream(i).place() != self.stream(o).place() {
                    // Flags do not cross places: across backends, order comes from waits.
                    return Ok(());
                }
                let flag = self.instances[o].signal.clone().expect("flags on");
                let writes = &self.instances[o].writes;
                let (value, extra) = if writes.is_empty() {
                    (0, vec![])
                } else {
                    let index = usize::from(pick) % writes.len();
                    (index as u32 + 1, vec![Pred::Node(writes[index])])
                };
                api("wait_flag", self.stream(i).wait_flag(&flag, value))?;
                self.push(i, extra, None, None);
            }
            Op::Gate { .. } | Op::Release { .. } | Op::Signal(_) | Op::WaitSignal { .. } => {}
            Op::CapturedWait {
                stream,
                event,
                launches,
            } => self.captured_wait(slot(stream), event, launches)?,
            Op::Query(s) => {
                let i = self.instance(slot(s))?;
                let last = self.instances[i].last;
                if !self.caps.nonblocking_query {
                    self.release_for(last);
                }
                let stream = self.stream(i).clone();
                let answer = api(
                    "query",
                    self.guarded("stream query", move || stream.query()),
                )?;
                if !self.caps.nonblocking_query {
                    ensure!(answer, "a synchronizing query answered false");
                }
                self.check_query(Some(answer), last, "stream query")?;
            }
            Op::QueryEvent(e) => {
                let Some(slot_ref) = &self.events[e] else {
                    return Ok(());
                };
                let (event, capture) = (slot_ref.event.clone(), slot_ref.capture);
                if !self.caps.nonblocking_query {
                    self.release_for(capture);
                }
                let answer = api(
                    "event query",
                    self.guarded("event query", move || event.query()),
                )?;
                if capture.is_none() {
                    ensure!(answer, "a never-recorded event queried false");
                }
                self.check_query(Some(answer), capture, "event query")?;
            }
            Op::Synchronize(s) => {
                let i = self.instance(slot(s))?;
                let last = self.instances[i].last;
                self.release_for(last);
                let stream = self.stream(i).clone();
                api(
                    "synchronize",
                    self.guarded("stream synchronize", move || stream.synchronize()),
                )?;
                self.check_done(last, "after synchronize")?;
                let answer = api("query", self.stream(i).query())?;
                ensure!(
                    answer || self.targeted.contains(&i),
                    "query is false right after synchronize"
                );
            }
            Op::SyncEvent(e) => {
                let Some(slot_ref) = &self.events[e] else {
                    return Ok(());
                };
                let (event, capture) = (slot_ref.event.clone(), slot_ref.capture);
                self.release_for(capture);
                let ev = event.clone();
                api(
                    "event synchronize",
                    self.guarded("event synchronize", move || ev.synchronize()),
                )?;
                self.check_done(capture, "after event synchronize")?;
                ensure!(
                    api("event query", event.query())?,
                    "event query false after its synchronize"
                );
            }
            Op::DropStream(s) => {
                if let Some(i) = self.slots[slot(s)].take() {
                    let stream = self.instances[i].stream.take().expect("live");
                    self.guarded("dropping a stream", move || drop(stream));
                }
            }
            Op::DropEvent(e) => {
                if let Some(slot_ref) = self.events[e].take() {
                    let event = slot_ref.event;
                    self.guarded("dropping an event", move || drop(event));
                }
            }
            Op::Copy(s) => {
                let i = self.instance(slot(s))?;
                self.buffers(i)?;
                self.instances[i].copies += 1;
                let value = self.instances[i].copies;
                let stream = self.stream(i).clone();
                let (dev, host) = self.instances[i].buffers.as_ref().expect("made");
                api(
                    "copy_from_host",
                    stream.copy_from_host(dev, 0, &[value; COPY_LEN]),
                )?;
                api(
                    "copy_device_to_host",
                    stream.copy_device_to_host(host, 0, dev, 0, COPY_LEN),
                )?;
                self.push(i, vec![], None, None);
            }
            Op::ReadTask(s) => {
                let i = self.instance(slot(s))?;
                self.buffers(i)?;
                let id = self.task_id();
                self.reads.insert(id, self.instances[i].copies);
                let host = self.instances[i].buffers.as_ref().expect("made").1.clone();
                let (seen, log) = (self.signal_reader(), self.log.clone());
                api(
                    "launch_host_func",
                    self.stream(i).launch_host_func(move || {
                        let signals = seen();
                        let mut bytes = [0; COPY_LEN];
                        let read = host.read(0, &mut bytes).ok().map(|()| bytes);
                        log.push((id, signals, Saw::Buffer(read)));
                    }),
                )?;
                self.push(i, vec![], Some(id), None);
            }
            Op::QueryTask { stream, other } => {
                let i = self.instance(slot(stream))?;
                let o = self.instance(slot(other))?;
                let event = api("record_event", self.stream(o).record_event())?;
                let recorded = self.push(o, vec![], None, None);
                self.empty.insert(recorded);
                let own_stream = i == o;
                // A query that synchronizes (no nonblocking query) may only wait for work that
                // happens before the host function.
                let query_event = own_stream || self.caps.nonblocking_query;
                let id = self.task_id();
                self.queries.insert(id, (recorded, own_stream));
                let (seen, log) = (self.signal_reader(), self.log.clone());
                let own = self.stream(i).clone();
                api(
                    "launch_host_func",
                    self.stream(i).launch_host_func(move || {
                        let signals = seen();
                        let own_done = own.query().ok();
                        let event_done = if query_event {
                            event.query().ok()
                        } else {
                            None
                        };
                        if own_stream {
                            // It captured only work before this host function: it returns.
                            let _ = event.synchronize();
                        }
                        log.push((
                            id,
                            signals,
                            Saw::Query {
                                own: own_done,
                                event: event_done,
                            },
                        ));
                    }),
                )?;
                self.push(i, vec![], Some(id), None);
            }
            Op::LaunchTask { stream, other } => {
                let i = self.instance(slot(stream))?;
                let o = self.instance(slot(other))?;
                let id = self.task_id();
                let nested = self.task_id();
                self.launched.insert(nested, id);
                self.targeted.insert(o);
                let (seen, log) = (self.signal_reader(), self.log.clone());
                let target = self.stream(o).clone();
                let (place, events) = (self.place.clone(), self.inner_events.clone());
                api(
                    "launch_host_func",
                    self.stream(i).launch_host_func(move || {
                        log.push((id, seen(), Saw::Launcher));
                        let inner = log.clone();
                        let launched = target
                            .launch_host_func(move || {
                                inner.push((nested, Vec::new(), Saw::Launched));
                            })
                            .is_ok();
                        if !launched {
                            log.push((nested, Vec::new(), Saw::NotLaunched));
                        }
                        if let Ok(event) = Event::new(&place, EventFlags::default()) {
                            if event.record(&target).is_ok() {
                                events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
                            }
                        }
                    }),
                )?;
                self.push(i, vec![], Some(id), None);
            }
        }
        Ok(())
    }

    /// Releases everything, waits for all work (dropped streams' too) and checks the log.
    fn finish(&mut self) -> Result<(), TestCaseError> {
        for g in 0..self.gates.len() {
            let issued = self.issued[g];
            self.raise(g, issued);
        }
        for i in 0..self.instances.len() {
            if let Some(stream) = self.instances[i].stream.clone() {
                api(
                    "synchronize",
                    self.guarded("final synchronize", move || stream.synchronize()),
                )?;
            }
        }
        let total = self.next_task as usize;
        let log = self.log.clone();
        ensure!(
            crate::harness::wait_until(PATIENCE, || log.len() >= total),
            "only {} of {total} tasks ran (dropped streams' work must still run): {:?}",
            log.len(),
            self.logged_ids()
        );
        for inst in &self.instances {
            if let Some(flag) = &inst.signal {
                let want = inst.writes.len() as u32;
                ensure!(
                    crate::harness::wait_until(PATIENCE, || flag.get() == want),
                    "a signal flag ends at {} instead of its last write {want}",
                    flag.get()
                );
            }
        }
        let entries = self.log.entries();
        let mut position: HashMap<u32, usize> = HashMap::new();
        for (pos, (id, ..)) in entries.iter().enumerate() {
            ensure!(
                position.insert(*id, pos).is_none(),
                "task {id} ran twice: {:?}",
                self.logged_ids()
            );
        }
        ensure!(
            entries.len() == total,
            "{} log entries for {total} tasks",
            entries.len()
        );
        for (n, node) in self.nodes.iter().enumerate() {
            let Some(id) = node.task else { continue };
            let Some(&at) = position.get(&id) else {
                return Err(fail(format!("task {id} never ran")));
            };
            let seen = &entries[at].1;
            let mut own_last_write = 0;
            for a in self.ancestors(n) {
                let ancestor = &self.nodes[a];
                if let Some(before) = ancestor.task.filter(|_| a != n) {
                    ensure!(
                        position[&before] < at,
                        "task {id} ran before its predecessor task {before}: log {:?}",
                        self.logged_ids()
                    );
                }
                if let Some((instance, value)) = ancestor.write {
                    ensure!(
                        seen.get(instance).copied().unwrap_or(0) >= value,
                        "task {id} saw signal {instance} at {:?}, below the {value} written before it",
                        seen.get(instance)
                    );
                    if instance == node.instance {
                        own_last_write = own_last_write.max(value);
                    }
                }
            }
            if self.use_flags {
                ensure!(
                    seen.get(node.instance).copied() == Some(own_last_write),
                    "task {id} saw its own stream's signal at {:?}, expected exactly {own_last_write} \
                     (writes must land in stream order)",
                    seen.get(node.instance)
                );
            }
        }
        self.check_hostile(&entries, &position)
    }

    /// The hostile host functions' observations against the model.
    fn check_hostile(
        &self,
        entries: &[Entry],
        position: &HashMap<u32, usize>,
    ) -> Result<(), TestCaseError> {
        for (at, (id, _, saw)) in entries.iter().enumerate() {
            match saw {
                Saw::Nothing | Saw::Launcher | Saw::NotLaunched => {}
                Saw::Buffer(read) => {
                    let want = self.reads[id];
                    ensure!(
                        read.is_none_or(|bytes| bytes == [want; COPY_LEN]),
                        "task {id} read its stream's host buffer as {read:?}, but the copy before \
                         it in stream order wrote {want} (log {:?})",
                        self.logged_ids()
                    );
                }
                Saw::Query { own, event } => {
                    ensure!(
                        *own != Some(true),
                        "task {id} queried its own stream as done while it ran"
                    );
                    let (recorded, own_stream) = self.queries[id];
                    if own_stream {
                        ensure!(
                            *event != Some(false),
                            "task {id}: an event recorded on its stream right before it queried \
                             false inside it"
                        );
                    }
                    if *event == Some(true) {
                        for n in self.ancestors(recorded) {
                            if let Some(before) = self.nodes[n].task {
                                ensure!(
                                    position[&before] < at,
                                    "task {id} saw an event done whose task {before} had not \
                                     run: log {:?}",
                                    self.logged_ids()
                                );
                            }
                        }
                    }
                }
                Saw::Launched => {
                    let parent = self.launched[id];
                    ensure!(
                        position[&parent] < at,
                        "task {id}, launched by task {parent} inside it, ran before it: log {:?}",
                        self.logged_ids()
                    );
                }
            }
        }
        let events: Vec<Event> = self
            .inner_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for event in events {
            let e = event.clone();
            api(
                "synchronize of an event recorded inside a host function",
                self.guarded("an event recorded inside a host function", move || {
                    e.synchronize()
                }),
            )?;
            ensure!(
                api("event query", event.query())?,
                "an event recorded inside a host function queried false after its synchronize"
            );
        }
        Ok(())
    }
}

fn run_program(
    place: &Place,
    caps: Capabilities,
    program: &Program,
    patience: Duration,
    wedged: &Arc<AtomicBool>,
    elide: Option<bool>,
) -> Result<u64, TestCaseError> {
    run_program_across(place, None, caps, program, patience, wedged, elide)
}

/// [`run_program`] with the odd stream slots on `partner`, a place of another backend, when
/// given (`caps` then holds what both places have).
fn run_program_across(
    place: &Place,
    partner: Option<&Place>,
    caps: Capabilities,
    program: &Program,
    patience: Duration,
    wedged: &Arc<AtomicBool>,
    elide: Option<bool>,
) -> Result<u64, TestCaseError> {
    let mut run = Run::new(place, caps, patience, wedged.clone())?;
    run.elide = elide;
    if let Some(partner) = partner {
        run.partner = Some(partner);
        if run.use_flags {
            run.partner_gates = (0..GATES)
                .map(|_| api("Flag::new", Flag::new(partner)))
                .collect::<Result<_, _>>()?;
        }
    }
    let outcome = program
        .ops
        .iter()
        .try_for_each(|op| run.step(op, program.streams));
    // Whatever happened, open every gate so no work stays held.
    for g in run.gates.iter().chain(&run.partner_gates) {
        g.set(u32::MAX);
    }
    outcome?;
    run.finish()?;
    Ok(run.elided)
}

/// The model test with every stream built with `elide_waits(false)`: every wait is native
/// (the other tests use the default, on unless `DEVSTREAM_ELIDE_WAITS=0`).
#[test]
fn random_programs_obey_happens_before_without_elision() {
    for_each_place(|place| run_model_with(place, false, Some(false)).map(drop));
}

/// Wait-heavy random programs with elision on: every program obeys the happens-before model,
/// and every wait a backend elided is one the model finds redundant (had it been issued, it
/// would have ordered no work that was not ordered already). Fails if the backend elided
/// nothing in all programs (the check would prove nothing).
#[test]
fn elided_waits_were_implied() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions to observe the programs");
            return Ok(());
        }
        let wedged = Arc::new(AtomicBool::new(false));
        let total = AtomicU64::new(0);
        let mut runner = TestRunner::new(Config {
            cases: Config::default().cases.max(MIN_CASES),
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&wait_heavy_strategy(), |program| {
            let elided = run_program(place, caps, &program, PATIENCE, &wedged, Some(true))?;
            total.fetch_add(elided, Ordering::Relaxed);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}\non {place}");
        }
        let total = total.into_inner();
        eprintln!("[conformance] elision on {place}: {total} waits elided, each implied");
        assert!(
            total > 0,
            "{place}: no wait was elided in any wait-heavy program"
        );
        Ok(())
    });
}

/// Random programs (≥ 256 per place) checked against the happens-before model.
#[test]
fn random_programs_obey_happens_before() {
    for_each_place(|place| run_model(place, false));
}

/// Random programs whose streams live on two places of different backends (the odd stream
/// slots on a partner place: the first other place under test whose backend differs, custom
/// device types counting as backends), so that events, `wait_event` and `wait_stream` cross
/// backends (≥ 256 per place), checked against the same happens-before model. Gates are a flag
/// on each place raised together; a flag wait on another place's signal is skipped (flags do
/// not cross places).
#[test]
fn random_programs_across_backends_obey_happens_before() {
    for_each_place(|place| {
        let usable = |p: &Place| {
            let c = caps(p);
            c.foreign_waits && c.host_funcs
        };
        if !usable(place) {
            not_applicable(place, "no waits across backends or no host functions");
            return Ok(());
        }
        let Some(partner) = crate::harness::places_under_test()
            .into_iter()
            .find(|p| crate::harness::other_backend(place, p) && usable(p))
        else {
            not_applicable(place, "no place of another backend to wait across");
            return Ok(());
        };
        let (mine, theirs) = (caps(place), caps(&partner));
        let mut both = mine;
        both.flags = mine.flags && theirs.flags;
        both.nonblocking_query = mine.nonblocking_query && theirs.nonblocking_query;
        both.concurrent_streams = mine.concurrent_streams && theirs.concurrent_streams;
        let wedged = Arc::new(AtomicBool::new(false));
        let mut runner = TestRunner::new(Config {
            cases: Config::default().cases.max(MIN_CASES),
            failure_persistence: None,
            max_shrink_iters: 2048,
            max_shrink_time: 60_000,
            ..Config::default()
        });
        let started = std::time::Instant::now();
        let result = runner.run(&program_strategy(false, true), |program| {
            run_program_across(
                place,
                Some(&partner),
                both,
                &program,
                PATIENCE,
                &wedged,
                None,
            )
            .map(drop)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, program)) => panic!(
                "{reason}\nminimal failing program on {place} with {partner} (odd slots):\n\
                 {program:#?}"
            ),
            Err(TestError::Abort(reason)) => panic!("model test aborted: {reason}"),
        }
        eprintln!(
            "[conformance] model across backends on {place} + {partner}: {:.2?}",
            started.elapsed()
        );
        Ok(())
    });
}

/// Random programs with host functions that call back into devstream (≥ 256 per place), checked
/// against the happens-before model, in a child process with [`HANG`] watchdogs.
#[test]
fn hostile_programs_obey_happens_before() {
    for_each_place_isolated("model::hostile_programs_obey_happens_before", |place| {
        run_model(place, true)
    });
}

fn run_model(place: &Place, hostile: bool) -> devstream::Result<()> {
    run_model_with(place, hostile, None)
}

fn run_model_with(place: &Place, hostile: bool, elide: Option<bool>) -> devstream::Result<()> {
    let caps = caps(place);
    if !caps.host_funcs {
        not_applicable(place, "no host functions to observe the programs");
        return Ok(());
    }
    if !caps.flags {
        not_applicable(place, "no flags: programs run without gates and signals");
    }
    let defaults = Config::default();
    let config = Config {
        cases: defaults.cases.max(MIN_CASES),
        failure_persistence: None,
        max_shrink_iters: 2048,
        // A hang costs a watchdog period per shrink step: bound the shrinking.
        max_shrink_time: 60_000,
        ..defaults
    };
    let cases = config.cases;
    let patience = if hostile { *HANG } else { PATIENCE };
    let wedged = Arc::new(AtomicBool::new(false));
    let started = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    match runner.run(&program_strategy(hostile, false), |program| {
        if hostile && wedged.load(Ordering::SeqCst) {
            // A watchdog fired: the place may be wedged, so later programs prove nothing and
            // the one that hung is reported as it was.
            return Ok(());
        }
        run_program(place, caps, &program, patience, &wedged, elide).map(drop)
    }) {
        Ok(()) => {}
        Err(TestError::Fail(reason, program)) => {
            let wedged = if wedged.load(Ordering::SeqCst) {
                "\n(a watchdog fired: the place may be wedged; the program is not shrunk)"
            } else {
                ""
            };
            panic!("{reason}{wedged}\nminimal failing program on {place}:\n{program:#?}")
        }
        Err(TestError::Abort(reason)) => panic!("model test aborted: {reason}"),
    }
    eprintln!(
        "[conformance] model{} on {place}: {cases} programs in {:.2?}",
        if hostile { " (hostile)" } else { "" },
        started.elapsed()
    );
    Ok(())
}
