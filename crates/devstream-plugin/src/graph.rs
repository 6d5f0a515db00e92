//! `PluginGraph`: graphs of Rust-registered backends that capture. The plug-in ABI has no
//! capture, so a plug-in place never makes one (`begin_capture` is `Error::Unsupported`).

use crate::stream::{PluginStream, StreamRepr};
use devstream_core::{DeviceGraph, DeviceStream, Error, Place, Result};

/// Captured work of a Rust-registered custom device.
#[derive(Clone, Debug)]
pub struct PluginGraph(pub(crate) std::sync::Arc<dyn crate::custom::ErasedGraph>);

impl DeviceGraph for PluginGraph {
    type Stream = PluginStream;

    fn place(&self) -> &Place {
        self.0.place()
    }

    fn launch(&self, stream: &PluginStream) -> Result<()> {
        match &stream.0 {
            StreamRepr::Rust(s) => self.0.launch(s.as_ref()),
            StreamRepr::Abi(_) => Err(Error::mismatch(
                "Graph::launch",
                self.0.place(),
                DeviceStream::place(stream),
            )),
        }
    }
}
