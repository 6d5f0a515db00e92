//! Waits on another backend's work (`DeviceStream::wait_completion`): the stream is held at a
//! flag of its own, which the awaited backend's completion path sets through
//! `devstream_core::foreign::relay`; a task behind the flag wait reports the awaited work's
//! result as this stream's error. No worker blocks: the held stream is parked like any stream
//! at a flag wait, and the flag's store wakes it.
//!
//! A capturing stream takes the same two operations into its graph (a flag wait and the
//! report, both `CommonOp`s): the flag is set once, when the awaited work completes, and stays
//! set, so each replay waits for that work until it completed and passes at once afterwards.

use crate::flag::CpuFlag;
use crate::scheduler::{CommonOp, Op};
use crate::stream::StreamInner;
use devstream_core::{foreign, Completion, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Queues (or, on a capturing stream, captures) on `stream` a wait for `awaited` and the report
/// of its result.
pub(crate) fn wait_completion(stream: &Arc<StreamInner>, awaited: Completion) -> Result<()> {
    let gate = CpuFlag::new().0;
    let released = Arc::clone(&gate);
    let outcome = foreign::relay(awaited, move |_| released.store(1));
    if stream.capturing.load(Ordering::Acquire) {
        let wait = CommonOp::WaitFlag {
            flag: gate,
            value: 1,
        };
        stream.submit(Op::Common(wait), "wait_completion")?;
        return stream.submit(Op::Common(CommonOp::Foreign(outcome)), "wait_completion");
    }
    stream.queue("wait_completion", |pusher| {
        if !gate.reached(1) {
            pusher.push(Op::Common(CommonOp::WaitFlag {
                flag: gate,
                value: 1,
            }));
        }
        pusher.push(Op::Common(CommonOp::Foreign(outcome)));
    })
}
