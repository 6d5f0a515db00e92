//! Host buffers shared by a program's streams: host functions given them
//! (`Stream::launch_host_func_with`) and copies of them, in the model.
//!
//! The contract: a host function given a buffer runs after every use of the buffer submitted
//! before it, on any stream, and copies of the buffer submitted after it run after it. So
//! every use of a shared buffer is ordered against every host function given it, in
//! submission order; copies are ordered among themselves only as streams order them. The
//! program issues a copy only where the model already orders it after the buffer's earlier
//! copies (else it is skipped: two unordered copies race, as in CUDA), so every use of a shared
//! buffer is ordered, and each reader must see exactly the last write submitted before it.

use super::*;

/// The shared host buffers of a run and the uses submitted on them.
#[derive(Default)]
pub(super) struct SharedBuffers {
    /// Each buffer (made at first use, on the place of the stream slot of its number) and
    /// whether host functions may be given it there (`host_func_buffers`).
    buffers: [Option<Made>; SHARED],
    /// The value the last write submitted on each buffer wrote (0: none yet).
    value: [u8; SHARED],
    /// The last value written by any write.
    last: u8,
    /// The nodes of the host functions given each buffer, in submission order.
    given: [Vec<usize>; SHARED],
    /// The copy nodes of each buffer, each with whether it writes the buffer.
    copies: [Vec<(usize, bool)>; SHARED],
    /// Task id → the value of each buffer it must see, in the order it was given them.
    pub(super) expect: HashMap<u32, Vec<u8>>,
}

/// A shared buffer, its place, and whether host functions may be given it there.
#[derive(Clone)]
struct Made {
    host: Arc<HostBuffer>,
    place: Place,
    given_ok: bool,
}

impl SharedBuffers {
    /// [`Op::DropShared`]: forgets buffer `buffer` (its pending uses keep it alive); the next
    /// use makes a new one, whose uses are ordered only among themselves.
    pub(super) fn drop_buffer(&mut self, buffer: usize) {
        if let Some(made) = self.buffers[buffer].take() {
            drop(made);
            self.value[buffer] = 0;
            self.given[buffer].clear();
            self.copies[buffer].clear();
        }
    }

    /// A value no write wrote before.
    fn next_value(&mut self) -> u8 {
        self.last += 1;
        self.last
    }
}

thread_local! {
    /// Readers of shared buffers checked on this thread (a model run checks its programs on
    /// the thread that runs it).
    static CHECKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Readers of shared buffers checked on this thread so far.
pub(super) fn checked() -> u64 {
    CHECKED.with(|c| c.get())
}

/// Counts a reader checked.
pub(super) fn count_checked() {
    CHECKED.with(|c| c.set(c.get() + 1));
}

/// A shared buffer's copy that may be issued: the buffer and the copy's predecessors.
type SharedCopy = (Arc<HostBuffer>, Vec<Pred>);

/// The first bytes of a buffer a host function was given.
fn first(bytes: &[u8]) -> [u8; COPY_LEN] {
    let mut out = [0; COPY_LEN];
    out.copy_from_slice(&bytes[..COPY_LEN]);
    out
}

impl Run<'_> {
    /// Shared buffer `buffer`, made at first use on the place of stream slot `buffer` (across
    /// backends: one on each place), and whether host functions may be given it.
    fn shared_buffer(&mut self, buffer: usize) -> Result<Made, TestCaseError> {
        if let Some(made) = &self.shared.buffers[buffer] {
            return Ok(made.clone());
        }
        let place = self.place_of(buffer);
        // Made with a stream dropped at once: the buffer outlives it.
        let stream = api("Stream::new", Stream::new(place))?;
        let host = api("alloc_host", stream.alloc_host(COPY_LEN))?;
        api("HostBuffer::write", host.write(0, &[0; COPY_LEN]))?;
        let made = Made {
            host: Arc::new(host),
            place: place.clone(),
            given_ok: caps(place).host_func_buffers,
        };
        self.shared.buffers[buffer] = Some(made.clone());
        Ok(made)
    }

    /// Every use of `buffer` submitted so far (a host function given it waits for each).
    fn shared_uses(&self, buffer: usize) -> impl Iterator<Item = usize> + '_ {
        let copies = self.shared.copies[buffer].iter().map(|&(node, _)| node);
        self.shared.given[buffer].iter().copied().chain(copies)
    }

    /// Whether a copy of `buffer` submitted now on `instance`, after `preds`, is ordered after
    /// each earlier copy of the buffer it could race with (every one where it `writes`, the
    /// writing ones where it reads).
    fn copy_ordered(&self, instance: usize, preds: &[Pred], buffer: usize, writes: bool) -> bool {
        let mut before = BTreeSet::new();
        let heads = self.instances[instance]
            .last
            .into_iter()
            .chain(preds.iter().filter_map(|p| match *p {
                Pred::Node(n) => Some(n),
                Pred::Gate { .. } => None,
            }));
        for head in heads {
            before.extend(self.ancestors(head));
        }
        self.shared.copies[buffer]
            .iter()
            .filter(|&&(_, wrote)| writes || wrote)
            .all(|(node, _)| before.contains(node))
    }

    /// [`Op::Given`]: a host function on stream slot `slot` given the shared buffers `which`
    /// picks. Skipped where a buffer's place has no `host_func_buffers`, or where one is of
    /// another backend and the stream's place has no waits across backends.
    pub(super) fn given(
        &mut self,
        slot: usize,
        which: u8,
        reversed: bool,
    ) -> Result<(), TestCaseError> {
        let i = self.instance(slot)?;
        let mut picked: Vec<usize> = (0..SHARED).filter(|b| which & (1 << b) != 0).collect();
        if reversed {
            picked.reverse();
        }
        let place = self.stream(i).place().clone();
        let foreign_waits = self.stream(i).capabilities().foreign_waits;
        let mut buffers = Vec::new();
        for &b in &picked {
            let made = self.shared_buffer(b)?;
            if !made.given_ok || (made.place != place && !foreign_waits) {
                return Ok(());
            }
            buffers.push(made.host);
        }
        let id = self.task_id();
        let expect: Vec<u8> = picked.iter().map(|&b| self.shared.value[b]).collect();
        let writes: Vec<u8> = picked.iter().map(|_| self.shared.next_value()).collect();
        let (seen, log, values) = (self.signal_reader(), self.log.clone(), writes.clone());
        let given: Vec<&HostBuffer> = buffers.iter().map(|b| b.as_ref()).collect();
        api(
            "launch_host_func_with",
            self.stream(i).launch_host_func_with(&given, move |bytes| {
                let signals = seen();
                let read = bytes.iter().map(|b| first(b)).collect();
                for (bytes, &value) in bytes.iter_mut().zip(&values) {
                    bytes[..COPY_LEN].fill(value);
                }
                log.push((id, signals, Saw::Shared(read)));
            }),
        )?;
        let preds: Vec<Pred> = picked
            .iter()
            .flat_map(|&b| self.shared_uses(b).collect::<Vec<_>>())
            .map(Pred::Node)
            .collect();
        let n = self.push(i, preds, Some(id), None);
        for (&b, &value) in picked.iter().zip(&writes) {
            self.shared.value[b] = value;
            self.shared.given[b].push(n);
        }
        self.shared.expect.insert(id, expect);
        Ok(())
    }

    /// The shared buffer's copy on `instance`, if it may be issued: the stream is on the
    /// buffer's place and the copy is ordered after the earlier copies it could race with.
    /// Answers the buffer and the copy's predecessors in the model (the host functions given
    /// the buffer before it).
    fn shared_copy(
        &mut self,
        instance: usize,
        buffer: usize,
        writes: bool,
    ) -> Result<Option<SharedCopy>, TestCaseError> {
        let made = self.shared_buffer(buffer)?;
        if made.place != *self.stream(instance).place() {
            return Ok(None);
        }
        let preds: Vec<Pred> = self.shared.given[buffer]
            .iter()
            .copied()
            .map(Pred::Node)
            .collect();
        if !self.copy_ordered(instance, &preds, buffer, writes) {
            return Ok(None);
        }
        self.buffers(instance)?;
        Ok(Some((made.host, preds)))
    }

    /// [`Op::SharedWrite`].
    pub(super) fn shared_write(&mut self, slot: usize, buffer: usize) -> Result<(), TestCaseError> {
        let i = self.instance(slot)?;
        let Some((host, preds)) = self.shared_copy(i, buffer, true)? else {
            return Ok(());
        };
        let value = self.shared.next_value();
        let stream = self.stream(i).clone();
        let dev = &self.instances[i].buffers.as_ref().expect("made").0;
        api(
            "copy_from_host",
            stream.copy_from_host(dev, 0, &[value; COPY_LEN]),
        )?;
        api(
            "copy_device_to_host into a shared buffer",
            stream.copy_device_to_host(&host, 0, dev, 0, COPY_LEN),
        )?;
        let n = self.push(i, preds, None, None);
        self.shared.value[buffer] = value;
        self.shared.copies[buffer].push((n, true));
        Ok(())
    }

    /// [`Op::SharedRead`]: also skipped where host functions may not be given the buffer's
    /// place's buffers (the observer is one).
    pub(super) fn shared_read(&mut self, slot: usize, buffer: usize) -> Result<(), TestCaseError> {
        let i = self.instance(slot)?;
        if !self.shared_buffer(buffer)?.given_ok {
            return Ok(());
        }
        let Some((host, preds)) = self.shared_copy(i, buffer, false)? else {
            return Ok(());
        };
        let stream = self.stream(i).clone();
        if self.instances[i].observer.is_none() {
            self.instances[i].observer = Some(api("alloc_host", stream.alloc_host(COPY_LEN))?);
        }
        let id = self.task_id();
        let (seen, log) = (self.signal_reader(), self.log.clone());
        let instance = &self.instances[i];
        let dev = &instance.buffers.as_ref().expect("made").0;
        let observer = instance.observer.as_ref().expect("made");
        api(
            "copy_host_to_device from a shared buffer",
            stream.copy_host_to_device(dev, 0, &host, 0, COPY_LEN),
        )?;
        api(
            "copy_device_to_host",
            stream.copy_device_to_host(observer, 0, dev, 0, COPY_LEN),
        )?;
        api(
            "launch_host_func_with (the observer)",
            stream.launch_host_func_with(&[observer], move |bytes| {
                let signals = seen();
                log.push((id, signals, Saw::Shared(vec![first(bytes[0])])));
            }),
        )?;
        let n = self.push(i, preds, None, None);
        self.shared.copies[buffer].push((n, false));
        self.push(i, vec![], Some(id), None);
        self.shared
            .expect
            .insert(id, vec![self.shared.value[buffer]]);
        Ok(())
    }
}
