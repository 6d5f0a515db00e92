//! The instance's answers to the table's device, stream, callback and event calls: draws of
//! the behaviour, handle bookkeeping and its checks, and the streams' task queues.

use super::*;

impl Instance {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
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

    pub(super) fn born(&self) -> Born {
        Born::now(self.iteration.load(Ordering::SeqCst))
    }

    pub(super) fn behaviour(&self) -> Behaviour {
        *self.behaviour.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn random(&self, call: Call, salt: u64) -> u64 {
        let behaviour = self.behaviour();
        let k = self.draws[call as usize].fetch_add(1, Ordering::Relaxed);
        splitmix(behaviour.seed ^ ((call as u64) << 56) ^ (salt << 40) ^ k)
    }

    pub(super) fn draw(&self, call: Call) -> Draw {
        let behaviour = self.behaviour();
        if behaviour.rate == 0 || behaviour.calls & (1 << call as u32) == 0 {
            return None;
        }
        let r = self.random(call, 0);
        let draw = ((r & 0xff) < u64::from(behaviour.rate)).then_some((r >> 8) as u32);
        if let Some(v) = draw {
            crate::harness::note(|| format!("plug-in {call:?} misbehaves (draw {v})"));
        }
        draw
    }

    /// Re-enters devstream through the harness's hook, as the behaviour says (never nested more
    /// than twice on one thread).
    pub(super) fn maybe_reenter(&self, call: Call) {
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
        crate::harness::note(|| format!("plug-in {call:?} re-enters devstream (draw {})", r >> 8));
        hook((r >> 8) as u32);
        REENTERED.with(|d| d.set(depth));
    }

    pub(super) fn fresh(&self, state: &mut State) -> usize {
        state.next_handle += 0x10;
        state.next_handle
    }

    pub(super) fn give(state: &mut State, kind: Kind, handle: usize) {
        if handle != 0 {
            *state.given.entry((kind, handle)).or_insert(0) += 1;
        }
    }

    /// Checks that devstream passes a handle it was given as `kind` (null is always allowed).
    pub(super) fn check(state: &State, kind: Kind, handle: usize, call: &str) {
        if handle != 0 && state.given.get(&(kind, handle)).copied().unwrap_or(0) == 0 {
            violation!(
                "{call}: devstream passed {handle:#x} as a {kind:?}: never given out as one, or \
                 destroyed as often as it was given out"
            );
        }
    }

    /// [`Self::check`] and one fewer outstanding: a destroy.
    pub(super) fn take(state: &mut State, kind: Kind, handle: usize, call: &str) {
        Self::check(state, kind, handle, call);
        if handle != 0 {
            let count = state.given.get_mut(&(kind, handle)).expect("checked");
            *count -= 1;
            if *count == 0 {
                state.given.remove(&(kind, handle));
            }
        }
    }

    pub(super) fn check_device(&self, device: C_Device, call: &str) {
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
    pub(super) fn check_zeroed<T>(out: *mut *mut T, call: &str) {
        if out.is_null() {
            violation!("{call}: a null out-parameter");
        }
        // SAFETY: devstream's out-parameter.
        if !unsafe { *out }.is_null() {
            violation!("{call}: the out-parameter was not zeroed");
        }
    }

    /// One more reference to the object of `kind` numbered `handle`, if the plug-in keeps one
    /// (a handle given out again counts as that object once more).
    fn add_ref(state: &mut State, kind: Kind, handle: usize) {
        let refs = match kind {
            Kind::Stream => state.streams.get_mut(&handle).map(|o| &mut o.refs),
            Kind::Event => state.events.get_mut(&handle).map(|o| &mut o.refs),
            Kind::Graph => state.graphs.get_mut(&handle).map(|o| &mut o.refs),
            Kind::Exec => state.execs.get_mut(&handle).map(|o| &mut o.refs),
            Kind::Device | Kind::Host => None,
        };
        if let Some(refs) = refs {
            *refs += 1;
        }
    }

    /// Writes a handle of `kind` for a create call, misbehaving as `draw` says. `make` creates a
    /// fresh object and returns its handle. Answers the status.
    pub(super) fn write_handle<T>(
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
                    Self::add_ref(state, kind, handle);
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
                    // The number may also be a live object of this kind (given out as both):
                    // it is then that object once more, as in `3`.
                    Self::add_ref(state, kind, handle);
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
    pub(super) fn odd_status(v: u32) -> (bool, C_Status) {
        match v % 4 {
            0 => (false, C_ERROR),
            1 => (true, C_ERROR),
            2 => (false, C_INTERNAL_ERROR),
            _ => (true, C_WARNING),
        }
    }

    // ---- device management ----

    pub(super) fn initialize(&self) -> C_Status {
        if self.config.initialize_fails {
            C_ERROR
        } else {
            C_SUCCESS
        }
    }

    pub(super) fn finalize(&self) -> C_Status {
        C_SUCCESS
    }

    pub(super) fn init_device(&self, device: C_Device) -> C_Status {
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

    pub(super) fn deinit_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "deinit_device");
        C_SUCCESS
    }

    pub(super) fn set_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "set_device");
        match self.draw(Call::SetDevice) {
            None => C_SUCCESS,
            Some(v) => Self::odd_status(v).1,
        }
    }

    pub(super) fn get_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "get_device");
        C_SUCCESS
    }

    pub(super) fn get_device_count(&self, count: *mut usize) -> C_Status {
        let n = match self.config.devices {
            Devices::CountFails => return C_ERROR,
            Devices::Huge => 1 << 40,
            devices => ids_of(devices).len(),
        };
        // SAFETY: devstream's out-parameter.
        unsafe { *count = n };
        C_SUCCESS
    }

    pub(super) fn get_device_list(&self, list: *mut usize) -> C_Status {
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

    pub(super) fn create_stream(&self, device: C_Device, out: *mut C_Stream) -> C_Status {
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

    pub(super) fn destroy_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
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
    pub(super) fn stream<'a>(
        state: &'a mut State,
        handle: usize,
        call: &str,
    ) -> Option<&'a mut StreamObj> {
        Self::check(state, Kind::Stream, handle, call);
        state.streams.get_mut(&handle).filter(|s| !s.dead)
    }

    /// Puts `task` on the stream (or into its capture as a node).
    pub(super) fn push(&'static self, state: &mut State, handle: usize, task: Task) {
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

    pub(super) fn drain(&'static self, handle: usize) {
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

    pub(super) fn execute(&'static self, task: Task) {
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

    pub(super) fn run_node(&self, node: &Node) {
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
    pub(super) fn copy_allowed(
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

    pub(super) fn within(memory: &BTreeMap<usize, Memory>, start: usize, len: usize) -> bool {
        memory
            .range(..=start)
            .next_back()
            .is_some_and(|(&base, m)| {
                start
                    .checked_add(len)
                    .is_some_and(|end| end <= base + m.len)
            })
    }

    pub(super) fn freed(state: &State, kind: Kind, start: usize, len: usize) -> bool {
        state.freed.iter().any(|f| {
            f.kind == kind
                && start < f.base.saturating_add(f.len)
                && f.base < start.saturating_add(len)
        })
    }

    pub(super) fn query_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
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

    pub(super) fn invalidate(state: &mut State, id: u64) {
        if let Some(capture) = state.captures.get_mut(&id) {
            capture.invalidated = true;
        }
    }

    pub(super) fn synchronize_stream(&self, device: C_Device, stream: C_Stream) -> C_Status {
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

    pub(super) fn synchronize_device(&self, device: C_Device) -> C_Status {
        self.check_device(device, "synchronize_device");
        C_SUCCESS
    }

    pub(super) fn add_callback(
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
        if let Some((mode, v)) = odd {
            crate::harness::note(|| format!("plug-in delivers a callback oddly ({mode:#x}, {v})"));
        }
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

    pub(super) fn create_event(&self, device: C_Device, out: *mut C_Event) -> C_Status {
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

    pub(super) fn record_event(
        &'static self,
        device: C_Device,
        stream: C_Stream,
        event: C_Event,
    ) -> C_Status {
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

    pub(super) fn destroy_event(&self, device: C_Device, event: C_Event) -> C_Status {
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
    pub(super) fn captured_event_refused(state: &mut State, event: usize) -> bool {
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

    pub(super) fn query_event(&self, device: C_Device, event: C_Event) -> C_Status {
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

    pub(super) fn synchronize_event(&self, device: C_Device, event: C_Event) -> C_Status {
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

    pub(super) fn stream_wait_event(
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
}
