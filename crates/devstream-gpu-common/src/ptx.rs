//! Small hand-written PTX kernels, shared by the CUDA backend and HIP on NVIDIA (where a HIP
//! code object is PTX): no nvcc needed, the driver JIT-compiles PTX for the device.
//!
//! | kernel | parameters | does |
//! |---|---|---|
//! | `noop` | — | nothing (launch-overhead measurements) |
//! | `sum_u32` | `*const u32 input, *mut u32 output, u32 n` | `*output += Σ input[0..n]` (atomics) |
//! | `affine_u32` | `*mut u32 data, u32 n, u32 mul, u32 add` | `data[i] = data[i] * mul + add` |
//! | `spin` | `u64 cycles` | busy-waits `cycles` clock cycles (keeps a stream busy in tests) |

/// The PTX text of the kernels above (ISA 6.0, `sm_50`: every driver this backend accepts can
/// JIT it for any supported GPU).
pub const KERNELS: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry noop()
{
    ret;
}

.visible .entry sum_u32(
    .param .u64 sum_input,
    .param .u64 sum_output,
    .param .u32 sum_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [sum_input];
    ld.param.u64 %rd2, [sum_output];
    ld.param.u32 %r1, [sum_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra SUM_DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r6, [%rd6];
    atom.global.add.u32 %r7, [%rd4], %r6;
SUM_DONE:
    ret;
}

.visible .entry affine_u32(
    .param .u64 affine_data,
    .param .u32 affine_n,
    .param .u32 affine_mul,
    .param .u32 affine_add
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [affine_data];
    ld.param.u32 %r1, [affine_n];
    ld.param.u32 %r2, [affine_mul];
    ld.param.u32 %r3, [affine_add];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.s32 %r7, %r4, %r5, %r6;
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra AFFINE_DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r7, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r8, [%rd4];
    mad.lo.s32 %r9, %r8, %r2, %r3;
    st.global.u32 [%rd4], %r9;
AFFINE_DONE:
    ret;
}

.visible .entry spin(
    .param .u64 spin_cycles
)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<6>;

    ld.param.u64 %rd1, [spin_cycles];
    mov.u64 %rd2, %clock64;
SPIN_LOOP:
    mov.u64 %rd3, %clock64;
    sub.s64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra SPIN_LOOP;
    ret;
}
"#;
