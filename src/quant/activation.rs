//! 8-bit activation quantizers, bit-exact with the ones llama.cpp runs on x86
//! (`quantize_row_q8_0`'s AVX path, `quantize_row_q8_K_ref`), so integer dot products see the
//! same activations llama.cpp would.

use half::f16;

use super::blocks::{BlockQ8K, BlockQ8_0};
use super::types::QK_K;

/// Elements per Q8_0 block.
pub const QK8_0: usize = 32;

/// `x.round_ties_even()` for |x| < 2^22 without a call into libm (baseline x86-64 has no
/// rounding instruction, so `round_ties_even` becomes a `rintf` call per element, 3-5% of
/// prompt processing). Adding and subtracting 1.5 * 2^23 leaves the nearest integer, ties to
/// even, in the default rounding mode; quantized activations are within +-128, and NaN stays
/// NaN.
#[inline(always)]
fn round_ties_even_small(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    (x + MAGIC) - MAGIC
}

/// Quantizes `x` into Q8_0 blocks: per 32 values `d = amax / 127`, `q = round(x * 127 / amax)`
/// with ties to even, `d` stored as f16.
///
/// # Panics
/// If `x.len() != 32 * out.len()`.
pub fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    assert_eq!(
        x.len(),
        out.len() * QK8_0,
        "quantize_row_q8_0: length mismatch"
    );
    for (xb, yb) in x.chunks_exact(QK8_0).zip(out.iter_mut()) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        // ggml's x86 quantizer multiplies by 127/amax and rounds half to even; matching it
        // (rather than the portable reference's 1/d and roundf) keeps logits on llama.cpp's.
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        yb.d = f16::from_f32(d);
        for (q, &v) in yb.qs.iter_mut().zip(xb) {
            // |v * id| <= 127 up to one rounding; `as` saturates anyway.
            *q = round_ties_even_small(v * id) as i8;
        }
    }
}

/// Quantizes `x` into Q8_K blocks: per 256 values take the signed value of largest magnitude
/// `max`, `iscale = -127 / max`, `q = min(127, nearest_int(iscale * x))` (ties to even, as
/// ggml's float trick does), `d = 1 / iscale`, and `bsums` the sums of each 16 quants.
///
/// # Panics
/// If `x.len() != 256 * out.len()`.
pub fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    assert_eq!(
        x.len(),
        out.len() * QK_K,
        "quantize_row_q8_k: length mismatch"
    );
    for (xb, yb) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        // The largest magnitude in 16 lanes (max is exact in any order; NaN never wins, as in
        // the sequential scan), then the first value of that magnitude: its sign matters (the
        // extreme value maps to exactly -127). The lanes let even the baseline build use
        // packed max; x86 with AVX2 runs `kernels::avx2_quantize`'s twin instead.
        let mut lanes = [0.0f32; 16];
        for c in xb.chunks_exact(16) {
            for (m, &v) in lanes.iter_mut().zip(c) {
                *m = m.max(v.abs());
            }
        }
        let amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
        let Some(iscale) = q8_k_scale(xb, amax, yb) else {
            continue;
        };
        for (q, &v) in yb.qs.iter_mut().zip(xb) {
            // NaN becomes 0 through `as i32` (before the cap, which would make it 127).
            *q = (round_ties_even_small(iscale * v) as i32).min(127) as i8;
        }
        for (s, g) in yb.bsums.iter_mut().zip(yb.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        yb.d = 1.0 / iscale;
    }
}

/// Q8_K's `iscale = -127 / max` from a block's largest magnitude `amax`: `max` is the first
/// element of that magnitude (its sign matters). `None`, with `out` zeroed, for an all-zero
/// block.
pub(crate) fn q8_k_scale(xb: &[f32], amax: f32, out: &mut BlockQ8K) -> Option<f32> {
    if amax == 0.0 {
        out.d = 0.0;
        out.qs = [0; QK_K];
        out.bsums = [0; QK_K / 16];
        return None;
    }
    let max = *xb
        .iter()
        .find(|v| v.abs() == amax)
        .expect("amax is some element's magnitude");
    Some(-127.0 / max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_rounding_equals_round_ties_even_in_range() {
        // Every tie (k + 0.5), its neighbours one ulp away, and a dense sweep of [-130, 130].
        for k in -130..130 {
            let tie = k as f32 + 0.5;
            for x in [tie, tie.next_up(), tie.next_down(), k as f32] {
                assert_eq!(round_ties_even_small(x), x.round_ties_even(), "x = {x}");
            }
        }
        for i in -2_600_000..2_600_000 {
            let x = i as f32 * 5e-5;
            assert_eq!(round_ties_even_small(x), x.round_ties_even(), "x = {x}");
        }
        assert!(round_ties_even_small(f32::NAN).is_nan());
    }

    fn zero_q8_0() -> BlockQ8_0 {
        BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32],
        }
    }

    fn zero_q8_k() -> BlockQ8K {
        BlockQ8K {
            d: 0.0,
            qs: [0; QK_K],
            bsums: [0; 16],
        }
    }

    #[test]
    fn q8_0_known_values() {
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = -63.5; // tie: rounds to even (-64)
        x[2] = 0.5; // tie: rounds to even (0), as x86 ggml's _mm256_round_ps does
        x[3] = -0.49;
        x[4] = 1.5; // tie: to even (2)
        let mut y = [zero_q8_0()];
        quantize_row_q8_0(&x, &mut y);
        assert_eq!(y[0].d.to_f32(), 1.0);
        assert_eq!(&y[0].qs[..6], &[127, -64, 0, 0, 2, 0]);

        let mut y = [zero_q8_0()];
        quantize_row_q8_0(&[0.0; 32], &mut y);
        assert_eq!(y[0].d.to_f32(), 0.0);
        assert!(y[0].qs.iter().all(|&q| q == 0));
    }

    #[test]
    fn q8_k_known_values() {
        let mut x = [0.0f32; QK_K];
        x[0] = -127.0; // the extreme value is negative: iscale = 1
        x[1] = 0.5; // ties to even
        x[2] = 1.5;
        x[3] = 2.5;
        x[20] = 127.0;
        let mut y = [zero_q8_k()];
        quantize_row_q8_k(&x, &mut y);
        assert_eq!(y[0].d, 1.0);
        assert_eq!(&y[0].qs[..4], &[-127, 0, 2, 2]);
        assert_eq!(y[0].qs[20], 127);
        assert_eq!(y[0].bsums[0], -127 + 4);
        assert_eq!(y[0].bsums[1], 127);
        assert!(y[0].bsums[2..].iter().all(|&s| s == 0));

        // Positive extreme: iscale = -127/max is negative, so d is negative too.
        let mut x = [0.0f32; QK_K];
        x[5] = 2.0;
        x[6] = -1.0;
        let mut y = [zero_q8_k()];
        quantize_row_q8_k(&x, &mut y);
        assert_eq!(y[0].d, -2.0 / 127.0);
        assert_eq!((y[0].qs[5], y[0].qs[6]), (-127, 64));

        let mut y = [zero_q8_k()];
        quantize_row_q8_k(&[0.0; QK_K], &mut y);
        assert_eq!(y[0].d, 0.0);
    }

    /// The definition, one element at a time (llama.cpp's `quantize_row_q8_K_ref`).
    fn q8_k_sequential(xb: &[f32]) -> BlockQ8K {
        let mut y = zero_q8_k();
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            return y;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(xb) {
            *q = ((iscale * v).round_ties_even() as i32).min(127) as i8;
        }
        for (s, g) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| q as i16).sum();
        }
        y.d = 1.0 / iscale;
        y
    }

    #[test]
    fn q8_k_matches_the_sequential_definition() {
        let mut blocks: Vec<Vec<f32>> = (0..40)
            .map(|seed| rand_vec(QK_K, seed, [1.0, 1e-3, 300.0][seed as usize % 3]))
            .collect();
        // Equal magnitudes of both signs (the first one decides), NaN, ties, one non-zero.
        let mut b = vec![0.5f32; QK_K];
        b[7] = 3.0;
        b[9] = -3.0;
        blocks.push(b.clone());
        b[7] = -3.0;
        b[9] = 3.0;
        b[100] = f32::NAN;
        blocks.push(b);
        blocks.push((0..QK_K).map(|i| (i as f32 - 128.0) * 0.5).collect());
        let mut one = vec![0.0f32; QK_K];
        one[255] = -1e-30;
        blocks.push(one);
        for xb in &blocks {
            let mut y = [zero_q8_k()];
            quantize_row_q8_k(xb, &mut y);
            let want = q8_k_sequential(xb);
            assert_eq!(y[0].d.to_bits(), want.d.to_bits());
            assert_eq!((y[0].qs, y[0].bsums), (want.qs, want.bsums));
        }
    }

    /// Cheap deterministic pseudo-random floats in [-scale, scale).
    fn rand_vec(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    }

    #[test]
    fn round_trip_error_bounds() {
        for (seed, scale) in [(1u64, 1.0f32), (2, 1e-3), (3, 300.0)] {
            let x = rand_vec(QK_K * 4, seed, scale);
            let mut y0 = vec![zero_q8_0(); x.len() / 32];
            quantize_row_q8_0(&x, &mut y0);
            for (xb, b) in x.chunks(32).zip(&y0) {
                let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let d = b.d.to_f32();
                // Half a step from rounding plus the f16 rounding of d: relative 2^-11, or
                // absolute 2^-25 (times |q| <= 127) once d is an f16 subnormal.
                let tol = amax / 127.0 * 0.5 + amax * 2f32.powi(-11) + 127.0 * 2f32.powi(-25);
                for (&v, &q) in xb.iter().zip(&b.qs) {
                    assert!((v - d * q as f32).abs() <= tol * 1.0001, "q8_0 {v} {q} {d}");
                }
            }
            let mut yk = vec![zero_q8_k(); x.len() / QK_K];
            quantize_row_q8_k(&x, &mut yk);
            for (xb, b) in x.chunks(QK_K).zip(&yk) {
                let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let tol = amax / 127.0 * 0.5 * 1.0001;
                for (&v, &q) in xb.iter().zip(&b.qs) {
                    assert!((v - b.d * q as f32).abs() <= tol, "q8_k {v} {q} {}", b.d);
                }
                for (g, &s) in b.qs.chunks(16).zip(&b.bsums) {
                    assert_eq!(g.iter().map(|&q| q as i32).sum::<i32>(), s as i32);
                }
            }
        }
    }
}
