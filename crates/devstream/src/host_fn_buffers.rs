//! `Stream::launch_host_func_with`: a host function given host buffers of any backend, ordered
//! against the buffers' other uses by waits (`devstream_core::host_fn_access`).

use crate::dispatch::HostBufferApi;
use crate::stream::StreamApi;
use crate::{HostBuffer, Stream};
use devstream_core::foreign::{self, BackendKey};
use devstream_core::host_fn_access::{self, HostBytes, HostFnAccess, HostFnUse, Submission};
use devstream_core::{Completion, Error, Result};

/// Registers a use of every buffer, has `stream` wait for the uses submitted before, and
/// queues `f` behind them (see `Stream::launch_host_func_with`).
pub(crate) fn launch(
    stream: &Stream,
    buffers: &[&HostBuffer],
    mut f: impl FnMut(&mut [&mut [u8]]) + Send + 'static,
) -> Result<()> {
    if !StreamApi::capabilities(stream).foreign_waits {
        return Err(Error::unsupported(
            "launch_host_func_with",
            StreamApi::place(stream),
        ));
    }
    if StreamApi::is_capturing(stream)? {
        return Err(Error::capture(
            "launch_host_func_with",
            "a host function given host buffers is ordered against their copies as they are \
             submitted, which a graph's replays are not: launch it outside the capture",
        ));
    }
    let runner = BackendKey::of(StreamApi::place(stream));
    // Each access is registered as it is made: one that fails drops those made before it,
    // which ends their uses at once (nothing was submitted for them). Several buffers under
    // the registration lock, so that host functions given the same buffers register on them
    // in one order (`devstream_core::host_fn_access`, "Registration order is submission
    // order"); one buffer's registration is one step anyway.
    let registering = (buffers.len() > 1).then(host_fn_access::registration);
    let mut accesses: Vec<HostFnAccess> = Vec::with_capacity(buffers.len());
    for buffer in buffers {
        let access = HostBufferApi::host_fn_access(*buffer, runner)?;
        if accesses
            .iter()
            .any(|a| a.registered.buffer_id() == access.registered.buffer_id())
        {
            return Err(Error::InvalidArgument(
                "launch_host_func_with: a host buffer is given twice (the host function would \
                 hold two mutable views of its bytes)"
                    .into(),
            ));
        }
        accesses.push(access);
    }
    drop(registering);
    // Queued after the host functions given these buffers before it (on a stream they share,
    // behind them), and the copies and host functions that wait for this one only once it is
    // queued: the submissions are noted done when they drop, at the end of this function.
    for access in &mut accesses {
        access.registered.wait_earlier_queued();
        if let Some(copies_queued) = access.before_queued.take() {
            copies_queued();
        }
    }
    let _submissions: Vec<Submission> = accesses
        .iter()
        .map(|access| access.registered.submission())
        .collect();
    let mut uses: Vec<HostFnUse> = Vec::with_capacity(accesses.len());
    let mut bytes: Vec<Box<dyn HostBytes>> = Vec::with_capacity(accesses.len());
    let mut before = Vec::new();
    for access in accesses {
        before.extend(access.before);
        uses.push(access.registered);
        bytes.push(access.bytes);
    }
    for (awaited, owner) in before {
        wait_ordered(stream, owner, runner, awaited)?;
    }
    let mut uses = Some(uses);
    StreamApi::launch_host_func(
        stream,
        Box::new(move || {
            // Blocking calls made by `f` know which backend's host function they run in.
            let _running = foreign::enter_host_fn(runner);
            // Runs once; a graph never holds it (refused above while capturing).
            let Some(uses) = uses.take() else {
                return;
            };
            // Running, so queued: copies and host functions given these buffers that wait for
            // it from inside it (run inline by a synchronous plug-in, before the submission
            // below returned) need not wait for the submission's end.
            for used in &uses {
                used.mark_queued();
            }
            // Every buffer's view at once (each accessor borrowed apart): held, with the locks
            // some backends' copies take while they run, until `f` returns.
            let mut views: Vec<_> = bytes.iter_mut().map(|b| b.view()).collect();
            let mut slices: Vec<&mut [u8]> = views.iter_mut().map(|v| &mut ***v).collect();
            f(&mut slices);
            drop(slices);
            drop(views);
            drop(uses);
        }),
    )
}

/// `stream` waits for `awaited` (a use of a buffer by work of `owner`) for ordering only: an
/// error that use ended with stays on its own stream. Registered as a pending wait of the
/// runner's backend on the owner's while it is pending (`devstream_core::foreign`, "Host
/// functions").
fn wait_ordered(
    stream: &Stream,
    owner: BackendKey,
    runner: BackendKey,
    mut awaited: Completion,
) -> Result<()> {
    if foreign::ready_now(&mut awaited).is_some() {
        return Ok(());
    }
    let pending = foreign::PendingWait::register(owner, runner);
    let (ordered, completer) = Completion::pending();
    foreign::relay(awaited, move |_result| {
        drop(pending);
        completer.complete(Ok(()));
    });
    StreamApi::wait_completion(stream, ordered)
}
