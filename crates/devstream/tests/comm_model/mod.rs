//! The values each rank contributes and the scalar model of every reduction, shared by the
//! collectives tests (`comm.rs` on the CPU engine, `comm_gpu.rs` on NCCL/RCCL).
#![allow(dead_code)]

use devstream::{DataType, ReduceOp};

/// The value rank `r` contributes at element `i`: 1, 2 or 3 (exact in every type).
pub fn value(rank: usize, i: usize) -> i64 {
    1 + ((rank + 2 * i) % 3) as i64
}

/// binary16 bits of a small non-negative integer (≤ 2048, exact).
pub fn f16_of_int(k: i64) -> u16 {
    if k == 0 {
        return 0;
    }
    let e = 63 - (k as u64).leading_zeros() as i64;
    let mantissa = ((k << (10 - e)) & 0x3ff) as u16;
    (((e + 15) as u16) << 10) | mantissa
}

pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = f64::from(h & 0x3ff);
    sign * match exp {
        0 => man * 2f64.powi(-24),
        31 if man == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

pub fn encode(dtype: DataType, values: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        match dtype {
            DataType::F32 => out.extend((v as f32).to_ne_bytes()),
            DataType::F64 => out.extend((v as f64).to_ne_bytes()),
            DataType::F16 => out.extend(f16_of_int(v).to_ne_bytes()),
            DataType::BF16 => out.extend((((v as f32).to_bits() >> 16) as u16).to_ne_bytes()),
            DataType::I32 => out.extend((v as i32).to_ne_bytes()),
            DataType::I64 => out.extend(v.to_ne_bytes()),
            DataType::U8 => out.push(v as u8),
            _ => unreachable!(),
        }
    }
    out
}

pub fn decode(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(dtype.size())
        .map(|b| match dtype {
            DataType::F32 => f64::from(f32::from_ne_bytes(b.try_into().unwrap())),
            DataType::F64 => f64::from_ne_bytes(b.try_into().unwrap()),
            DataType::F16 => f16_to_f64(u16::from_ne_bytes(b.try_into().unwrap())),
            DataType::BF16 => f64::from(f32::from_bits(
                u32::from(u16::from_ne_bytes(b.try_into().unwrap())) << 16,
            )),
            DataType::I32 => f64::from(i32::from_ne_bytes(b.try_into().unwrap())),
            DataType::I64 => i64::from_ne_bytes(b.try_into().unwrap()) as f64,
            DataType::U8 => f64::from(b[0]),
            _ => unreachable!(),
        })
        .collect()
}

/// The scalar model: the reduction of `values` (rank order) as the element type computes it.
pub fn model(dtype: DataType, op: ReduceOp, values: &[i64]) -> f64 {
    let n = values.len();
    if dtype.is_float() {
        let mut acc = values[0] as f64;
        for &v in &values[1..] {
            let v = v as f64;
            acc = match op {
                ReduceOp::Prod => acc * v,
                ReduceOp::Min => acc.min(v),
                ReduceOp::Max => acc.max(v),
                _ => acc + v,
            };
        }
        if op == ReduceOp::Avg {
            acc /= n as f64;
        }
        return acc;
    }
    // Integers: wrap in the element type (the sum for Avg too), then divide truncating.
    let wrap = |v: i64| match dtype {
        DataType::I32 => i64::from(v as i32),
        DataType::U8 => i64::from(v as u8),
        _ => v,
    };
    let mut acc = values[0];
    for &v in &values[1..] {
        acc = wrap(match op {
            ReduceOp::Prod => acc.wrapping_mul(v),
            ReduceOp::Min => acc.min(v),
            ReduceOp::Max => acc.max(v),
            _ => acc.wrapping_add(v),
        });
    }
    if op == ReduceOp::Avg {
        acc = wrap(acc) / n as i64;
    }
    wrap(acc) as f64
}

pub fn assert_close(dtype: DataType, got: f64, want: f64, what: &str) {
    let tolerance = match dtype {
        DataType::F16 | DataType::BF16 => 1e-2 * want.abs().max(1.0),
        DataType::F32 => 1e-6 * want.abs().max(1.0),
        _ => 0.0,
    };
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, the model says {want}"
    );
}

/// Like [`assert_close`], for libraries that combine in their own order and compute `Avg` as a
/// sum of pre-scaled values (NCCL's `ncclAvg`): floats within a few units in the last place.
pub fn assert_near(dtype: DataType, got: f64, want: f64, what: &str) {
    let tolerance = match dtype {
        DataType::F16 | DataType::BF16 => 1e-2 * want.abs().max(1.0),
        DataType::F32 => 1e-6 * want.abs().max(1.0),
        DataType::F64 => 1e-12 * want.abs().max(1.0),
        _ => 0.0,
    };
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, the model says {want}"
    );
}
