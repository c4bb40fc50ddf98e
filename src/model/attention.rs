//! Causal grouped-query attention over the KV cache.
//!
//! Each (token, kv-head) task computes the scores of all query heads sharing that kv head, so a
//! key row is converted from f16 once per group. Softmax is computed per query over only the
//! visible positions (causal, and the sliding window on local layers): memory per task is
//! O(n_kv), never n_ctx x n_ctx.

use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;

use crate::kernels;

pub struct AttentionShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub scale: f32,
    /// 0: attend to every earlier position; else only to the last `window` positions.
    pub window: usize,
}

/// Batches of fewer queries than this use ggml's per-query kernel precision (see
/// [`attend_f16_accum`]); larger ones its f32 tiled kernel. Following the same rule keeps our
/// logits within llama.cpp's, which some models are sensitive to at the 0.1-nat level.
const F16_ACCUM_BELOW: usize = 64;

/// Where one query token sits: its sequence starts at cache row `seq_row0`, and the token is
/// at position `pos` of that sequence (it sees positions `..=pos` of its own sequence only).
#[derive(Clone, Copy, Debug)]
pub struct QueryPlace {
    pub seq_row0: usize,
    pub pos: usize,
}

/// `q`: [n_tokens, n_head * head_dim_k] (already roped), one [`QueryPlace`] per token, whose
/// keys/values are already in the cache. Writes `out`: [n_tokens, n_head * head_dim_v].
pub fn attention(
    s: &AttentionShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let q_row = s.n_head * s.head_dim_k;
    let group = s.n_head / s.n_head_kv;
    let n_tokens = q.len() / q_row;
    let f16_accum = n_tokens < F16_ACCUM_BELOW;
    // One task per (token, kv head): its output is the contiguous run of `group` heads.
    out.par_chunks_mut(group * s.head_dim_v)
        .enumerate()
        .for_each(|(task, out_group)| {
            let t = task / s.n_head_kv;
            let kvh = task % s.n_head_kv;
            let QueryPlace { seq_row0, pos } = places[t];
            let first = if s.window > 0 {
                (pos + 1).saturating_sub(s.window)
            } else {
                0
            };
            let task = Task {
                s,
                q: &q[t * q_row + kvh * group * s.head_dim_k..][..group * s.head_dim_k],
                keys,
                values,
                kvh,
                rows: seq_row0 + first..seq_row0 + pos + 1,
            };
            if f16_accum {
                attend_f16_accum(&task, out_group);
            } else {
                attend_f32(&task, out_group);
            }
        });
}

/// The queries of one token's heads that share kv head `kvh`, and the cache rows they see.
struct Task<'a> {
    s: &'a AttentionShape,
    /// [group, head_dim_k]
    q: &'a [f32],
    keys: &'a [f16],
    values: &'a [f16],
    kvh: usize,
    rows: std::ops::Range<usize>,
}

impl Task<'_> {
    fn key(&self, p: usize, buf: &mut [f32]) {
        let off = (p * self.s.n_head_kv + self.kvh) * self.s.head_dim_k;
        self.keys[off..off + self.s.head_dim_k].convert_to_f32_slice(buf);
    }

    fn value(&self, p: usize) -> &[f16] {
        let off = (p * self.s.n_head_kv + self.kvh) * self.s.head_dim_v;
        &self.values[off..off + self.s.head_dim_v]
    }
}

/// Two passes in f32: all scores, softmax, then the weighted sum of values.
fn attend_f32(task: &Task, out: &mut [f32]) {
    let s = task.s;
    let group = task.q.len() / s.head_dim_k;
    let n_kv = task.rows.len();
    let mut scores = vec![0f32; group * n_kv];
    let mut k = vec![0f32; s.head_dim_k];
    for (j, p) in task.rows.clone().enumerate() {
        task.key(p, &mut k);
        for (g, qh) in task.q.chunks_exact(s.head_dim_k).enumerate() {
            scores[g * n_kv + j] = dot(qh, &k) * s.scale;
        }
    }
    for g in 0..group {
        softmax_inplace(&mut scores[g * n_kv..(g + 1) * n_kv]);
    }
    out.fill(0.0);
    let mut v = vec![0f32; s.head_dim_v];
    for (j, p) in task.rows.clone().enumerate() {
        task.value(p).convert_to_f32_slice(&mut v);
        for (g, o) in out.chunks_exact_mut(s.head_dim_v).enumerate() {
            let w = scores[g * n_kv + j];
            for (o, &v) in o.iter_mut().zip(&v) {
                *o += w * v;
            }
        }
    }
}

/// One streaming pass with an online softmax, the way ggml's per-query flash-attention kernel
/// computes: the query rounded to f16 and the value accumulator held in f16.
fn attend_f16_accum(task: &Task, out: &mut [f32]) {
    let s = task.s;
    let mut k = vec![0f32; s.head_dim_k];
    for (qh, o) in task
        .q
        .chunks_exact(s.head_dim_k)
        .zip(out.chunks_exact_mut(s.head_dim_v))
    {
        let q16: Vec<f32> = qh.iter().map(|&x| f16::from_f32(x).to_f32()).collect();
        let mut acc = vec![f16::ZERO; s.head_dim_v];
        let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
        for p in task.rows.clone() {
            task.key(p, &mut k);
            let score = dot(&q16, &k) * s.scale;
            // A new maximum rescales what was accumulated; otherwise this value is weighted down.
            let (rescale, weight) = if score > max {
                let r = (max - score).exp();
                max = score;
                (r, 1.0)
            } else {
                (1.0, (score - max).exp())
            };
            if rescale != 1.0 {
                kernels::f16_scale(&mut acc, rescale);
            }
            kernels::f16_mad(&mut acc, task.value(p), weight);
            sum = sum * rescale + weight;
        }
        for (o, a) in o.iter_mut().zip(&acc) {
            *o = a.to_f32() / sum;
        }
    }
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
    let tail: f32 = a[chunks..]
        .iter()
        .zip(&b[chunks..])
        .map(|(x, y)| x * y)
        .sum();
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
    fn naive(
        s: &AttentionShape,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        pos0: usize,
        n: usize,
    ) -> Vec<f32> {
        let group = s.n_head / s.n_head_kv;
        let mut out = vec![0.0; n * s.n_head * s.head_dim_v];
        for t in 0..n {
            let pos = pos0 + t;
            for h in 0..s.n_head {
                let kvh = h / group;
                let first = if s.window > 0 {
                    (pos + 1).saturating_sub(s.window)
                } else {
                    0
                };
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
        // 5 queries take the f16-accumulating kernel, 70 the f32 one.
        for (n, tol) in [(5, 3e-3), (70, 1e-5)] {
            for window in [0, 3] {
                let s = AttentionShape {
                    n_head: 4,
                    n_head_kv: 2,
                    head_dim_k: 8,
                    head_dim_v: 6,
                    scale: 0.35,
                    window,
                };
                let pos0 = 2;
                let n_pos = pos0 + n;
                let r = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
                let k: Vec<f32> = (0..n_pos * 2 * 8)
                    .map(|i| f16::from_f32(r(i)).to_f32())
                    .collect();
                let v: Vec<f32> = (0..n_pos * 2 * 6)
                    .map(|i| f16::from_f32(r(i + 3)).to_f32())
                    .collect();
                let q: Vec<f32> = (0..n * 4 * 8).map(|i| r(i + 11)).collect();
                let kh: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
                let vh: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
                let mut out = vec![0.0; n * 4 * 6];
                let places: Vec<QueryPlace> = (0..n)
                    .map(|t| QueryPlace {
                        seq_row0: 0,
                        pos: pos0 + t,
                    })
                    .collect();
                attention(&s, &q, &kh, &vh, &places, &mut out);
                let want = naive(&s, &q, &k, &v, pos0, n);
                for (a, b) in out.iter().zip(&want) {
                    assert!((a - b).abs() < tol, "n {n} window {window}: {a} vs {b}");
                }
            }
        }
    }
}
