//! One operation of a program: submitted, and added to the model.

use super::*;

impl Run<'_> {
    pub(super) fn step(&mut self, op: &Op, streams: usize) -> Result<(), TestCaseError> {
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
            Op::Given {
                stream,
                which,
                reversed,
            } => self.given(slot(stream), which, reversed)?,
            Op::SharedWrite { stream, buffer } => self.shared_write(slot(stream), buffer)?,
            Op::SharedRead { stream, buffer } => self.shared_read(slot(stream), buffer)?,
            Op::DropShared(buffer) => self.shared.drop_buffer(buffer),
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
}
