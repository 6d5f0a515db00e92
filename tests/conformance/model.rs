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

use crate::harness::{caps, for_each_place, not_applicable, within, Log, PATIENCE};
use devstream::{Capabilities, Event, EventFlags, Flag, Place, Stream};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::collections::{BTreeSet, HashMap};

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
}

#[derive(Clone, Debug)]
struct Program {
    streams: usize,
    ops: Vec<Op>,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let s = || 0..MAX_STREAMS;
    let e = || 0..EVENT_SLOTS;
    let g = || 0..GATES;
    prop_oneof![
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
    ]
}

fn program_strategy() -> impl Strategy<Value = Program> {
    (
        1..=MAX_STREAMS,
        prop::collection::vec(op_strategy(), 0..=MAX_OPS),
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
}

struct EventSlot {
    event: Event,
    /// The record node the event captured (`None`: never recorded).
    capture: Option<usize>,
}

/// A log entry: the task id and the signal values it saw (indexed by instance).
type Entry = (u32, Vec<u32>);

struct Run<'a> {
    place: &'a Place,
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
    fn new(place: &'a Place, caps: Capabilities) -> Result<Self, TestCaseError> {
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
        })
    }

    /// The instance in a slot, creating a stream (and its signal flag) when the slot is empty.
    fn instance(&mut self, slot: usize) -> Result<usize, TestCaseError> {
        if let Some(i) = self.slots[slot] {
            return Ok(i);
        }
        let stream = api("Stream::new", Stream::new(self.place))?;
        let signal = if self.use_flags {
            Some(api("Flag::new", Flag::new(self.place))?)
        } else {
            None
        };
        self.instances.push(Instance {
            stream: Some(stream),
            signal,
            last: None,
            writes: Vec::new(),
        });
        let i = self.instances.len() - 1;
        self.slots[slot] = Some(i);
        Ok(i)
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
        self.log.entries().into_iter().map(|(id, _)| id).collect()
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
        let gates = self.gates.clone();
        within(PATIENCE, what, f, move || {
            for g in gates {
                g.set(u32::MAX);
            }
        })
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

    fn step(&mut self, op: &Op, streams: usize) -> Result<(), TestCaseError> {
        let slot = |s: usize| s % streams;
        match *op {
            Op::Task(s) => {
                let i = self.instance(slot(s))?;
                let id = self.next_task;
                self.next_task += 1;
                let signals: Vec<Option<Flag>> =
                    self.instances.iter().map(|x| x.signal.clone()).collect();
                let log = self.log.clone();
                api(
                    "launch_host_func",
                    self.stream(i).launch_host_func(move || {
                        let seen = signals
                            .iter()
                            .map(|f| f.as_ref().map_or(0, Flag::get))
                            .collect();
                        log.push((id, seen));
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
                if fresh || self.events[event].is_none() {
                    let e = if fresh {
                        api("record_event", self.stream(i).record_event())?
                    } else {
                        let e = api("Event::new", Event::new(self.place, EventFlags::default()))?;
                        api("record", e.record(self.stream(i)))?;
                        e
                    };
                    let n = self.push(i, vec![], None, None);
                    self.events[event] = Some(EventSlot {
                        event: e,
                        capture: Some(n),
                    });
                } else {
                    let e = self.events[event].as_ref().expect("checked").event.clone();
                    api("record", e.record(self.stream(i)))?;
                    let n = self.push(i, vec![], None, None);
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
                api("wait_event", self.stream(i).wait_event(&e))?;
                self.push(i, capture.map(Pred::Node).into_iter().collect(), None, None);
            }
            Op::WaitStream { stream, other } => {
                let i = self.instance(slot(stream))?;
                let o = self.instance(slot(other))?;
                let other_stream = self.stream(o).clone();
                api("wait_stream", self.stream(i).wait_stream(&other_stream))?;
                let extra = self.instances[o].last.map(Pred::Node).into_iter().collect();
                self.push(i, extra, None, None);
            }
            Op::Gate { stream, gate } if self.use_flags => {
                let i = self.instance(slot(stream))?;
                self.issued[gate] += 1;
                let threshold = self.issued[gate];
                api(
                    "wait_flag",
                    self.stream(i).wait_flag(&self.gates[gate], threshold),
                )?;
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
                ensure!(answer, "query is false right after synchronize");
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
        for (pos, (id, _)) in entries.iter().enumerate() {
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
        Ok(())
    }
}

fn run_program(place: &Place, caps: Capabilities, program: &Program) -> Result<(), TestCaseError> {
    let mut run = Run::new(place, caps)?;
    let outcome = program
        .ops
        .iter()
        .try_for_each(|op| run.step(op, program.streams));
    // Whatever happened, open every gate so no work stays held.
    for g in &run.gates {
        g.set(u32::MAX);
    }
    outcome?;
    run.finish()
}

/// Random programs (≥ 256 per place) checked against the happens-before model.
#[test]
fn random_programs_obey_happens_before() {
    for_each_place(|place| {
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
        let started = std::time::Instant::now();
        let mut runner = TestRunner::new(config);
        match runner.run(&program_strategy(), |program| {
            run_program(place, caps, &program)
        }) {
            Ok(()) => {}
            Err(TestError::Fail(reason, program)) => {
                panic!("{reason}\nminimal failing program on {place}:\n{program:#?}")
            }
            Err(TestError::Abort(reason)) => panic!("model test aborted: {reason}"),
        }
        eprintln!(
            "[conformance] model on {place}: {cases} programs in {:.2?}",
            started.elapsed()
        );
        Ok(())
    });
}
