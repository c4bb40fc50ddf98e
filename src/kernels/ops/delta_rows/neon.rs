//! NEON version of [`super::delta_rows`].
//!
//! # Safety
//! Every `pub unsafe fn` here requires NEON, and the shapes the backend checks.

use std::arch::aarch64::*;

/// [`super::delta_rows`], 4 lanes at a time with two accumulators (a row's tail in scalar):
/// two passes over each row while it sits in L1, as the AVX2 version.
#[target_feature(enable = "neon")]
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
    // SAFETY: this function's `# Safety` contract; every load and store is below `body` (or
    // `hk` for the tails) of a row of `hk` floats inside `s`, or of `q` and `k`.
    unsafe {
        let (kp, qp) = (k.as_ptr(), q.as_ptr());
        for (j, row) in s.chunks_exact_mut(hk.max(1)).enumerate() {
            let p = row.as_mut_ptr();
            let (mut a0, mut a1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
            for i in (0..body).step_by(8) {
                let x0 = vmulq_n_f32(vld1q_f32(p.add(i)), decay);
                let x1 = vmulq_n_f32(vld1q_f32(p.add(i + 4)), decay);
                vst1q_f32(p.add(i), x0);
                vst1q_f32(p.add(i + 4), x1);
                a0 = vfmaq_f32(a0, x0, vld1q_f32(kp.add(i)));
                a1 = vfmaq_f32(a1, x1, vld1q_f32(kp.add(i + 4)));
            }
            let mut sk = vaddvq_f32(vaddq_f32(a0, a1));
            for i in body..hk {
                *p.add(i) *= decay;
                sk += *p.add(i) * *kp.add(i);
            }
            let delta = (v[j] - sk) * beta;
            let (mut a0, mut a1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
            for i in (0..body).step_by(8) {
                let x0 = vfmaq_n_f32(vld1q_f32(p.add(i)), vld1q_f32(kp.add(i)), delta);
                let x1 = vfmaq_n_f32(vld1q_f32(p.add(i + 4)), vld1q_f32(kp.add(i + 4)), delta);
                vst1q_f32(p.add(i), x0);
                vst1q_f32(p.add(i + 4), x1);
                a0 = vfmaq_f32(a0, x0, vld1q_f32(qp.add(i)));
                a1 = vfmaq_f32(a1, x1, vld1q_f32(qp.add(i + 4)));
            }
            let mut sq = vaddvq_f32(vaddq_f32(a0, a1));
            for i in body..hk {
                *p.add(i) += delta * *kp.add(i);
                sq += *p.add(i) * *qp.add(i);
            }
            o[j] = sq * scale;
        }
    }
}
