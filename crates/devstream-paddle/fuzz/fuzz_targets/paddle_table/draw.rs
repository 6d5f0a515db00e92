//! What the fuzzer draws from an input: devices, handles of every kind (live, dead, forged),
//! device addresses, sizes and host pointers.

use crate::model::{Kind, Model, KINDS};
use crate::{plugin, ARENA, BUDGET};
use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::{Result as Drawn, Unstructured};
use std::ffi::c_int;
use std::ptr::null_mut;

/// The fuzzer's draws from one input.
pub(crate) struct Draw<'a, 'b> {
    pub(crate) u: &'b mut Unstructured<'a>,
}

impl Draw<'_, '_> {
    pub(crate) fn byte(&mut self) -> Drawn<u8> {
        self.u.arbitrary()
    }

    pub(crate) fn index(&mut self, len: usize) -> Drawn<usize> {
        if len == 0 {
            return Ok(0);
        }
        self.u.choose_index(len)
    }

    pub(crate) fn flag(&mut self) -> Drawn<bool> {
        self.u.arbitrary()
    }

    /// A device pointer: id 0 mostly; sometimes another id or null. Answers whether it names
    /// the device.
    pub(crate) fn device(&mut self, slot: &mut C_Device_st) -> Drawn<(C_Device, bool)> {
        Ok(match self.byte()? % 32 {
            0 => {
                slot.id = 1;
                (slot as *mut C_Device_st, false)
            }
            1 => {
                slot.id = self.u.arbitrary::<c_int>()?;
                (slot as *mut C_Device_st, slot.id == 0)
            }
            2 => (null_mut(), false),
            _ => {
                slot.id = 0;
                (slot as *mut C_Device_st, true)
            }
        })
    }

    /// Something given where a `want` is expected: live of that kind mostly, else of another
    /// kind, destroyed, forged, arbitrary or null.
    pub(crate) fn value(&mut self, model: &Model, want: Kind) -> Drawn<usize> {
        let pick = |d: &mut Self, values: Vec<usize>| -> Drawn<Option<usize>> {
            if values.is_empty() {
                return Ok(None);
            }
            let i = d.index(values.len())?;
            Ok(Some(values[i]))
        };
        let choice = self.byte()? % 16;
        let drawn = match choice {
            0..=8 => pick(self, model.live(want))?,
            9 | 10 => {
                let kind = KINDS[self.index(KINDS.len())?];
                pick(self, model.live(kind))?
            }
            11 => pick(self, model.dead.clone())?,
            12 | 13 => {
                // Forged from a live handle: one bit flipped (tag, generation, index, low).
                let all: Vec<usize> = KINDS.iter().flat_map(|&k| model.live(k)).collect();
                match pick(self, all)? {
                    Some(v) => {
                        let bit = [63, 62, 61, 60, 59, 40, 24, 23, 5, 4, 3, 0][self.index(12)?];
                        Some(v ^ (1 << bit))
                    }
                    None => None,
                }
            }
            14 => Some(self.u.arbitrary::<usize>()?),
            _ => Some(0),
        };
        Ok(drawn.unwrap_or(0))
    }

    /// A device address for `size` bytes: inside, at the end of or past a live allocation
    /// mostly, else anything [`Draw::value`] draws.
    pub(crate) fn address(&mut self, model: &Model, size: usize) -> Drawn<usize> {
        if model.device.is_empty() || self.byte()? % 4 == 0 {
            return self.value(model, Kind::Device);
        }
        let (start, len) = model.device[self.index(model.device.len())?];
        let offset = match self.byte()? % 4 {
            0 => 0,
            1 => len.saturating_sub(size),
            2 => len,
            _ => self.index(len.max(1))?,
        };
        Ok(start.wrapping_add(offset))
    }

    /// A size: small mostly, else 0, a power of two, the budget's edges, or huge.
    pub(crate) fn size(&mut self) -> Drawn<usize> {
        Ok(match self.byte()? % 16 {
            0 => 0,
            1 => 1 << self.index(20)?,
            2 => BUDGET,
            3 => BUDGET + 1,
            4 => [1 << 46, 1 << 62, usize::MAX, usize::MAX - 255][self.index(4)?],
            5 => self.u.arbitrary()?,
            _ => self.index(4097)?,
        })
    }

    /// A host pointer for `size` bytes: inside the arena (when it fits), or null. Answers
    /// whether it is non-null.
    pub(crate) fn host_pointer(&mut self, size: usize) -> Drawn<Option<usize>> {
        if self.byte()? % 8 == 0 || size > ARENA {
            return Ok(None);
        }
        let offset = self.index(ARENA - size + 1)?;
        Ok(Some(plugin().arena + offset))
    }
}

/// A stream argument: the null stream sometimes, else [`Draw::value`].
pub(crate) fn stream_arg(d: &mut Draw<'_, '_>, m: &Model) -> Drawn<usize> {
    d.value(m, Kind::Stream)
}
