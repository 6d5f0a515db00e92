//! Groups (`group_start` / `group_end`): the nesting every engine keeps and the rule on the
//! memory of a group's calls.

use super::call::{Access, Collective, Region};
use crate::{Error, Result};

/// The memory the calls of one open group touch, for the rule every engine keeps (NCCL
/// leaves the order of a group's calls undefined, and the engines run them in any order):
/// **a call inside a group may not write memory that another call of the same group reads or
/// writes, nor read memory another call of the group writes**. Such a call is refused with
/// `Error::InvalidArgument` before anything is recorded; the group stays open with its earlier
/// calls. A call may read and write the same memory itself (in place), and calls of a group
/// may read the same memory.
///
/// ```
/// use devstream_core::comm::{CallKind, Collective, GroupMemory, Region};
/// use devstream_core::{DataType, ReduceOp};
/// let (a, b) = (Region { space: 1, offset: 0 }, Region { space: 2, offset: 0 });
/// let all_reduce = Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 2, DataType::F32);
/// let send = Collective::new(CallKind::Send { peer: 1 }, 2, DataType::F32);
/// let mut group = GroupMemory::default();
/// group.admit("all_reduce", &all_reduce.accesses(0, 2, a, a)).unwrap();
/// group.admit("send", &send.accesses(0, 2, b, b)).unwrap();
/// // Sending the buffer the all-reduce writes: refused, the group keeps its two calls.
/// assert!(group.admit("send", &send.accesses(0, 2, a, a)).is_err());
/// ```
#[derive(Debug, Default)]
pub struct GroupMemory {
    touched: Vec<(Access, &'static str)>,
}

impl GroupMemory {
    /// Records the accesses of call `op`, or refuses it (`Error::InvalidArgument`, nothing
    /// recorded) when one conflicts with an earlier call's.
    pub fn admit(&mut self, op: &'static str, accesses: &[Access]) -> Result<()> {
        for access in accesses {
            if let Some((theirs, other)) = self.touched.iter().find(|(t, _)| t.conflicts(access)) {
                let verb = |a: &Access| if a.writes { "writes" } else { "reads" };
                return Err(Error::InvalidArgument(format!(
                    "{op} inside a group {} {} bytes of a buffer that {other}, an earlier call \
                     of the same group, {}: the calls of a group run in no defined order (as in \
                     NCCL), so a call may not write memory another call of its group reads or \
                     writes; use another buffer, or end the group between the two calls (the \
                     group stays open without this call)",
                    verb(access),
                    access.len,
                    verb(theirs)
                )));
            }
        }
        self.touched.extend(accesses.iter().map(|a| (*a, op)));
        Ok(())
    }

    /// Forgets the calls (the group was closed).
    pub fn clear(&mut self) {
        self.touched.clear();
    }
}

/// One communicator's group state: how deep `group_start`s nest, the memory rule of the open
/// group ([`GroupMemory`]), and what the engine keeps for the outermost `group_end`
/// (`pending`: its calls, the buffers they hold, ...).
///
/// ```
/// use devstream_core::comm::GroupState;
/// let mut group = GroupState::<Vec<u32>>::default();
/// assert!(group.end().is_err()); // no group open
/// group.start();
/// group.start();
/// group.pending.push(7);
/// assert_eq!(group.end().unwrap(), None); // the inner group closes, nothing is issued
/// assert_eq!(group.end().unwrap(), Some(vec![7])); // the outermost hands its calls over
/// assert!(!group.is_open());
/// ```
#[derive(Debug, Default)]
pub struct GroupState<T> {
    depth: usize,
    memory: GroupMemory,
    /// What the engine keeps for the outermost `group_end`.
    pub pending: T,
}

impl<T: Default> GroupState<T> {
    /// `group_start`: opens a group (groups nest).
    pub fn start(&mut self) {
        self.depth += 1;
    }

    /// Whether a group is open.
    pub fn is_open(&self) -> bool {
        self.depth > 0
    }

    /// Inside an open group, records what `call` touches on `rank` of `nranks` (its buffers at
    /// `send` and `recv`), or refuses it by the rule of [`GroupMemory`]; outside a group,
    /// nothing.
    pub fn admit(
        &mut self,
        call: &Collective,
        rank: usize,
        nranks: usize,
        send: Region,
        recv: Region,
    ) -> Result<()> {
        if self.depth == 0 {
            return Ok(());
        }
        self.memory
            .admit(call.name(), &call.accesses(rank, nranks, send, recv))
    }

    /// `group_end`: `Error::InvalidArgument` without an open group; `None` when an inner group
    /// closed; at the outermost, what was kept for it (the group is then closed).
    pub fn end(&mut self) -> Result<Option<T>> {
        match self.depth {
            0 => Err(Error::InvalidArgument(
                "group_end without group_start".into(),
            )),
            1 => {
                self.depth = 0;
                self.memory.clear();
                Ok(Some(std::mem::take(&mut self.pending)))
            }
            _ => {
                self.depth -= 1;
                Ok(None)
            }
        }
    }

    /// Closes every open group at once (the communicator is going away), returning how many
    /// were open; what was kept stays in `pending`.
    pub fn abandon(&mut self) -> usize {
        self.memory.clear();
        std::mem::take(&mut self.depth)
    }
}
