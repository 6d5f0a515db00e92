//! Element-wise reductions over byte buffers, per element type: the arithmetic of the CPU
//! reference engine's collectives (and of the `custom_cpu` test plug-in's `xccl_*`).
//!
//! Inputs are combined in rank order `0, 1, ..., n-1`, so every rank computes bit-identical
//! results. `F32` accumulates in `f32`, `F64` in `f64`, `F16` and `BF16` in `f32` (rounded to
//! the element type once, at the end, to nearest even); integers wrap in their own type, and
//! integer `Avg` truncates toward zero (NCCL's rule).

use crate::{DataType, ReduceOp, Result};

/// Elements reduced per chunk (bounds the scratch memory of a reduction).
const CHUNK: usize = 1 << 16;

/// An accumulator element.
trait Acc: Copy {
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    fn divide(self, n: usize) -> Self;
}

/// Implements [`Acc`] for each type listed: `combine` by the expression given for `Prod`, `Min`,
/// `Max` and the rest (`Sum`, and `Avg` before its division) over `$a` (this value) and `$b`,
/// `divide` by the one given over `$a` and the rank count `$n`.
macro_rules! acc {
    (
        $($t:ty),+ => |$a:ident, $b:ident|
            prod: $prod:expr,
            min: $min:expr,
            max: $max:expr,
            sum: $sum:expr,
            divide: |$n:ident| $divide:expr $(,)?
    ) => {$(
        impl Acc for $t {
            #[inline]
            fn combine(self, $b: $t, op: ReduceOp) -> $t {
                let $a = self;
                match op {
                    ReduceOp::Prod => $prod,
                    ReduceOp::Min => $min,
                    ReduceOp::Max => $max,
                    _ => $sum,
                }
            }
            #[inline]
            fn divide(self, $n: usize) -> $t {
                let $a = self;
                $divide
            }
        }
    )+};
}

acc! {
    f32, f64 => |a, b|
        prod: a * b,
        min: if b < a { b } else { a },
        max: if b > a { b } else { a },
        sum: a + b,
        divide: |n| a / n as Self,
}

acc! {
    i32, i64, u8 => |a, b|
        prod: a.wrapping_mul(b),
        min: a.min(b),
        max: a.max(b),
        sum: a.wrapping_add(b),
        // n ≥ 1; for u8 and n > 255 the quotient is 0, as the exact one is.
        divide: |n| Self::try_from(n).map_or(0, |n| a.wrapping_div(n)),
}

/// How an element type's bytes turn into accumulators and back.
trait Codec {
    type A: Acc;
    const SIZE: usize;
    fn decode(bytes: &[u8]) -> Self::A;
    fn encode(value: Self::A, out: &mut [u8]);
}

macro_rules! native_codec {
    ($name:ident, $t:ty) => {
        struct $name;
        impl Codec for $name {
            type A = $t;
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn decode(bytes: &[u8]) -> $t {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(bytes);
                <$t>::from_ne_bytes(raw)
            }
            #[inline]
            fn encode(value: $t, out: &mut [u8]) {
                out.copy_from_slice(&value.to_ne_bytes());
            }
        }
    };
}
native_codec!(F32, f32);
native_codec!(F64, f64);
native_codec!(I32, i32);
native_codec!(I64, i64);
native_codec!(U8, u8);

/// A 16-bit float type, accumulated in `f32`: its bits to `f32` and back.
macro_rules! half_codec {
    ($name:ident, $to_f32:ident, $from_f32:ident) => {
        struct $name;
        impl Codec for $name {
            type A = f32;
            const SIZE: usize = 2;
            #[inline]
            fn decode(bytes: &[u8]) -> f32 {
                $to_f32(u16::from_ne_bytes([bytes[0], bytes[1]]))
            }
            #[inline]
            fn encode(value: f32, out: &mut [u8]) {
                out.copy_from_slice(&$from_f32(value).to_ne_bytes());
            }
        }
    };
}
half_codec!(F16, f16_to_f32, f32_to_f16);
half_codec!(BF16, bf16_to_f32, f32_to_bf16);

/// IEEE binary16 bits → `f32` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: normalise.
            let mut e: u32 = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// `f32` → IEEE binary16 bits, rounding to nearest even (overflow gives infinity).
pub fn f32_to_f16(value: f32) -> u16 {
    let x = value.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = (m + half - 1 + ((m >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let mut out = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1;
    }
    sign | out as u16
}

/// bfloat16 bits → `f32` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `f32` → bfloat16 bits, rounding to nearest even.
pub fn f32_to_bf16(value: f32) -> u16 {
    let x = value.to_bits();
    if value.is_nan() {
        return ((x >> 16) as u16) | 0x40;
    }
    ((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16
}

/// Reduces `nranks` inputs of `out.len() / dtype.size()` elements into `out`.
/// `input(rank, element_offset, bytes)` fills `bytes` with that rank's elements from
/// `element_offset` on.
pub fn reduce(
    dtype: DataType,
    op: ReduceOp,
    nranks: usize,
    out: &mut [u8],
    input: impl FnMut(usize, usize, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let count = out.len() / dtype.size();
    let size = dtype.size();
    reduce_chunks(dtype, op, nranks, count, CHUNK, input, |first, chunk| {
        out[first * size..first * size + chunk.len()].copy_from_slice(chunk);
        Ok(())
    })
}

/// [`reduce`] of `count` elements, `chunk` elements at a time, handing each reduced chunk to
/// `output(element_offset, bytes)` instead of writing one buffer (the scratch memory is
/// allocated once: three chunks). `input(rank, element_offset, bytes)` is called for ranks
/// `0, 1, ..., n-1` in that order for every chunk.
///
/// ```
/// use devstream_core::{reduce::reduce_chunks, DataType, ReduceOp};
/// let inputs = [[1i32, 2, 3], [10, 20, 30]];
/// let mut sums = Vec::new();
/// reduce_chunks(DataType::I32, ReduceOp::Sum, 2, 3, 2,
///     |rank, first, bytes| {
///         for (k, slot) in bytes.chunks_exact_mut(4).enumerate() {
///             slot.copy_from_slice(&inputs[rank][first + k].to_ne_bytes());
///         }
///         Ok(())
///     },
///     |_, bytes| {
///         sums.extend(bytes.chunks_exact(4).map(|b| i32::from_ne_bytes(b.try_into().unwrap())));
///         Ok(())
///     }).unwrap();
/// assert_eq!(sums, [11, 22, 33]);
/// ```
pub fn reduce_chunks(
    dtype: DataType,
    op: ReduceOp,
    nranks: usize,
    count: usize,
    chunk: usize,
    input: impl FnMut(usize, usize, &mut [u8]) -> Result<()>,
    output: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let job = Chunked {
        nranks,
        count,
        chunk: chunk.max(1),
        input,
        output,
    };
    match dtype {
        DataType::F32 => job.reduce_as::<F32>(op),
        DataType::F64 => job.reduce_as::<F64>(op),
        DataType::F16 => job.reduce_as::<F16>(op),
        DataType::BF16 => job.reduce_as::<BF16>(op),
        DataType::I32 => job.reduce_as::<I32>(op),
        DataType::I64 => job.reduce_as::<I64>(op),
        _ => job.reduce_as::<U8>(op),
    }
}

/// One chunked reduction (see [`reduce_chunks`]): `nranks` inputs of `count` elements, read
/// and written `chunk` elements at a time through `input` and `output`.
struct Chunked<I, O> {
    nranks: usize,
    count: usize,
    chunk: usize,
    input: I,
    output: O,
}

/// [`ReduceOp`] as a const generic parameter (see [`reduce_as`]).
const fn op_of(code: u8) -> ReduceOp {
    match code {
        1 => ReduceOp::Prod,
        2 => ReduceOp::Min,
        3 => ReduceOp::Max,
        4 => ReduceOp::Avg,
        _ => ReduceOp::Sum,
    }
}

impl<I, O> Chunked<I, O>
where
    I: FnMut(usize, usize, &mut [u8]) -> Result<()>,
    O: FnMut(usize, &[u8]) -> Result<()>,
{
    /// Picks a copy of the reduction loop per operation: with the operation a constant there,
    /// the per-element `match` folds away and the loop vectorises (a runtime `match` per element
    /// keeps it scalar).
    fn reduce_as<C: Codec>(self, op: ReduceOp) -> Result<()> {
        match op {
            ReduceOp::Prod => self.reduce_with::<C, 1>(),
            ReduceOp::Min => self.reduce_with::<C, 2>(),
            ReduceOp::Max => self.reduce_with::<C, 3>(),
            ReduceOp::Avg => self.reduce_with::<C, 4>(),
            _ => self.reduce_with::<C, 0>(),
        }
    }

    /// The reduction loop for the element codec `C` and the operation `OP` (see [`op_of`]).
    fn reduce_with<C: Codec, const OP: u8>(self) -> Result<()> {
        let Chunked {
            nranks,
            count: total,
            chunk,
            mut input,
            mut output,
        } = self;
        let op = op_of(OP);
        let mut scratch = vec![0u8; chunk.min(total.max(1)) * C::SIZE];
        let mut reduced = vec![0u8; chunk.min(total.max(1)) * C::SIZE];
        let mut acc: Vec<C::A> = Vec::with_capacity(chunk.min(total));
        let mut start = 0;
        while start < total {
            let n = chunk.min(total - start);
            let bytes = &mut scratch[..n * C::SIZE];
            acc.clear();
            for rank in 0..nranks {
                input(rank, start, bytes)?;
                let values = bytes.chunks_exact(C::SIZE).map(C::decode);
                if rank == 0 {
                    acc.extend(values);
                } else {
                    for (a, v) in acc.iter_mut().zip(values) {
                        *a = a.combine(v, op);
                    }
                }
            }
            let target = &mut reduced[..n * C::SIZE];
            for (a, slot) in acc.iter().zip(target.chunks_exact_mut(C::SIZE)) {
                let value = if op == ReduceOp::Avg {
                    a.divide(nranks)
                } else {
                    *a
                };
                C::encode(value, slot);
            }
            output(start, target)?;
            start += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trips_and_rounds() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x} {f}");
            }
        }
        assert_eq!(f16_to_f32(f32_to_f16(1.0)), 1.0);
        assert_eq!(f16_to_f32(f32_to_f16(65504.0)), 65504.0);
        assert!(f16_to_f32(f32_to_f16(1.0e6)).is_infinite());
        // 2049 is halfway between 2048 and 2050: ties to even (2048).
        assert_eq!(f16_to_f32(f32_to_f16(2049.0)), 2048.0);
        assert_eq!(f16_to_f32(f32_to_f16(2051.0)), 2052.0);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(bf16_to_f32(f32_to_bf16(1.0)), 1.0);
        assert_eq!(bf16_to_f32(f32_to_bf16(257.0)), 256.0);
        assert_eq!(bf16_to_f32(f32_to_bf16(259.0)), 260.0);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    }

    #[test]
    fn integer_avg_and_wrapping() {
        let inputs: [[u8; 2]; 3] = [[200, 1], [100, 2], [0, 4]];
        let mut out = [0u8; 2];
        reduce(DataType::U8, ReduceOp::Sum, 3, &mut out, |r, off, b| {
            b.copy_from_slice(&inputs[r][off..off + b.len()]);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, [44, 7]);
        reduce(DataType::U8, ReduceOp::Avg, 3, &mut out, |r, off, b| {
            b.copy_from_slice(&inputs[r][off..off + b.len()]);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, [14, 2]);
    }
}
