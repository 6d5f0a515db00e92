//! The native kernel path: a code module loaded from an image (CUDA: PTX text or cubin; HIP: a
//! code object) and its kernels launched on a stream.

use crate::buffer::GpuBuffer;
use crate::device::{device_of, Device};
use crate::error::{check, map_error};
use crate::raw::{DevicePtr, Optional, RawApi, RawFunction, RawModule};
use crate::stream::GpuStream;
use crate::users::StreamUsers;
use devstream_core::{Error, Place, Result};
use std::ffi::{c_void, CString};
use std::fmt;
use std::sync::Arc;

struct ModuleInner<A: RawApi> {
    raw: RawModule,
    device: &'static Device<A>,
    users: StreamUsers<A>,
}

impl<A: RawApi> Drop for ModuleInner<A> {
    fn drop(&mut self) {
        let module = self.raw;
        self.users.release_after(self.device, move || {
            // SAFETY: every kernel launched from the module has completed.
            let _ = unsafe { A::module_unload(module) };
        });
    }
}

shared_handle! {
    /// A loaded code module (`cuModuleLoadData`). Unloaded after the last launch of its kernels
    /// completed.
    pub struct GpuModule<A: RawApi> { inner: Arc<ModuleInner<A>>, }
    debug(module) {
        place: module.inner.device.place,
        raw: module.inner.raw,
    }
}

impl<A: RawApi> GpuModule<A> {
    /// Loads `image` on `place` (CUDA: PTX text, NUL-terminated or not, or a cubin; HIP: a code
    /// object). The runtime JIT-compiles PTX for the device.
    pub fn load(place: &Place, image: &[u8]) -> Result<Self> {
        let device = device_of::<A>(place)?;
        device.require(Optional::Kernels, "load_module")?;
        device.bind()?;
        let mut owned = image.to_vec();
        if owned.last() != Some(&0) {
            owned.push(0);
        }
        // SAFETY: the context is current; `owned` is a NUL-terminated image alive during the call.
        let raw = check::<A, _>(unsafe { A::module_load_data(owned.as_ptr().cast()) })?;
        Ok(GpuModule {
            inner: Arc::new(ModuleInner {
                raw,
                device,
                users: StreamUsers::new(),
            }),
        })
    }

    /// The kernel named `name` (its mangled name, or the `extern "C"`/`.entry` name).
    pub fn function(&self, name: &str) -> Result<GpuKernel<A>> {
        let c_name = CString::new(name)
            .map_err(|_| Error::InvalidArgument(format!("kernel name {name:?} contains NUL")))?;
        // SAFETY: the module is alive.
        let raw = check::<A, _>(unsafe { A::module_get_function(self.inner.raw, &c_name) })?;
        Ok(GpuKernel {
            raw,
            module: self.clone(),
            name: name.to_owned(),
        })
    }

    /// The native handle.
    pub fn raw_handle(&self) -> RawModule {
        self.inner.raw
    }
}

/// A kernel of a [`GpuModule`] (which it keeps loaded).
#[derive(Clone)]
pub struct GpuKernel<A: RawApi> {
    raw: RawFunction,
    module: GpuModule<A>,
    name: String,
}

impl<A: RawApi> fmt::Debug for GpuKernel<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuKernel")
            .field("name", &self.name)
            .field("raw", &self.raw)
            .finish()
    }
}

impl<A: RawApi> GpuKernel<A> {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The native handle.
    pub fn raw_handle(&self) -> RawFunction {
        self.raw
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks per grid (x, y, z).
    pub grid: (u32, u32, u32),
    /// Threads per block (x, y, z).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch covering `elements` with `block` threads per block.
    ///
    /// ```
    /// use devstream_gpu_common::LaunchConfig;
    /// let c = LaunchConfig::for_elements(1000, 256);
    /// assert_eq!(c.grid, (4, 1, 1));
    /// assert_eq!(c.block, (256, 1, 1));
    /// ```
    pub fn for_elements(elements: u32, block: u32) -> Self {
        let block = block.max(1);
        LaunchConfig {
            grid: (elements.div_ceil(block).max(1), 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// One kernel argument, passed by value as the kernel's parameter.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a, A: RawApi> {
    /// A device buffer's address (the buffer is kept until the launch completes).
    Buffer(&'a GpuBuffer<A>),
    /// A `u32`.
    U32(u32),
    /// An `i32`.
    I32(i32),
    /// A `u64`.
    U64(u64),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
    /// A raw device address.
    Ptr(DevicePtr),
}

const MAX_ARGS: usize = 32;

impl<A: RawApi> GpuStream<A> {
    /// Launches `kernel` on this stream (`cuLaunchKernel`) with `args` as its parameters.
    /// Buffers passed are kept alive until the launch completes (and owned by a capture).
    ///
    /// # Safety
    /// The kernel runs arbitrary device code: `args` must match the kernel's parameter list in
    /// number and types, and the kernel must stay within the buffers it is given.
    pub unsafe fn launch_kernel(
        &self,
        kernel: &GpuKernel<A>,
        config: LaunchConfig,
        args: &[KernelArg<'_, A>],
    ) -> Result<()> {
        if args.len() > MAX_ARGS {
            return Err(Error::InvalidArgument(format!(
                "launch_kernel: {} arguments, at most {MAX_ARGS}",
                args.len()
            )));
        }
        self.same_device("launch_kernel", kernel.module.inner.device.ordinal)?;
        self.bind()?;
        let mut storage = [0u64; MAX_ARGS];
        let mut pointers = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
        for (index, arg) in args.iter().enumerate() {
            storage[index] = match *arg {
                KernelArg::Buffer(buffer) => {
                    buffer.use_on(self)?;
                    buffer.device_ptr()
                }
                KernelArg::U32(v) => u64::from(v),
                KernelArg::I32(v) => u64::from(v as u32),
                KernelArg::U64(v) | KernelArg::Ptr(v) => v,
                KernelArg::F32(v) => u64::from(v.to_bits()),
                KernelArg::F64(v) => v.to_bits(),
            };
        }
        for (index, pointer) in pointers.iter_mut().enumerate().take(args.len()) {
            *pointer = (&mut storage[index] as *mut u64).cast();
        }
        kernel.module.inner.users.note(self.inner());
        self.keep_in_capture(Box::new(kernel.module.clone()))?;
        // SAFETY: each parameter pointer points to an 8-byte little-endian slot holding the
        // value (the runtime reads as many bytes as the parameter's size, which for the
        // supported types is the low-order bytes); the caller guarantees the kernel's contract.
        let result = unsafe {
            A::launch_kernel(
                kernel.raw,
                config.grid,
                config.block,
                config.shared_mem_bytes,
                // Not `raw_handle()`: that hands the handle out, which marks the device as
                // having foreign handles and turns wait elision off on it for good.
                self.raw(),
                pointers.as_mut_ptr(),
            )
        };
        result.map_err(map_error::<A>)
    }
}

impl<A: RawApi> GpuModule<A> {
    /// The place the module was loaded on.
    pub fn place(&self) -> &Place {
        &self.inner.device.place
    }
}
