//! Test-only: compares `devstream-hip`'s hand-written HIP declarations (`src/sys.rs`, compiled
//! here unchanged) with the `hip-sys` bindings (bindgen output of ROCm 5.4's headers): enum
//! values, flag constants, type sizes and layouts, and that every function `devstream-hip`
//! loads is declared there.

#[path = "../../src/sys.rs"]
#[allow(dead_code, clippy::all)]
pub mod sys;

#[cfg(test)]
mod tests {
    use super::sys;
    use hip_sys::hiprt as h;
    use std::mem::{align_of, size_of};

    macro_rules! same {
        ($($ours:expr => $theirs:expr),* $(,)?) => {{
            let mut mismatches = Vec::new();
            $(
                let (ours, theirs) = ($ours as i64, $theirs as i64);
                if ours != theirs {
                    mismatches.push(format!(
                        "{} = {ours}, hip-sys {} = {theirs}",
                        stringify!($ours),
                        stringify!($theirs)
                    ));
                }
            )*
            assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
        }};
    }

    #[test]
    fn status_codes_match() {
        use h::hipError_t as E;
        same! {
            sys::hipSuccess => E::hipSuccess,
            sys::hipErrorInvalidValue => E::hipErrorInvalidValue,
            sys::hipErrorOutOfMemory => E::hipErrorOutOfMemory,
            sys::hipErrorNotInitialized => E::hipErrorNotInitialized,
            sys::hipErrorDeinitialized => E::hipErrorDeinitialized,
            sys::hipErrorInsufficientDriver => E::hipErrorInsufficientDriver,
            sys::hipErrorInvalidImage => E::hipErrorInvalidImage,
            sys::hipErrorInvalidContext => E::hipErrorInvalidContext,
            sys::hipErrorNoDevice => E::hipErrorNoDevice,
            sys::hipErrorInvalidDevice => E::hipErrorInvalidDevice,
            sys::hipErrorInvalidKernelFile => E::hipErrorInvalidKernelFile,
            sys::hipErrorNotFound => E::hipErrorNotFound,
            sys::hipErrorInvalidHandle => E::hipErrorInvalidHandle,
            sys::hipErrorIllegalAddress => E::hipErrorIllegalAddress,
            sys::hipErrorLaunchFailure => E::hipErrorLaunchFailure,
            sys::hipErrorNotReady => E::hipErrorNotReady,
            sys::hipErrorNotSupported => E::hipErrorNotSupported,
            sys::hipErrorStreamCaptureUnsupported => E::hipErrorStreamCaptureUnsupported,
            sys::hipErrorStreamCaptureInvalidated => E::hipErrorStreamCaptureInvalidated,
            sys::hipErrorStreamCaptureMerge => E::hipErrorStreamCaptureMerge,
            sys::hipErrorStreamCaptureUnmatched => E::hipErrorStreamCaptureUnmatched,
            sys::hipErrorStreamCaptureUnjoined => E::hipErrorStreamCaptureUnjoined,
            sys::hipErrorStreamCaptureIsolation => E::hipErrorStreamCaptureIsolation,
            sys::hipErrorStreamCaptureImplicit => E::hipErrorStreamCaptureImplicit,
            sys::hipErrorCapturedEvent => E::hipErrorCapturedEvent,
            sys::hipErrorStreamCaptureWrongThread => E::hipErrorStreamCaptureWrongThread,
            sys::hipErrorUnknown => E::hipErrorUnknown,
        }
    }

    #[test]
    fn flag_constants_match() {
        same! {
            sys::hipStreamDefault => h::hipStreamDefault,
            sys::hipStreamNonBlocking => h::hipStreamNonBlocking,
            sys::hipEventDefault => h::hipEventDefault,
            sys::hipEventBlockingSync => h::hipEventBlockingSync,
            sys::hipEventDisableTiming => h::hipEventDisableTiming,
            sys::hipEventInterprocess => h::hipEventInterprocess,
            sys::hipHostMallocDefault => h::hipHostMallocDefault,
            sys::hipHostMallocPortable => h::hipHostMallocPortable,
            sys::hipHostMallocMapped => h::hipHostMallocMapped,
            sys::hipMemAttachGlobal => h::hipMemAttachGlobal,
            sys::hipMemAttachHost => h::hipMemAttachHost,
            sys::hipMemAttachSingle => h::hipMemAttachSingle,
            sys::hipStreamWaitValueGte => h::hipStreamWaitValueGte,
            sys::hipStreamWaitValueEq => h::hipStreamWaitValueEq,
            sys::hipStreamWaitValueAnd => h::hipStreamWaitValueAnd,
            sys::hipStreamWaitValueNor => h::hipStreamWaitValueNor,
        }
    }

    #[test]
    fn enum_values_match() {
        use h::hipDeviceAttribute_t as A;
        use h::hipStreamCaptureMode as M;
        use h::hipStreamCaptureStatus as S;
        use h::hipStreamUpdateCaptureDependenciesFlags as U;
        same! {
            sys::hipStreamCaptureModeGlobal => M::hipStreamCaptureModeGlobal,
            sys::hipStreamCaptureModeThreadLocal => M::hipStreamCaptureModeThreadLocal,
            sys::hipStreamCaptureModeRelaxed => M::hipStreamCaptureModeRelaxed,
            sys::hipStreamCaptureStatusNone => S::hipStreamCaptureStatusNone,
            sys::hipStreamCaptureStatusActive => S::hipStreamCaptureStatusActive,
            sys::hipStreamCaptureStatusInvalidated => S::hipStreamCaptureStatusInvalidated,
            sys::hipStreamAddCaptureDependencies => U::hipStreamAddCaptureDependencies,
            sys::hipStreamSetCaptureDependencies => U::hipStreamSetCaptureDependencies,
            sys::hipDeviceAttributeCanMapHostMemory => A::hipDeviceAttributeCanMapHostMemory,
            sys::hipDeviceAttributeConcurrentManagedAccess =>
                A::hipDeviceAttributeConcurrentManagedAccess,
            sys::hipDeviceAttributeComputeCapabilityMajor =>
                A::hipDeviceAttributeComputeCapabilityMajor,
            sys::hipDeviceAttributeManagedMemory => A::hipDeviceAttributeManagedMemory,
            sys::hipDeviceAttributeComputeCapabilityMinor =>
                A::hipDeviceAttributeComputeCapabilityMinor,
            sys::hipDeviceAttributeMemoryPoolsSupported =>
                A::hipDeviceAttributeMemoryPoolsSupported,
            sys::hipDeviceAttributeCanUseStreamWaitValue =>
                A::hipDeviceAttributeCanUseStreamWaitValue,
        }
    }

    #[test]
    fn type_layouts_match() {
        macro_rules! layout {
            ($($ours:ty => $theirs:ty),* $(,)?) => {$(
                assert_eq!(
                    (size_of::<$ours>(), align_of::<$ours>()),
                    (size_of::<$theirs>(), align_of::<$theirs>()),
                    "{} vs hip-sys {}",
                    stringify!($ours),
                    stringify!($theirs)
                );
            )*};
        }
        layout! {
            sys::hipError_t => h::hipError_t,
            sys::hipDevice_t => h::hipDevice_t,
            sys::hipStream_t => h::hipStream_t,
            sys::hipEvent_t => h::hipEvent_t,
            sys::hipGraph_t => h::hipGraph_t,
            sys::hipGraphExec_t => h::hipGraphExec_t,
            sys::hipGraphNode_t => h::hipGraphNode_t,
            sys::hipModule_t => h::hipModule_t,
            sys::hipFunction_t => h::hipFunction_t,
            sys::hipDeviceptr_t => h::hipDeviceptr_t,
            sys::hipStreamCaptureMode => h::hipStreamCaptureMode,
            sys::hipStreamCaptureStatus => h::hipStreamCaptureStatus,
            sys::hipDeviceAttribute_t => h::hipDeviceAttribute_t,
            sys::hipHostFn_t => h::hipHostFn_t,
            sys::hipStreamCallback_t => h::hipStreamCallback_t,
        }
    }

    // The loader's own list of functions (one file, shared), not a copy of it.
    include!("../../src/functions.rs");

    /// Every function devstream-hip loads (required and optional) is declared by hip-sys, so
    /// none of our names is misspelled or invented. The function items are only named, never
    /// turned into addresses, so nothing links against them (ROCm 5.2 has no
    /// `hipLaunchHostFunc`, which hip-sys declares from ROCm 5.4's headers).
    #[test]
    fn every_loaded_function_is_declared() {
        fn declared<F: Copy>(_item: F) -> usize {
            size_of::<F>()
        }
        macro_rules! declared_all {
            (
                required { $($required:ident),* $(,)? }
                optional { $($optional:ident),* $(,)? }
            ) => {
                [$((stringify!($required), declared(h::$required)),)*
                 $((stringify!($optional), declared(h::$optional)),)*]
            };
        }
        let functions = hip_functions!(declared_all);
        assert_eq!(functions.len(), 65);
        for (name, size) in functions {
            assert_eq!(size, 0, "{name} is a function item");
        }
    }
}
