//! A program's run: the streams, events and flags it made, and the happens-before graph of
//! what it submitted.

use super::*;

/// A predecessor of a node: another node, or a gate reaching a threshold.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pred {
    Node(usize),
    Gate { gate: usize, threshold: u32 },
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) preds: Vec<Pred>,
    /// The task id, for host tasks.
    pub(super) task: Option<u32>,
    /// `(instance, value)` for signal writes.
    pub(super) write: Option<(usize, u32)>,
    /// The stream instance the node was submitted to.
    pub(super) instance: usize,
}

/// One stream the program created (a slot gets a new instance after a drop).
pub(super) struct Instance {
    pub(super) stream: Option<Stream>,
    pub(super) signal: Option<Flag>,
    pub(super) last: Option<usize>,
    /// Node of each signal write, value `i + 1` at index `i`.
    pub(super) writes: Vec<usize>,
    /// (Hostile) the device buffer and host buffer that `Copy` fills, made at first use.
    pub(super) buffers: Option<(DeviceBuffer, Arc<HostBuffer>)>,
    /// (Hostile) how many `Copy`s were submitted: the host buffer holds this value after them.
    pub(super) copies: u8,
    /// (Hostile, across) the host buffer `SharedRead` copies a shared buffer into, made at
    /// first use.
    pub(super) observer: Option<HostBuffer>,
}

pub(super) struct EventSlot {
    pub(super) event: Event,
    /// The record node the event captured (`None`: never recorded).
    pub(super) capture: Option<usize>,
}

/// What a hostile host function saw through its calls back into devstream (`None`: the call
/// answered a typed error).
#[derive(Clone, Debug)]
pub(super) enum Saw {
    /// A plain task.
    Nothing,
    /// `ReadTask`: the first bytes of its stream's host buffer.
    Buffer(Option<[u8; COPY_LEN]>),
    /// `QueryTask`: its own stream's query and the event's query.
    Query {
        own: Option<bool>,
        event: Option<bool>,
    },
    /// `Given` and the observer of `SharedRead`: the first bytes of each buffer it was given,
    /// in the order given.
    Shared(Vec<[u8; COPY_LEN]>),
    /// `LaunchTask` itself.
    Launcher,
    /// The host function a `LaunchTask` launched.
    Launched,
    /// A `LaunchTask` whose launch answered a typed error: its host function never runs.
    NotLaunched,
}

/// Bytes each `Copy` writes.
pub(super) const COPY_LEN: usize = 4;

/// What had visibly completed before a wait call (see `Run::check_elided`).
pub(super) struct BeforeWait {
    pub(super) elided: u64,
    pub(super) logged: BTreeSet<u32>,
    pub(super) signals: Vec<u32>,
}

/// A log entry: the task id, the signal values it saw (indexed by instance), and what a hostile
/// host function saw.
pub(super) type Entry = (u32, Vec<u32>, Saw);

pub(super) struct Run<'a> {
    pub(super) place: &'a Place,
    /// (Across backends) the place of another backend that the odd stream slots live on.
    pub(super) partner: Option<&'a Place>,
    /// (Across backends) the gates on `partner`, raised together with `gates`.
    pub(super) partner_gates: Vec<Flag>,
    pub(super) caps: Capabilities,
    pub(super) use_flags: bool,
    pub(super) nodes: Vec<Node>,
    pub(super) instances: Vec<Instance>,
    pub(super) slots: Vec<Option<usize>>,
    pub(super) events: Vec<Option<EventSlot>>,
    pub(super) gates: Vec<Flag>,
    pub(super) issued: [u32; GATES],
    pub(super) raised: [u32; GATES],
    pub(super) next_task: u32,
    pub(super) log: Log<Entry>,
    /// How long a call may take before the run calls it a hang.
    pub(super) patience: Duration,
    /// Set when a watchdog fired: the place may be wedged.
    pub(super) wedged: Arc<AtomicBool>,
    /// (Hostile) `ReadTask` id → the value its read must see.
    pub(super) reads: HashMap<u32, u8>,
    /// (Hostile) `QueryTask` id → (the record node of its event, recorded on its own stream).
    pub(super) queries: HashMap<u32, (usize, bool)>,
    /// (Hostile) launched task id → the `LaunchTask` that launched it.
    pub(super) launched: HashMap<u32, u32>,
    /// (Hostile) instances a `LaunchTask` launches onto: host functions may add work to them
    /// at any time, so a query right after their synchronize may be false.
    pub(super) targeted: BTreeSet<usize>,
    /// (Hostile) events recorded inside host functions: each completes by the end.
    pub(super) inner_events: Arc<Mutex<Vec<Event>>>,
    /// `Some(b)`: streams are built with `elide_waits(b)`; `None`: the default.
    pub(super) elide: Option<bool>,
    /// Waits the backend elided (each checked to be implied by the model).
    pub(super) elided: u64,
    /// Nodes that carry no work of their own (records, waits): ordering them is not needed.
    pub(super) empty: BTreeSet<usize>,
    /// (Hostile, across) the shared host buffers and the uses submitted on them.
    pub(super) shared: super::shared::SharedBuffers,
}

impl<'a> Run<'a> {
    pub(super) fn new(
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
            shared: Default::default(),
        })
    }

    /// What had visibly completed before a wait call: the thread's elided count, the tasks
    /// logged, the signal values written.
    pub(super) fn before_wait(&self) -> BeforeWait {
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
    pub(super) fn done_before(
        &self,
        n: usize,
        before: &BeforeWait,
        memo: &mut HashMap<usize, bool>,
    ) -> bool {
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
    pub(super) fn check_elided(
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
    pub(super) fn instance(&mut self, slot: usize) -> Result<usize, TestCaseError> {
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
            observer: None,
        });
        let i = self.instances.len() - 1;
        self.slots[slot] = Some(i);
        Ok(i)
    }

    /// The place of a stream slot: the odd slots are on the partner place, when there is one.
    pub(super) fn place_of(&self, slot: usize) -> &'a Place {
        match self.partner {
            Some(partner) if slot % 2 == 1 => partner,
            _ => self.place,
        }
    }

    /// The gate flag `gate` on the place of `instance`'s stream.
    pub(super) fn gate_for(&self, instance: usize, gate: usize) -> &Flag {
        if self.partner.is_some() && self.stream(instance).place() != self.place {
            &self.partner_gates[gate]
        } else {
            &self.gates[gate]
        }
    }

    pub(super) fn stream(&self, instance: usize) -> &Stream {
        self.instances[instance]
            .stream
            .as_ref()
            .expect("slots only name live instances")
    }

    /// Appends a node to an instance: program order plus `extra` predecessors.
    pub(super) fn push(
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
    pub(super) fn ancestors(&self, node: usize) -> BTreeSet<usize> {
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
    pub(super) fn gates_needed(&self, node: usize) -> [u32; GATES] {
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
    pub(super) fn blocked(&self, node: usize) -> bool {
        let need = self.gates_needed(node);
        (0..GATES).any(|g| need[g] > self.raised[g])
    }

    pub(super) fn raise(&mut self, gate: usize, value: u32) {
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
    pub(super) fn release_for(&mut self, node: Option<usize>) {
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

    pub(super) fn logged_ids(&self) -> Vec<u32> {
        self.log.entries().into_iter().map(|(id, ..)| id).collect()
    }

    /// Every task among `node`'s ancestors has run.
    pub(super) fn check_done(&self, node: Option<usize>, what: &str) -> Result<(), TestCaseError> {
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
    pub(super) fn guarded<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
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
    pub(super) fn signal_reader(&self) -> impl Fn() -> Vec<u32> + Send + 'static {
        let signals: Vec<Option<Flag>> = self.instances.iter().map(|x| x.signal.clone()).collect();
        move || {
            signals
                .iter()
                .map(|f| f.as_ref().map_or(0, Flag::get))
                .collect()
        }
    }

    /// The instance's device and host buffers for `Copy`, allocated at first use.
    pub(super) fn buffers(&mut self, instance: usize) -> Result<(), TestCaseError> {
        if self.instances[instance].buffers.is_none() {
            let stream = self.stream(instance).clone();
            let dev = api("alloc", stream.alloc(COPY_LEN))?;
            let host = api("alloc_host", stream.alloc_host(COPY_LEN))?;
            self.instances[instance].buffers = Some((dev, Arc::new(host)));
        }
        Ok(())
    }

    pub(super) fn task_id(&mut self) -> u32 {
        let id = self.next_task;
        self.next_task += 1;
        id
    }

    /// Checks a query answer: false while the work depends on a closed gate; when true, all the
    /// work has run.
    pub(super) fn check_query(
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
    pub(super) fn captured_wait(
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
}
