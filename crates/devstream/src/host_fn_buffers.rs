//! `Stream::launch_host_func_with`: a host function given host buffers of any backend, ordered
//! against the buffers' other uses by waits. The launch is `devstream_core::host_fn_launch`'s,
//! written once for every stream; the facade's handles take part in it here.

use crate::dispatch::HostBufferApi;
use crate::stream::StreamApi;
use crate::{HostBuffer, Stream};
use devstream_core::foreign::BackendKey;
use devstream_core::host_fn_access::HostFnAccess;
use devstream_core::host_fn_launch::{self, GivenBuffer, HostFnStream};
use devstream_core::{Capabilities, Completion, HostFn, Place, Result};

impl HostFnStream for Stream {
    fn place(&self) -> &Place {
        StreamApi::place(self)
    }
    fn capabilities(&self) -> Capabilities {
        StreamApi::capabilities(self)
    }
    fn is_capturing(&self) -> Result<bool> {
        StreamApi::is_capturing(self)
    }
    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        StreamApi::wait_completion(self, awaited)
    }
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        StreamApi::launch_host_func(self, f)
    }
}

impl GivenBuffer for HostBuffer {
    fn given_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        HostBufferApi::host_fn_access(self, runner)
    }
}

/// See `Stream::launch_host_func_with`.
pub(crate) fn launch(
    stream: &Stream,
    buffers: &[&HostBuffer],
    f: impl FnMut(&mut [&mut [u8]]) + Send + 'static,
) -> Result<()> {
    let given: Vec<&dyn GivenBuffer> = buffers.iter().map(|b| *b as &dyn GivenBuffer).collect();
    host_fn_launch::launch_with(stream, &given, f)
}
