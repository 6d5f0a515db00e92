//! Emulated capture: while a stream captures, its operations are recorded (with the buffers,
//! bind groups and bytes they need) instead of encoded; `WgpuGraph::launch` re-encodes them on
//! any stream of the device, every time.

use crate::buffer::{BufferInner, HostInner};
use crate::device::DeviceShared;
use crate::event::WgpuEvent;
use crate::flag::FlagInner;
use crate::kernel::KernelInner;
use crate::stream::WgpuStream;
use devstream_core::{CaptureMode, DeviceGraph, Error, HostFn, Place, Result};
use std::sync::{Arc, Mutex};

/// A host function shared by every launch of a graph (it runs once per launch).
pub(crate) type SharedHostFn = Arc<Mutex<HostFn>>;

/// One recorded operation.
#[derive(Clone)]
pub(crate) enum Op {
    Fill {
        dst: Arc<BufferInner>,
        offset: u64,
        len: u64,
        value: u8,
    },
    CopyFromHost {
        dst: Arc<BufferInner>,
        offset: u64,
        data: Arc<[u8]>,
    },
    CopyHostToDevice {
        dst: Arc<BufferInner>,
        dst_offset: u64,
        src: Arc<HostInner>,
        src_offset: usize,
        len: u64,
    },
    CopyDeviceToHost {
        dst: Arc<HostInner>,
        dst_offset: usize,
        src: Arc<BufferInner>,
        src_offset: u64,
        len: u64,
    },
    CopyDeviceToDevice {
        dst: Arc<BufferInner>,
        dst_offset: u64,
        src: Arc<BufferInner>,
        src_offset: u64,
        len: u64,
    },
    Dispatch {
        kernel: Arc<KernelInner>,
        bind_group: wgpu::BindGroup,
        workgroups: [u32; 3],
    },
    HostFunc(SharedHostFn),
    Record(WgpuEvent),
    WaitEvent(WgpuEvent),
    WaitStream(WgpuStream),
    WaitFlag(Arc<FlagInner>, u32),
    WriteFlag(Arc<FlagInner>, u32),
    Graph(Arc<Vec<Op>>),
}

/// A stream's capture in progress.
pub(crate) struct CaptureState {
    pub(crate) mode: CaptureMode,
    pub(crate) ops: Vec<Op>,
    /// Why the capture was invalidated, if it was.
    pub(crate) invalid: Option<String>,
}

impl CaptureState {
    pub(crate) fn new(mode: CaptureMode) -> CaptureState {
        CaptureState {
            mode,
            ops: Vec::new(),
            invalid: None,
        }
    }

    /// Appends an operation, unless the capture was invalidated.
    pub(crate) fn push(&mut self, op: Op) -> Result<()> {
        match &self.invalid {
            Some(reason) => Err(Error::capture(
                "capture",
                format!("the capture was {reason}; end it with end_capture"),
            )),
            None => {
                self.ops.push(op);
                Ok(())
            }
        }
    }
}

/// Work captured from a wgpu stream, replayed by re-encoding it on a stream of the same device.
///
/// Host functions captured run once per launch; events recorded or waited on during capture
/// are recorded or waited on again at each launch; bytes given to `copy_from_host` during
/// capture were copied then and are uploaded at each launch.
#[derive(Clone)]
pub struct WgpuGraph {
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) ops: Arc<Vec<Op>>,
    pub(crate) mode: CaptureMode,
}

impl std::fmt::Debug for WgpuGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuGraph")
            .field("place", &self.device.place)
            .field("ops", &self.ops.len())
            .field("mode", &self.mode)
            .finish()
    }
}

impl WgpuGraph {
    /// The number of recorded operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing was captured.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl DeviceGraph for WgpuGraph {
    type Stream = WgpuStream;

    fn place(&self) -> &Place {
        &self.device.place
    }

    fn launch(&self, stream: &WgpuStream) -> Result<()> {
        if !Arc::ptr_eq(&self.device, stream.device()) {
            return Err(Error::mismatch(
                "Graph::launch",
                &self.device.place,
                &stream.device().place,
            ));
        }
        stream.replay(&self.ops)
    }
}
