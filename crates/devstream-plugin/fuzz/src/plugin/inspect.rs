//! What the harness asks an instance at an iteration's end: held callbacks released, idleness,
//! the objects still alive.

use super::*;

impl Instance {
    /// Runs the callbacks held as "never" (on pool threads: they may block).
    pub fn release_never(&self) {
        let never = std::mem::take(&mut self.state().never);
        for pending in never {
            pool::spawn(move || pending.call());
        }
    }

    /// The streams with work queued or running (their tasks in order) and the events recorded
    /// but not done: what a hang or a violation report shows of the plug-in's side.
    pub fn describe_queues(&self) -> String {
        let state = self.state();
        let mut out: Vec<String> = Vec::new();
        for (handle, stream) in &state.streams {
            if !stream.running && stream.queue.is_empty() {
                continue;
            }
            let tasks: Vec<String> = stream
                .queue
                .iter()
                .map(|task| match task {
                    Task::Node(_) => "node".to_owned(),
                    Task::Callback(pending, delivery) => {
                        format!("callback {:#x} ({delivery:?})", pending.data)
                    }
                    Task::Record { event, generation } => {
                        format!("record {event:#x} #{generation}")
                    }
                    Task::Launch(_) => "graph launch".to_owned(),
                })
                .collect();
            out.push(format!(
                "stream {handle:#x} (running: {}, capture: {:?}): [{}]",
                stream.running,
                stream.capture,
                tasks.join(", ")
            ));
        }
        for (handle, event) in &state.events {
            if event.done < event.recorded {
                out.push(format!(
                    "event {handle:#x} recorded {} done {}",
                    event.recorded, event.done
                ));
            }
        }
        out.push(format!("callbacks held as never: {}", state.never.len()));
        out.join("\n  ")
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
        let objects = objects(&state);
        let count = |kind: &str| {
            let made_now = |(k, _, born): &&(_, _, &Born)| *k == kind && born.iteration == now;
            objects.iter().filter(made_now).count()
        };
        PluginLive {
            streams: count("stream"),
            events: count("event"),
            graphs: count("graph"),
            execs: count("exec"),
            device: count("device memory"),
            host: count("host memory"),
        }
    }

    /// The objects made during this iteration and alive now, described.
    pub fn describe_live(&self) -> String {
        let state = self.state();
        let now = self.iteration.load(Ordering::SeqCst);
        let described: Vec<String> = objects(&state)
            .into_iter()
            .filter(|(_, _, born)| born.iteration == now)
            .map(|(kind, handle, born)| {
                format!("{kind} {handle:#x} made on thread {:?}", born.thread)
            })
            .collect();
        described.join("; ")
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

/// Every object of `state`: its kind (as the harness names it), handle and birth.
fn objects(state: &State) -> Vec<(&'static str, usize, &Born)> {
    let mut all = Vec::new();
    all.extend(state.streams.iter().map(|(h, o)| ("stream", *h, &o.born)));
    all.extend(state.events.iter().map(|(h, o)| ("event", *h, &o.born)));
    all.extend(state.graphs.iter().map(|(h, o)| ("graph", *h, &o.born)));
    all.extend(state.execs.iter().map(|(h, o)| ("exec", *h, &o.born)));
    all.extend(
        state
            .device
            .iter()
            .map(|(h, o)| ("device memory", *h, &o.born)),
    );
    all.extend(state.host.iter().map(|(h, o)| ("host memory", *h, &o.born)));
    all
}
