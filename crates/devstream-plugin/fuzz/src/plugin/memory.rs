//! The instance's memory: device and host allocations and the synchronous and stream-ordered
//! copies, each checked against the memory it gave out.

use super::*;

impl Instance {
    pub(super) fn allocate(
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

    pub(super) fn deallocate(
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

    pub(super) fn copy_sync(
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

    pub(super) fn copy_async(
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
}
