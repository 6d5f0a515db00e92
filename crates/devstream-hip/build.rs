//! Where the ROCm headers are installed (`hip/hip_runtime_api.h` under `$HIP_PATH/include`,
//! `$ROCM_PATH/include`, `/opt/rocm/include` or `/usr/include`), compiles and runs a small C
//! program that prints the values and sizes our declarations in `src/sys.rs` must match, writes
//! them to `$OUT_DIR/hip_header_values.rs` and sets `cfg(hip_headers)`; the `header_check`
//! unit tests in `src/sys.rs` then compare. Without the headers (or a C compiler) nothing happens: the crate never needs
//! ROCm to build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each name the probe prints with its value (enum constants, macros, `sizeof`s).
const VALUES: &[&str] = &[
    "hipSuccess",
    "hipErrorInvalidValue",
    "hipErrorOutOfMemory",
    "hipErrorNotInitialized",
    "hipErrorDeinitialized",
    "hipErrorInsufficientDriver",
    "hipErrorInvalidImage",
    "hipErrorInvalidContext",
    "hipErrorNoDevice",
    "hipErrorInvalidDevice",
    "hipErrorInvalidKernelFile",
    "hipErrorNotFound",
    "hipErrorInvalidHandle",
    "hipErrorIllegalAddress",
    "hipErrorLaunchFailure",
    "hipErrorNotReady",
    "hipErrorNotSupported",
    "hipErrorStreamCaptureUnsupported",
    "hipErrorStreamCaptureInvalidated",
    "hipErrorStreamCaptureMerge",
    "hipErrorStreamCaptureUnmatched",
    "hipErrorStreamCaptureUnjoined",
    "hipErrorStreamCaptureIsolation",
    "hipErrorStreamCaptureImplicit",
    "hipErrorCapturedEvent",
    "hipErrorStreamCaptureWrongThread",
    "hipErrorUnknown",
    "hipStreamDefault",
    "hipStreamNonBlocking",
    "hipEventDefault",
    "hipEventBlockingSync",
    "hipEventDisableTiming",
    "hipEventInterprocess",
    "hipHostMallocDefault",
    "hipHostMallocPortable",
    "hipHostMallocMapped",
    "hipMemAttachGlobal",
    "hipMemAttachHost",
    "hipMemAttachSingle",
    "hipStreamWaitValueGte",
    "hipStreamWaitValueEq",
    "hipStreamWaitValueAnd",
    "hipStreamWaitValueNor",
    "hipStreamAddCaptureDependencies",
    "hipStreamSetCaptureDependencies",
    "(unsigned long)hipStreamPerThread",
    "hipStreamCaptureModeGlobal",
    "hipStreamCaptureModeThreadLocal",
    "hipStreamCaptureModeRelaxed",
    "hipStreamCaptureStatusNone",
    "hipStreamCaptureStatusActive",
    "hipStreamCaptureStatusInvalidated",
    "hipDeviceAttributeCanMapHostMemory",
    "hipDeviceAttributeConcurrentManagedAccess",
    "hipDeviceAttributeComputeCapabilityMajor",
    "hipDeviceAttributeManagedMemory",
    "hipDeviceAttributeComputeCapabilityMinor",
    "hipDeviceAttributeMemoryPoolsSupported",
    "hipDeviceAttributeCanUseStreamWaitValue",
    "hipMemAllocationTypePinned",
    "hipMemHandleTypeNone",
    "hipMemLocationTypeDevice",
    "hipMemPoolAttrReleaseThreshold",
    "hipMemPoolAttrReservedMemCurrent",
    "hipMemPoolAttrReservedMemHigh",
    "hipMemPoolAttrUsedMemCurrent",
    "hipMemPoolAttrUsedMemHigh",
    "sizeof(hipError_t)",
    "sizeof(hipDevice_t)",
    "sizeof(hipStream_t)",
    "sizeof(hipEvent_t)",
    "sizeof(hipGraph_t)",
    "sizeof(hipGraphExec_t)",
    "sizeof(hipGraphNode_t)",
    "sizeof(hipModule_t)",
    "sizeof(hipFunction_t)",
    "sizeof(hipDeviceptr_t)",
    "sizeof(hipStreamCaptureMode)",
    "sizeof(hipStreamCaptureStatus)",
    "sizeof(hipDeviceAttribute_t)",
    "sizeof(hipHostFn_t)",
    "sizeof(hipStreamCallback_t)",
    "sizeof(hipMemPool_t)",
    "sizeof(hipMemPoolAttr)",
    "sizeof(hipMemLocation)",
    "sizeof(hipMemPoolProps)",
];

fn header_root() -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = ["HIP_PATH", "ROCM_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|root| PathBuf::from(root).join("include"))
        .collect();
    roots.push("/opt/rocm/include".into());
    roots.push("/usr/include".into());
    roots
        .into_iter()
        .find(|root| root.join("hip/hip_runtime_api.h").is_file())
}

fn probe(include: &Path, out_dir: &Path) -> Result<String, String> {
    let mut source = String::from(
        "#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n\
         int main(void) {\n",
    );
    for name in VALUES {
        source.push_str(&format!(
            "    printf(\"%s=%lld\\n\", \"{}\", (long long)({name}));\n",
            name.replace('"', "\\\"")
        ));
    }
    source.push_str("    return 0;\n}\n");
    let c_file = out_dir.join("hip_header_probe.c");
    let exe = out_dir.join("hip_header_probe");
    std::fs::write(&c_file, source).map_err(|e| format!("write probe: {e}"))?;
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = Command::new(&compiler)
        .arg("-I")
        .arg(include)
        .arg(&c_file)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("run {compiler}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{compiler} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let output = Command::new(&exe)
        .output()
        .map_err(|e| format!("run probe: {e}"))?;
    if !output.status.success() {
        return Err("the probe failed".into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hip_headers)");
    println!("cargo::rerun-if-changed=build.rs");
    for var in ["HIP_PATH", "ROCM_PATH", "CC"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let Some(include) = header_root() else {
        return;
    };
    let header = include.join("hip/hip_runtime_api.h");
    println!("cargo::rerun-if-changed={}", header.display());
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    match probe(&include, &out_dir) {
        Ok(printed) => {
            let mut rust = String::from(
                "/// (name, value) pairs printed by a C program compiled against the installed\n\
                 /// hip_runtime_api.h.\npub const HEADER_VALUES: &[(&str, i64)] = &[\n",
            );
            for line in printed.lines() {
                if let Some((name, value)) = line.split_once('=') {
                    rust.push_str(&format!("    ({name:?}, {value}),\n"));
                }
            }
            rust.push_str("];\n");
            rust.push_str(&format!(
                "/// The header that was probed.\npub const HEADER_PATH: &str = {:?};\n",
                header.display().to_string()
            ));
            if std::fs::write(out_dir.join("hip_header_values.rs"), rust).is_ok() {
                println!("cargo::rustc-cfg=hip_headers");
            }
        }
        Err(reason) => {
            println!(
                "cargo::warning=HIP headers found at {} but the probe failed, so the header \
                 cross-check is skipped: {reason}",
                include.display()
            );
        }
    }
}
