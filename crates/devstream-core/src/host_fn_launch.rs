//! Launching a host function given host buffers (`Stream::launch_host_func_with`), written once
//! for every stream: the registration and ordering rules of [`crate::host_fn_access`] applied
//! to one launch.
//!
//! [`launch_with`] takes any [`HostFnStream`] (every [`DeviceStream`] is one, and so is the
//! facade's `Stream`) and buffers of any backend as [`GivenBuffer`]s (every
//! [`HostBuffer`](crate::traits::HostBuffer) is one):
//!
//! ```
//! use devstream_core::host_fn_launch::{launch_with, GivenBuffer};
//! use devstream_core::DeviceStream;
//! # fn demo<S: DeviceStream>(stream: &S, a: &S::HostBuffer, b: &S::HostBuffer) -> devstream_core::Result<()> {
//! let given: [&dyn GivenBuffer; 2] = [a, b];
//! launch_with(stream, &given, |bytes| {
//!     let (first, second) = bytes.split_at_mut(1);
//!     second[0][..4].copy_from_slice(&first[0][..4]);
//! })?;
//! # Ok(()) }
//! ```

use crate::foreign::{self, BackendKey};
use crate::host_fn_access::{self, HostBytes, HostFnAccess, HostFnUse, Submission};
use crate::{Capabilities, Completion, DeviceStream, Error, HostFn, Place, Result};

/// What [`launch_with`] needs of the stream the host function runs on.
pub trait HostFnStream {
    /// The stream's place.
    fn place(&self) -> &Place;
    /// The place's capabilities (`foreign_waits` is required).
    fn capabilities(&self) -> Capabilities;
    /// Whether the stream captures (a launch is refused then).
    fn is_capturing(&self) -> Result<bool>;
    /// Later work waits for `awaited` ([`DeviceStream::wait_completion`]).
    fn wait_completion(&self, awaited: Completion) -> Result<()>;
    /// Queues `f` ([`DeviceStream::launch_host_func`]).
    fn launch_host_func(&self, f: HostFn) -> Result<()>;
}

impl<S: DeviceStream> HostFnStream for S {
    fn place(&self) -> &Place {
        DeviceStream::place(self)
    }
    fn capabilities(&self) -> Capabilities {
        DeviceStream::capabilities(self)
    }
    fn is_capturing(&self) -> Result<bool> {
        DeviceStream::is_capturing(self)
    }
    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        DeviceStream::wait_completion(self, awaited)
    }
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        DeviceStream::launch_host_func(self, f)
    }
}

/// A host buffer that may be given to a host function ([`launch_with`]).
pub trait GivenBuffer {
    /// The buffer's [`HostBuffer::host_fn_access`](crate::traits::HostBuffer::host_fn_access)
    /// for a host function run by `runner`'s backend.
    fn given_access(&self, runner: BackendKey) -> Result<HostFnAccess>;
}

impl<T: crate::traits::HostBuffer> GivenBuffer for T {
    fn given_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        crate::traits::HostBuffer::host_fn_access(self, runner)
    }
}

/// Runs `f` on `stream` with the bytes of `buffers` (each at most once), after every use of
/// them submitted before, on any stream, while their copies submitted after it run after it
/// (`Stream::launch_host_func_with` states the contract). Registers a use of every buffer, has
/// `stream` wait for the uses submitted before, and queues `f` behind them; on an error nothing
/// is submitted.
pub fn launch_with(
    stream: &impl HostFnStream,
    buffers: &[&dyn GivenBuffer],
    mut f: impl FnMut(&mut [&mut [u8]]) + Send + 'static,
) -> Result<()> {
    if !stream.capabilities().foreign_waits {
        return Err(Error::unsupported("launch_host_func_with", stream.place()));
    }
    if stream.is_capturing()? {
        return Err(Error::capture(
            "launch_host_func_with",
            "a host function given host buffers is ordered against their copies as they are \
             submitted, which a graph's replays are not: launch it outside the capture",
        ));
    }
    let runner = BackendKey::of(stream.place());
    // Each access is registered as it is made: one that fails drops those made before it,
    // which ends their uses at once (nothing was submitted for them). Several buffers under
    // the registration lock, so that host functions given the same buffers register on them
    // in one order (`crate::host_fn_access`, "Registration order is submission order"); one
    // buffer's registration is one step anyway.
    let registering = (buffers.len() > 1).then(host_fn_access::registration);
    let mut accesses: Vec<HostFnAccess> = Vec::with_capacity(buffers.len());
    for buffer in buffers {
        let access = buffer.given_access(runner)?;
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
    stream.launch_host_func(Box::new(move || {
        // Blocking calls made by `f` know which backend's host function they run in.
        let _running = foreign::enter_host_fn(runner);
        // Runs once; a graph never holds it (refused above while capturing).
        let Some(uses) = uses.take() else {
            return;
        };
        // Running, so queued: copies and host functions given these buffers that wait for it
        // from inside it (run inline by a synchronous plug-in, before the submission above
        // returned) need not wait for the submission's end.
        for used in &uses {
            used.mark_queued();
        }
        // Every buffer's view at once (each accessor borrowed apart): held, with the locks some
        // backends' copies take while they run, until `f` returns.
        let mut views: Vec<_> = bytes.iter_mut().map(|b| b.view()).collect();
        let mut slices: Vec<&mut [u8]> = views.iter_mut().map(|v| &mut ***v).collect();
        f(&mut slices);
        drop(slices);
        drop(views);
        drop(uses);
    }))
}

/// `stream` waits for `awaited` (a use of a buffer by work of `owner`) for ordering only: an
/// error that use ended with stays on its own stream. Registered as a pending wait of the
/// runner's backend on the owner's while it is pending (`crate::foreign`, "Host functions").
fn wait_ordered(
    stream: &impl HostFnStream,
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
    stream.wait_completion(ordered)
}
