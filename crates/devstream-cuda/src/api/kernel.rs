//! Modules and kernel launches: [`CudaApi`]'s part of the raw-call table (`RawKernels`).

use super::*;
use devstream_gpu_common::RawKernels;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawKernels for CudaApi {
    unsafe fn module_load_data(image: *const c_void) -> RawResult<RawModule> {
        let module = out(std::ptr::null_mut(), "cuModuleLoadData", |module| {
            // SAFETY: a NUL-terminated image (caller); a context is current.
            unsafe { sys::cuModuleLoadData(module, image) }
        })?;
        Ok(RawModule(module.cast()))
    }

    unsafe fn module_unload(module: RawModule) -> RawResult {
        ok(
            // SAFETY: the caller owns the module and no kernel of it is pending.
            unsafe { sys::cuModuleUnload(module.0.cast()) },
            "cuModuleUnload",
        )
    }

    unsafe fn module_get_function(
        module: RawModule,
        name: &CStr,
    ) -> RawResult<devstream_gpu_common::RawFunction> {
        let function = out(std::ptr::null_mut(), "cuModuleGetFunction", |function| {
            // SAFETY: live module, NUL-terminated name, valid out-pointer.
            unsafe { sys::cuModuleGetFunction(function, module.0.cast(), name.as_ptr()) }
        })?;
        Ok(devstream_gpu_common::RawFunction(function.cast()))
    }

    unsafe fn launch_kernel(
        function: devstream_gpu_common::RawFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        s: RawStream,
        params: *mut *mut c_void,
    ) -> RawResult {
        ok(
            // SAFETY: live function and stream; parameters per the caller's contract.
            unsafe {
                sys::cuLaunchKernel(
                    function.0.cast(),
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
            "cuLaunchKernel",
        )
    }
}
