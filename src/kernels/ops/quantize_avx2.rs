//! AVX2 twins of the activation quantizers in [`crate::quant::activation`], bit-identical to
//! them (tested). The crate is built for baseline x86-64, where the scalar ones compile to
//! SSE2 with a NaN check per element: 6% of a prompt pass on the 1.5B model.
//!
//! # Safety
//! Every `pub unsafe fn` requires AVX2 and FMA (the backends check).

use std::arch::x86_64::*;

use half::f16;

use crate::quant::activation::q8_k_scale;
use crate::quant::blocks::{BlockQ8K, BlockQ8_0};
use crate::quant::types::QK_K;

/// 1.5 * 2^23, as in the scalar quantizers' rounding.
const ROUND: f32 = 12_582_912.0;

/// `|v|`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn abs(v: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
}

/// The largest lane.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn hmax(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// Largest |x| of `n` floats at `x` (a multiple of 8). NaN never wins, as in the scalar
/// scan: `max_ps` returns its second operand when either is NaN.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn amax(x: *const f32, n: usize) -> f32 {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        let mut m = _mm256_setzero_ps();
        for i in (0..n).step_by(8) {
            m = _mm256_max_ps(abs(_mm256_loadu_ps(x.add(i))), m);
        }
        hmax(m)
    }
}

/// `round_ties_even(v * s)` as i32 lanes, NaN as 0 (the scalar `as` casts' result): the
/// product, then the add-and-subtract rounding, unfused as in the scalar code.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn round_scaled(v: __m256, s: __m256) -> __m256i {
    let round = _mm256_set1_ps(ROUND);
    let r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v, s), round), round);
    let r = _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(r, r));
    _mm256_cvttps_epi32(r)
}

/// 32 i32 lanes (in -128..=127) to 32 bytes, in order.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack32(q: [__m256i; 4], out: *mut i8) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        // The packs work within 128-bit halves; the permute puts the quarters back in order.
        let w01 = _mm256_packs_epi32(q[0], q[1]);
        let w23 = _mm256_packs_epi32(q[2], q[3]);
        let b = _mm256_packs_epi16(w01, w23);
        let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(out as *mut __m256i, b);
    }
}

/// [`crate::quant::activation::quantize_row_q8_0`].
///
/// # Safety
/// See the module docs; `x.len() == 32 * out.len()`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        assert_eq!(
            x.len(),
            out.len() * 32,
            "quantize_row_q8_0: length mismatch"
        );
        for (xb, yb) in x.chunks_exact(32).zip(out.iter_mut()) {
            let p = xb.as_ptr();
            let amax = amax(p, 32);
            let d = amax / 127.0;
            let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
            yb.d = f16::from_f32(d);
            let q = each!(4, _mm256_setzero_si256(), |i| {
                round_scaled(_mm256_loadu_ps(p.add(8 * i)), id)
            });
            pack32(q, yb.qs.as_mut_ptr());
        }
    }
}

/// [`crate::quant::activation::quantize_row_q8_k`].
///
/// # Safety
/// See the module docs; `x.len() == 256 * out.len()`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    // SAFETY: this function's `# Safety` contract, which the caller upholds.
    unsafe {
        assert_eq!(
            x.len(),
            out.len() * QK_K,
            "quantize_row_q8_k: length mismatch"
        );
        for (xb, yb) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
            let p = xb.as_ptr();
            let Some(iscale) = q8_k_scale(xb, amax(p, QK_K), yb) else {
                continue;
            };
            let s = _mm256_set1_ps(iscale);
            // 64 quants (4 groups of 16) per step; each group's sum from its two i32 vectors.
            for c in 0..QK_K / 64 {
                // The scalar code's cap at 127, although |iscale * v| <= 127 up to a rounding.
                let cap = _mm256_set1_epi32(127);
                let q = each!(8, _mm256_setzero_si256(), |i| {
                    let v = _mm256_loadu_ps(p.add(64 * c + 8 * i));
                    _mm256_min_epi32(round_scaled(v, s), cap)
                });
                pack32([q[0], q[1], q[2], q[3]], yb.qs.as_mut_ptr().add(64 * c));
                pack32(
                    [q[4], q[5], q[6], q[7]],
                    yb.qs.as_mut_ptr().add(64 * c + 32),
                );
                let g = each!(4, _mm256_setzero_si256(), |i| {
                    _mm256_add_epi32(q[2 * i], q[2 * i + 1])
                });
                let h =
                    _mm256_hadd_epi32(_mm256_hadd_epi32(g[0], g[1]), _mm256_hadd_epi32(g[2], g[3]));
                let sums =
                    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                let mut s4 = [0i32; 4];
                _mm_storeu_si128(s4.as_mut_ptr() as *mut __m128i, sums);
                for (k, &v) in s4.iter().enumerate() {
                    yb.bsums[4 * c + k] = v as i16;
                }
            }
            yb.d = 1.0 / iscale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::activation as scalar;

    /// Blocks of random values of three scales, plus ties, NaN, infinities, zeros and equal
    /// magnitudes of both signs.
    fn inputs() -> Vec<f32> {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut x: Vec<f32> = (0..QK_K * 12)
            .map(|i| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let u = (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                u * [1.0, 1e-3, 300.0][i / QK_K % 3]
            })
            .collect();
        let b = &mut x[QK_K * 9..QK_K * 10];
        b.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i as f32 - 128.0) * 0.5);
        b[3] = 64.0;
        b[40] = -64.0;
        x[QK_K * 10 + 5] = f32::NAN;
        x[QK_K * 10 + 77] = f32::INFINITY;
        x[QK_K * 11..].iter_mut().for_each(|v| *v = 0.0);
        x[QK_K * 11 + 100] = -1e-30;
        x
    }

    #[test]
    fn quantizers_match_the_scalar_ones_bit_for_bit() {
        if !crate::kernels::CpuPath::Avx2.is_available() {
            return;
        }
        let x = inputs();
        let zero8 = BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32],
        };
        let (mut got, mut want) = (vec![zero8; x.len() / 32], vec![zero8; x.len() / 32]);
        // SAFETY: AVX2 and FMA were detected.
        unsafe { quantize_row_q8_0(&x, &mut got) };
        scalar::quantize_row_q8_0(&x, &mut want);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                (g.d.to_bits(), g.qs),
                (w.d.to_bits(), w.qs),
                "q8_0 block {i}"
            );
        }
        let zk = BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; 16],
        };
        let (mut got, mut want) = (vec![zk; x.len() / QK_K], vec![zk; x.len() / QK_K]);
        // SAFETY: as above.
        unsafe { quantize_row_q8_k(&x, &mut got) };
        scalar::quantize_row_q8_k(&x, &mut want);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.d.to_bits(), w.d.to_bits(), "q8_k block {i}");
            assert_eq!((g.qs, g.bsums), (w.qs, w.bsums), "q8_k block {i}");
        }
    }
}
