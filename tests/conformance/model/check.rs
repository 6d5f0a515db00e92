//! The end of a run: every task ran once, after its predecessors, and saw what the model says.

use super::*;

impl Run<'_> {
    /// Releases everything, waits for all work (dropped streams' too) and checks the log.
    pub(super) fn finish(&mut self) -> Result<(), TestCaseError> {
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
    pub(super) fn check_hostile(
        &self,
        entries: &[Entry],
        position: &HashMap<u32, usize>,
    ) -> Result<(), TestCaseError> {
        for (at, (id, _, saw)) in entries.iter().enumerate() {
            match saw {
                Saw::Nothing | Saw::Launcher | Saw::NotLaunched => {}
                Saw::Shared(read) => {
                    let want: Vec<[u8; COPY_LEN]> = self.shared.expect[id]
                        .iter()
                        .map(|&value| [value; COPY_LEN])
                        .collect();
                    ensure!(
                        *read == want,
                        "task {id} saw the shared host buffers it was given (or its copy of one) \
                         as {read:?}, but the last writes submitted before it wrote {want:?} \
                         (log {:?})",
                        self.logged_ids()
                    );
                    super::shared::count_checked();
                }
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
