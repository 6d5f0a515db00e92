//! Modules and kernel launches.

use super::*;

/// `hipModuleLoadData` → `cuModuleLoadData`: the image is PTX text or a cubin, as on HIP's
/// NVIDIA platform.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(
    module: *mut hipModule_t,
    image: *const c_void,
) -> hipError_t {
    enter!();
    put_cu!(module, |raw| sys::cuModuleLoadData(raw, image))
}

/// `hipModuleUnload` → `cuModuleUnload`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleUnload(module: hipModule_t) -> hipError_t {
    enter!();
    cu!(sys::cuModuleUnload(module.cast()))
}

/// `hipModuleGetFunction` → `cuModuleGetFunction`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(
    function: *mut hipFunction_t,
    module: hipModule_t,
    name: *const c_char,
) -> hipError_t {
    enter!();
    put_cu!(function, |raw| sys::cuModuleGetFunction(
        raw,
        module.cast(),
        name
    ))
}

/// `hipModuleLaunchKernel` → `cuLaunchKernel` (the `extra` launch-parameter markers have the
/// same values).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipModuleLaunchKernel(
    function: hipFunction_t,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    stream: hipStream_t,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> hipError_t {
    enter!();
    cu!(sys::cuLaunchKernel(
        function.cast(),
        grid_x,
        grid_y,
        grid_z,
        block_x,
        block_y,
        block_z,
        shared_mem_bytes,
        cu_stream(stream),
        params,
        extra
    ))
}
