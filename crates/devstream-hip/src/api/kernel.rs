//! Modules and kernel launches: [`HipApi`]'s part of the raw-call table (`RawKernels`).

use super::*;
use devstream_gpu_common::RawKernels;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawKernels for HipApi {
    unsafe fn module_load_data(image: *const c_void) -> RawResult<RawModule> {
        let function = optional("hipModuleLoadData", |t| t.hipModuleLoadData)?;
        let module = out(std::ptr::null_mut(), "hipModuleLoadData", |module| {
            // SAFETY: `image` is a code object alive for the call (caller); valid out-pointer.
            unsafe { function(module, image) }
        })?;
        Ok(RawModule(module))
    }

    unsafe fn module_unload(module: RawModule) -> RawResult {
        let function = optional("hipModuleUnload", |t| t.hipModuleUnload)?;
        // SAFETY: the caller owns the module and no launch of it is pending.
        ok(unsafe { function(module.0) }, "hipModuleUnload")
    }

    unsafe fn module_get_function(module: RawModule, name: &CStr) -> RawResult<RawFunction> {
        let function = optional("hipModuleGetFunction", |t| t.hipModuleGetFunction)?;
        let raw = out(std::ptr::null_mut(), "hipModuleGetFunction", |raw| {
            // SAFETY: live module; NUL-terminated name; valid out-pointer.
            unsafe { function(raw, module.0, name.as_ptr()) }
        })?;
        Ok(RawFunction(raw))
    }

    unsafe fn launch_kernel(
        function: RawFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        s: RawStream,
        params: *mut *mut c_void,
    ) -> RawResult {
        let launch = optional("hipModuleLaunchKernel", |t| t.hipModuleLaunchKernel)?;
        ok(
            // SAFETY: live kernel and stream; `params` matches the kernel (caller's contract).
            unsafe {
                launch(
                    function.0,
                    grid.0,
                    grid.1,
                    grid.2,
                    block.0,
                    block.1,
                    block.2,
                    shared_mem_bytes,
                    stream(s),
                    params,
                    std::ptr::null_mut(),
                )
            },
            "hipModuleLaunchKernel",
        )
    }
}
