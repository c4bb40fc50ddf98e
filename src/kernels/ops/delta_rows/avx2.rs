//! AVX2 version of [`super::delta_rows`].
//!
//! # Safety
//! Every `pub unsafe fn` here requires AVX2 and FMA, and the shapes the backend checks.

use std::arch::x86_64::*;

use crate::kernels::simd::avx2::hsum_ps;

/// [`super::delta_rows`], 8 lanes at a time (a row's tail in scalar): two passes over each row
/// while it sits in L1, the first decaying it and dotting it with `k`, the second correcting it
/// and dotting it with `q`.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn delta_rows(
    s: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    gates: [f32; 3],
    o: &mut [f32],
) {
    let [decay, beta, scale] = gates;
    let hk = k.len();
    let body = hk / 8 * 8;
    // SAFETY: this function's `# Safety` contract; every load and store is below `body` of a
    // row of `hk` floats inside `s`, or of `q` and `k` (each `hk` long).
    unsafe {
        let dv = _mm256_set1_ps(decay);
        for (j, row) in s.chunks_exact_mut(hk.max(1)).enumerate() {
            let p = row.as_mut_ptr();
            let mut acc = _mm256_setzero_ps();
            for i in (0..body).step_by(8) {
                let x = _mm256_mul_ps(_mm256_loadu_ps(p.add(i)), dv);
                _mm256_storeu_ps(p.add(i), x);
                acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(k.as_ptr().add(i)), acc);
            }
            let mut sk = hsum_ps(acc);
            for (i, &kk) in k.iter().enumerate().skip(body) {
                *p.add(i) *= decay;
                sk += *p.add(i) * kk;
            }
            let delta = (v[j] - sk) * beta;
            let dd = _mm256_set1_ps(delta);
            let mut acc = _mm256_setzero_ps();
            for i in (0..body).step_by(8) {
                let x = _mm256_fmadd_ps(
                    dd,
                    _mm256_loadu_ps(k.as_ptr().add(i)),
                    _mm256_loadu_ps(p.add(i)),
                );
                _mm256_storeu_ps(p.add(i), x);
                acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(q.as_ptr().add(i)), acc);
            }
            let mut sq = hsum_ps(acc);
            for (i, (&kk, &qq)) in k.iter().zip(q).enumerate().skip(body) {
                *p.add(i) += delta * kk;
                sq += *p.add(i) * qq;
            }
            o[j] = sq * scale;
        }
    }
}
