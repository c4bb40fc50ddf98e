//! `exp` for the attention softmax and SwiGLU's sigmoid: one polynomial, vectorised, the same
//! bits on every path.
//!
//! libm's `expf` is a call per element: 6% of a prompt pass. This is the classic reduction
//! `x = n ln2 + r` with |r| <= ln2 / 2, `e^r` by a degree-7 polynomial (Cephes' `expf`
//! coefficients) and `2^n` written into the exponent bits. The scalar twin does the same
//! fused multiply-adds in the same order, so every path gives the same bits (tested); the
//! result is within 2 ulp of libm's (tested).
//!
//! Range: below `LO` (`ln 2^-126`) the result is 0 (libm gives subnormals there, down to
//! 1e-45); above `HI` it is +inf (libm still has finite values up to 88.72). Neither
//! changes a softmax or a sigmoid beyond rounding. NaN stays NaN.

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts: `n * LN2_HI` is exact for the n in range (8 significant bits).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 * 2^23: adding it rounds to an integer (ties to even) held in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;
const HI: f32 = 88.376_26;
const LO: f32 = -87.336_55;
/// `e^r ~ 1 + r + r^2 * P(r)`, P of degree 5.
const P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];

/// The scalar twin: `e^x` by the steps above.
#[inline]
pub fn exp(x: f32) -> f32 {
    let t = x.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p = P[0];
    for &c in &P[1..] {
        p = p.mul_add(r, c);
    }
    let y = p.mul_add(r * r, r) + 1.0;
    // n in -126..=127 here, so the biased exponent n + 127 is in 1..=254.
    let n_int = t.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let scale = f32::from_bits(((n_int + 127) as u32) << 23);
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y * scale
    }
}

/// Lanes of the sums in [`shifted_sum`]: every path adds element `i` into lane `i % 16`,
/// then the lanes in order, then the tail.
pub(crate) const LANES: usize = 16;

/// A backend's `e^(x - shift)` over whole runs of [`LANES`] (`x.len()` a multiple of it), in
/// place; returns the lane sums.
pub type LanesFn = unsafe fn(&mut [f32], f32) -> [f32; LANES];

/// The scalar [`LanesFn`].
pub fn shifted_lanes(x: &mut [f32], shift: f32) -> [f32; LANES] {
    let mut lanes = [0f32; LANES];
    for c in x.chunks_exact_mut(LANES) {
        for (l, v) in lanes.iter_mut().zip(c) {
            *v = exp(*v - shift);
            *l += *v;
        }
    }
    lanes
}

/// `x[i] = e^(x[i] - shift)`; returns the sum of the new values, in the lane order above.
///
/// # Safety
/// `lanes` must run on this CPU.
pub unsafe fn shifted_sum(lanes: LanesFn, x: &mut [f32], shift: f32) -> f32 {
    let body = x.len() / LANES * LANES;
    // SAFETY: the caller's promise; the body is whole runs of lanes.
    let lanes = unsafe { lanes(&mut x[..body], shift) };
    let mut sum = lanes.iter().fold(0.0, |s, &l| s + l);
    for v in &mut x[body..] {
        *v = exp(*v - shift);
        sum += *v;
    }
    sum
}

/// A backend's SwiGLU over a prefix of `gate` (up to `up`'s length); returns how many elements
/// it did.
pub type PrefixFn = unsafe fn(&mut [f32], &[f32]) -> usize;

/// The scalar twin does no prefix: [`swiglu`] does every element.
pub fn no_prefix(_: &mut [f32], _: &[f32]) -> usize {
    0
}

/// `gate[i] = silu(gate[i]) * up[i]`, `silu(x) = x / (1 + e^-x)`, with `prefix` doing what it
/// can first.
///
/// # Safety
/// `prefix` must run on this CPU.
pub unsafe fn swiglu(prefix: PrefixFn, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: lengths differ");
    // SAFETY: the caller's promise.
    let done = unsafe { prefix(gate, up) };
    for (g, &u) in gate[done..].iter_mut().zip(&up[done..]) {
        *g = *g / (1.0 + exp(-*g)) * u;
    }
}

/// The AVX2 + FMA versions.
#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    use std::arch::x86_64::*;

    use super::*;

    /// [`exp`] on 8 lanes, step for step.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn exp8(x: __m256) -> __m256 {
        let round = _mm256_set1_ps(ROUND);
        let t = _mm256_fmadd_ps(x, _mm256_set1_ps(LOG2E), round);
        let n = _mm256_sub_ps(t, round);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(P[0]);
        for &c in &P[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let y = _mm256_add_ps(
            _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
            _mm256_set1_ps(1.0),
        );
        let bits = _mm256_sub_epi32(
            _mm256_castps_si256(t),
            _mm256_set1_epi32(ROUND.to_bits() as i32),
        );
        let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
            bits,
            _mm256_set1_epi32(127),
        )));
        let v = _mm256_mul_ps(y, scale);
        let v = _mm256_blendv_ps(
            v,
            _mm256_set1_ps(f32::INFINITY),
            _mm256_cmp_ps::<_CMP_GT_OQ>(x, _mm256_set1_ps(HI)),
        );
        _mm256_blendv_ps(
            v,
            _mm256_setzero_ps(),
            _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(LO)),
        )
    }

    /// [`super::shifted_lanes`].
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn shifted_lanes(x: &mut [f32], shift: f32) -> [f32; LANES] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let s = _mm256_set1_ps(shift);
            let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for c in x.chunks_exact_mut(LANES) {
                let p = c.as_mut_ptr();
                let e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(p), s));
                let e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(p.add(8)), s));
                _mm256_storeu_ps(p, e0);
                _mm256_storeu_ps(p.add(8), e1);
                a0 = _mm256_add_ps(a0, e0);
                a1 = _mm256_add_ps(a1, e1);
            }
            let mut lanes = [0f32; LANES];
            _mm256_storeu_ps(lanes.as_mut_ptr(), a0);
            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), a1);
            lanes
        }
    }

    /// SwiGLU on the whole 8-float chunks; returns how many elements it did.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn swiglu(gate: &mut [f32], up: &[f32]) -> usize {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let n = gate.len().min(up.len()) / 8 * 8;
            let one = _mm256_set1_ps(1.0);
            for i in (0..n).step_by(8) {
                let g = _mm256_loadu_ps(gate.as_ptr().add(i));
                let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
                let silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
                let v = _mm256_mul_ps(silu, _mm256_loadu_ps(up.as_ptr().add(i)));
                _mm256_storeu_ps(gate.as_mut_ptr().add(i), v);
            }
            n
        }
    }
}

/// The AVX-512 [`shifted_lanes`]: one 16-lane vector per run, so each lane is its own sum.
#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    use std::arch::x86_64::*;

    use super::*;
    use crate::kernels::simd::avx512::tf;

    tf! {
    /// [`exp`] on 16 lanes, step for step.
    #[inline]
    unsafe fn exp16(x: __m512) -> __m512 {
        let round = _mm512_set1_ps(ROUND);
        let t = _mm512_fmadd_ps(x, _mm512_set1_ps(LOG2E), round);
        let n = _mm512_sub_ps(t, round);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(P[0]);
        for &c in &P[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
        let bits = _mm512_sub_epi32(
            _mm512_castps_si512(t),
            _mm512_set1_epi32(ROUND.to_bits() as i32),
        );
        let scale = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
            bits,
            _mm512_set1_epi32(127),
        )));
        let v = _mm512_mul_ps(y, scale);
        let v = _mm512_mask_mov_ps(
            v,
            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(HI)),
            _mm512_set1_ps(f32::INFINITY),
        );
        _mm512_mask_mov_ps(
            v,
            _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(LO)),
            _mm512_setzero_ps(),
        )
    }

    /// [`super::shifted_lanes`].
    ///
    /// # Safety
    /// The AVX-512 path's features.
    pub unsafe fn shifted_lanes(x: &mut [f32], shift: f32) -> [f32; LANES] {
        // SAFETY: this function's `# Safety` contract, which the caller upholds.
        unsafe {
            let s = _mm512_set1_ps(shift);
            let mut acc = _mm512_setzero_ps();
            for c in x.chunks_exact_mut(LANES) {
                let p = c.as_mut_ptr();
                let e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p), s));
                _mm512_storeu_ps(p, e);
                acc = _mm512_add_ps(acc, e);
            }
            let mut lanes = [0f32; LANES];
            _mm512_storeu_ps(lanes.as_mut_ptr(), acc);
            lanes
        }
    }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Backend, CpuPath};

    /// Distance in representable floats (same sign, finite).
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_within_two_ulp_of_libm() {
        let mut worst = 0;
        let mut x = LO;
        while x < HI {
            let (got, want) = (exp(x), x.exp());
            worst = worst.max(ulps(got, want));
            x += 0.000_37;
        }
        assert!(worst <= 2, "worst {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }

    /// Inputs that cover the range, its edges, specials and ties of the rounding.
    fn inputs(n: usize) -> Vec<f32> {
        let special = [
            0.0,
            -0.0,
            LO,
            HI,
            LO - 1e-3,
            HI + 1e-3,
            0.5 * std::f32::consts::LN_2,
            -1.5 * std::f32::consts::LN_2,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-30,
        ];
        (0..n)
            .map(|i| match i % 3 {
                0 => special[i / 3 % special.len()],
                _ => ((i as f32 * 0.618_034).fract() - 0.8) * 120.0,
            })
            .collect()
    }

    #[test]
    fn every_path_gives_the_scalar_bits() {
        let scalar = Backend::for_path(CpuPath::Scalar).unwrap();
        for b in Backend::available() {
            let path = b.path();
            for len in (0..40).chain([255, 256, 1000]) {
                let x = inputs(len);
                for shift in [0.0, 3.5, f32::NEG_INFINITY] {
                    let (mut got, mut want) = (x.clone(), x.clone());
                    let s_got = b.exp_shifted_sum(&mut got, shift);
                    let s_want = scalar.exp_shifted_sum(&mut want, shift);
                    let same = |a: &[f32], b: &[f32]| {
                        a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits())
                    };
                    assert!(same(&got, &want), "{path} exp len {len}");
                    assert!(same(&[s_got], &[s_want]), "{path} sum len {len}");
                }
                let up: Vec<f32> = x.iter().rev().map(|v| v * 0.25).collect();
                let (mut got, mut want) = (x.clone(), x.clone());
                b.swiglu(&mut got, &up);
                scalar.swiglu(&mut want, &up);
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{path} swiglu len {len}"
                );
            }
        }
    }

    #[test]
    fn shifted_sum_is_the_sum_of_the_exps() {
        let mut x: Vec<f32> = (0..100).map(|i| i as f32 * 0.1).collect();
        let max = 9.9;
        let sum = crate::kernels::backend().exp_shifted_sum(&mut x, max);
        let want: f64 = (0..100).map(|i| ((i as f64 * 0.1) - 9.9).exp()).sum();
        assert!((sum as f64 - want).abs() < 1e-5 * want, "{sum} vs {want}");
        assert!((x[99] - 1.0).abs() < 1e-6);
    }
}
