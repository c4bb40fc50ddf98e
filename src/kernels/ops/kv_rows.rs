//! Quantized KV cache rows widened to f32 for attention tiles: Q8_0 and Q4_0 blocks, `d * q`
//! per element (one rounding, so every path gives the scalar twins' bits).

use crate::quant::blocks::{BlockQ4_0, BlockQ8_0};
use crate::quant::dequant::{dequantize_q4_0, dequantize_q8_0};

/// The scalar twin: `out[32 b + i] = d_b * q_b[i]`.
pub fn q8_0_to_f32(blocks: &[BlockQ8_0], out: &mut [f32]) {
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        dequantize_q8_0(b, o.try_into().expect("32 floats"));
    }
}

/// The scalar twin: `out[32 b + i] = d_b * (q_b[i] - 8)`, low nibbles first.
pub fn q4_0_to_f32(blocks: &[BlockQ4_0], out: &mut [f32]) {
    for (b, o) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        dequantize_q4_0(b, o.try_into().expect("32 floats"));
    }
}

/// AVX2 + F16C versions.
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use std::arch::x86_64::*;

    use super::*;

    /// The block's scale broadcast to 8 lanes (F16C widening is exact).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn scale(d: half::f16) -> __m256 {
        // Broadcast, then widen: an insert into a register would chain each block to the last.
        _mm256_cvtph_ps(_mm_set1_epi16(d.to_bits() as i16))
    }

    /// [`super::q8_0_to_f32`].
    ///
    /// # Safety
    /// AVX2 and F16C; `out` holds 32 floats per block.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn q8_0_to_f32(blocks: &[BlockQ8_0], out: &mut [f32]) {
        assert!(
            out.len() >= blocks.len() * 32,
            "q8_0_to_f32: output too short"
        );
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            for (b, blk) in blocks.iter().enumerate() {
                let d = scale(blk.d);
                let q = blk.qs.as_ptr() as *const __m128i;
                for half in 0..2 {
                    let bytes = _mm_loadu_si128(q.add(half));
                    let lo = _mm256_cvtepi8_epi32(bytes);
                    let hi = _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(bytes));
                    let o = out.as_mut_ptr().add(b * 32 + half * 16);
                    _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
                    _mm256_storeu_ps(o.add(8), _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
                }
            }
        }
    }

    /// [`super::q4_0_to_f32`].
    ///
    /// # Safety
    /// AVX2 and F16C; `out` holds 32 floats per block.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn q4_0_to_f32(blocks: &[BlockQ4_0], out: &mut [f32]) {
        assert!(
            out.len() >= blocks.len() * 32,
            "q4_0_to_f32: output too short"
        );
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            let (m4, eight) = (_mm_set1_epi8(0x0f), _mm_set1_epi8(8));
            for (b, blk) in blocks.iter().enumerate() {
                let d = scale(blk.d);
                let bytes = _mm_loadu_si128(blk.qs.as_ptr() as *const __m128i);
                let lo = _mm_sub_epi8(_mm_and_si128(bytes, m4), eight);
                let hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(bytes), m4), eight);
                for (half, q) in [lo, hi].into_iter().enumerate() {
                    let o = out.as_mut_ptr().add(b * 32 + half * 16);
                    let a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
                    let c = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q)));
                    _mm256_storeu_ps(o, _mm256_mul_ps(d, a));
                    _mm256_storeu_ps(o.add(8), _mm256_mul_ps(d, c));
                }
            }
        }
    }
}

/// AVX-512 versions: a block's 32 values in two 16-lane vectors.
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    use std::arch::x86_64::*;

    use super::*;
    use crate::kernels::simd::avx512::tf;

    tf! {
    /// The block's scale broadcast to 16 lanes (F16C widening is exact).
    #[inline]
    unsafe fn scale(d: half::f16) -> __m512 {
        // Broadcast, then widen: an insert into a register would chain each block to the last.
        _mm512_cvtph_ps(_mm256_set1_epi16(d.to_bits() as i16))
    }

    /// Sixteen signed bytes times `d` into `o[..16]`.
    #[inline]
    unsafe fn widen16(q: __m128i, d: __m512, o: *mut f32) {
        // SAFETY: the caller's promise that `o` holds 16 floats.
        unsafe { _mm512_storeu_ps(o, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)))) }
    }

    /// [`super::q8_0_to_f32`].
    ///
    /// # Safety
    /// The AVX-512 path's features; `out` holds 32 floats per block.
    pub unsafe fn q8_0_to_f32(blocks: &[BlockQ8_0], out: &mut [f32]) {
        assert!(out.len() >= blocks.len() * 32, "q8_0_to_f32: output too short");
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            for (b, blk) in blocks.iter().enumerate() {
                let d = scale(blk.d);
                let q = blk.qs.as_ptr() as *const __m128i;
                let o = out.as_mut_ptr().add(b * 32);
                widen16(_mm_loadu_si128(q), d, o);
                widen16(_mm_loadu_si128(q.add(1)), d, o.add(16));
            }
        }
    }

    /// [`super::q4_0_to_f32`].
    ///
    /// # Safety
    /// The AVX-512 path's features; `out` holds 32 floats per block.
    pub unsafe fn q4_0_to_f32(blocks: &[BlockQ4_0], out: &mut [f32]) {
        assert!(out.len() >= blocks.len() * 32, "q4_0_to_f32: output too short");
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            let (m4, eight) = (_mm_set1_epi8(0x0f), _mm_set1_epi8(8));
            for (b, blk) in blocks.iter().enumerate() {
                let d = scale(blk.d);
                let bytes = _mm_loadu_si128(blk.qs.as_ptr() as *const __m128i);
                let o = out.as_mut_ptr().add(b * 32);
                widen16(_mm_sub_epi8(_mm_and_si128(bytes, m4), eight), d, o);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(bytes), m4);
                widen16(_mm_sub_epi8(hi, eight), d, o.add(16));
            }
        }
    }
    }
}

/// NEON versions.
#[cfg(target_arch = "aarch64")]
pub mod neon {
    use std::arch::aarch64::*;

    use super::*;

    /// Sixteen signed bytes times `d`, into `o[..16]`.
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn widen16(q: int8x16_t, d: f32, o: *mut f32) {
        // SAFETY: the caller's promise that `o` holds 16 floats.
        unsafe {
            let lo = vmovl_s8(vget_low_s8(q));
            let hi = vmovl_high_s8(q);
            for (i, h) in [lo, hi].into_iter().enumerate() {
                let a = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
                let b = vcvtq_f32_s32(vmovl_high_s16(h));
                vst1q_f32(o.add(8 * i), vmulq_n_f32(a, d));
                vst1q_f32(o.add(8 * i + 4), vmulq_n_f32(b, d));
            }
        }
    }

    /// [`super::q8_0_to_f32`].
    ///
    /// # Safety
    /// NEON; `out` holds 32 floats per block.
    #[target_feature(enable = "neon")]
    pub unsafe fn q8_0_to_f32(blocks: &[BlockQ8_0], out: &mut [f32]) {
        assert!(
            out.len() >= blocks.len() * 32,
            "q8_0_to_f32: output too short"
        );
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            for (b, blk) in blocks.iter().enumerate() {
                let d = blk.d.to_f32();
                let o = out.as_mut_ptr().add(b * 32);
                widen16(vld1q_s8(blk.qs.as_ptr()), d, o);
                widen16(vld1q_s8(blk.qs.as_ptr().add(16)), d, o.add(16));
            }
        }
    }

    /// [`super::q4_0_to_f32`].
    ///
    /// # Safety
    /// NEON; `out` holds 32 floats per block.
    #[target_feature(enable = "neon")]
    pub unsafe fn q4_0_to_f32(blocks: &[BlockQ4_0], out: &mut [f32]) {
        assert!(
            out.len() >= blocks.len() * 32,
            "q4_0_to_f32: output too short"
        );
        // SAFETY: this function's `# Safety` contract; every store is inside `out` (checked).
        unsafe {
            let eight = vdupq_n_s8(8);
            for (b, blk) in blocks.iter().enumerate() {
                let d = blk.d.to_f32();
                let bytes = vld1q_u8(blk.qs.as_ptr());
                let lo = vsubq_s8(
                    vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(0x0f))),
                    eight,
                );
                let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(bytes)), eight);
                let o = out.as_mut_ptr().add(b * 32);
                widen16(lo, d, o);
                widen16(hi, d, o.add(16));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;
    use crate::kernels::{Backend, CpuPath};

    /// Every path against the scalar twins over every code and a spread of scales.
    #[test]
    fn every_path_gives_the_scalar_bits() {
        let scales = [0.0, 1.0, -0.5, 6.1e-5, 65504.0, 1.0e-7, 0.3];
        let q8: Vec<BlockQ8_0> = (0..64)
            .map(|i| BlockQ8_0 {
                d: f16::from_f32(scales[i % scales.len()]),
                qs: std::array::from_fn(|j| ((i * 32 + j) % 256) as u8 as i8),
            })
            .collect();
        let q4: Vec<BlockQ4_0> = (0..64)
            .map(|i| BlockQ4_0 {
                d: f16::from_f32(scales[i % scales.len()]),
                qs: std::array::from_fn(|j| ((i * 16 + j) % 256) as u8),
            })
            .collect();
        let scalar = Backend::for_path(CpuPath::Scalar).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for b in Backend::available() {
            let (mut got, mut want) = (vec![0f32; 64 * 32], vec![0f32; 64 * 32]);
            b.q8_0_to_f32(&q8, &mut got);
            scalar.q8_0_to_f32(&q8, &mut want);
            assert_eq!(bits(&got), bits(&want), "{} q8_0", b.path());
            b.q4_0_to_f32(&q4, &mut got);
            scalar.q4_0_to_f32(&q4, &mut want);
            assert_eq!(bits(&got), bits(&want), "{} q4_0", b.path());
        }
        assert_eq!(want_q4_first(&q4), [0.0; 4], "a zero scale gives zeros");
    }

    fn want_q4_first(q4: &[BlockQ4_0]) -> [f32; 4] {
        let mut out = vec![0f32; 32];
        q4_0_to_f32(&q4[..1], &mut out);
        [out[0], out[1], out[16], out[31]]
    }
}
