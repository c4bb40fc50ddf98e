//! Causal grouped-query attention over the KV cache.
//!
//! Each (token, kv-head) task computes the scores of all query heads sharing that kv head, so a
//! key row is converted from f16 once per group. Softmax is computed per query over only the
//! visible positions (causal, and the sliding window on local layers): memory per task is
//! O(n_kv), never n_ctx x n_ctx.

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

pub struct AttentionShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub scale: f32,
    /// 0: attend to every earlier position; else only to the last `window` positions.
    pub window: usize,
}

/// `q`: [n_tokens, n_head * head_dim_k] (already roped), for positions `pos0..pos0+n_tokens`,
/// whose keys/values are already in the cache. Writes `out`: [n_tokens, n_head * head_dim_v].
pub fn attention(
    s: &AttentionShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    pos0: usize,
    out: &mut [f32],
) {
    let q_row = s.n_head * s.head_dim_k;
    let out_row = s.n_head * s.head_dim_v;
    let group = s.n_head / s.n_head_kv;
    let k_dim = s.n_head_kv * s.head_dim_k;
    let v_dim = s.n_head_kv * s.head_dim_v;
    // One task per (token, kv head): its output is the contiguous run of `group` heads.
    out.par_chunks_mut(group * s.head_dim_v).enumerate().for_each(|(task, out_group)| {
        let t = task / s.n_head_kv;
        let kvh = task % s.n_head_kv;
        let pos = pos0 + t;
        let first = if s.window > 0 { (pos + 1).saturating_sub(s.window) } else { 0 };
        let n_kv = pos + 1 - first;
        let q_t = &q[t * q_row..(t + 1) * q_row];

        let mut scores = vec![0f32; group * n_kv];
        let mut k_f32 = vec![0f32; s.head_dim_k];
        for (j, p) in (first..=pos).enumerate() {
            let off = p * k_dim + kvh * s.head_dim_k;
            keys[off..off + s.head_dim_k].convert_to_f32_slice(&mut k_f32);
            for g in 0..group {
                let h = kvh * group + g;
                let qh = &q_t[h * s.head_dim_k..(h + 1) * s.head_dim_k];
                scores[g * n_kv + j] = dot(qh, &k_f32) * s.scale;
            }
        }
        for g in 0..group {
            softmax_inplace(&mut scores[g * n_kv..(g + 1) * n_kv]);
        }
        out_group.fill(0.0);
        let mut v_f32 = vec![0f32; s.head_dim_v];
        for (j, p) in (first..=pos).enumerate() {
            let off = p * v_dim + kvh * s.head_dim_v;
            values[off..off + s.head_dim_v].convert_to_f32_slice(&mut v_f32);
            for g in 0..group {
                let w = scores[g * n_kv + j];
                let o = &mut out_group[g * s.head_dim_v..(g + 1) * s.head_dim_v];
                for (o, &v) in o.iter_mut().zip(&v_f32) {
                    *o += w * v;
                }
            }
        }
    });
    debug_assert_eq!(out.len() % out_row, 0);
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight partial sums let the compiler vectorise without reassociating a single chain.
    let mut acc = [0f32; 8];
    let chunks = a.len() / 8 * 8;
    for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += ca[i] * cb[i];
        }
    }
    let tail: f32 = a[chunks..].iter().zip(&b[chunks..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

fn softmax_inplace(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference: per head, full softmax over visible positions in f32.
    fn naive(s: &AttentionShape, q: &[f32], k: &[f32], v: &[f32], pos0: usize, n: usize) -> Vec<f32> {
        let group = s.n_head / s.n_head_kv;
        let mut out = vec![0.0; n * s.n_head * s.head_dim_v];
        for t in 0..n {
            let pos = pos0 + t;
            for h in 0..s.n_head {
                let kvh = h / group;
                let first = if s.window > 0 { (pos + 1).saturating_sub(s.window) } else { 0 };
                let qh = &q[(t * s.n_head + h) * s.head_dim_k..][..s.head_dim_k];
                let sc: Vec<f32> = (first..=pos)
                    .map(|p| {
                        let kr = &k[(p * s.n_head_kv + kvh) * s.head_dim_k..][..s.head_dim_k];
                        qh.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>() * s.scale
                    })
                    .collect();
                let m = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let e: Vec<f32> = sc.iter().map(|x| (x - m).exp()).collect();
                let z: f32 = e.iter().sum();
                for (j, p) in (first..=pos).enumerate() {
                    let vr = &v[(p * s.n_head_kv + kvh) * s.head_dim_v..][..s.head_dim_v];
                    for d in 0..s.head_dim_v {
                        out[(t * s.n_head + h) * s.head_dim_v + d] += e[j] / z * vr[d];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_naive_gqa_with_and_without_window() {
        for window in [0, 3] {
            let s = AttentionShape { n_head: 4, n_head_kv: 2, head_dim_k: 8, head_dim_v: 6, scale: 0.35, window };
            let (n_pos, pos0) = (7, 2);
            let r = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
            let k: Vec<f32> = (0..n_pos * 2 * 8).map(|i| f16::from_f32(r(i)).to_f32()).collect();
            let v: Vec<f32> = (0..n_pos * 2 * 6).map(|i| f16::from_f32(r(i + 3)).to_f32()).collect();
            let n = n_pos - pos0;
            let q: Vec<f32> = (0..n * 4 * 8).map(|i| r(i + 11)).collect();
            let kh: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
            let vh: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            let mut out = vec![0.0; n * 4 * 6];
            attention(&s, &q, &kh, &vh, pos0, &mut out);
            let want = naive(&s, &q, &k, &v, pos0, n);
            for (a, b) in out.iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "window {window}: {a} vs {b}");
            }
        }
    }
}
