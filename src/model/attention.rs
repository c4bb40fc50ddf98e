//! Causal grouped-query attention over the KV cache.
//!
//! Small batches (token generation): each (token, kv-head) task streams over the visible rows
//! with an online softmax, as ggml's per-query kernel does. Prompts: tiles of queries share each
//! key and value row, converted from f16 once per tile. Softmax covers only the visible
//! positions (causal, and the sliding window on local layers): memory per task is
//! O(tile x n_kv), never n_ctx x n_ctx.

use half::f16;

use crate::kernels::{self, AttnScore};
use crate::parallel::{self, Disjoint};

type Rows = std::ops::Range<usize>;

/// Called per (query in tile, token) with the visible rows of a converted block and their
/// columns in the tile's score rows.
type BlockVisit<'a> = &'a mut dyn FnMut(usize, usize, &[f32], Rows);

pub struct AttentionShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// How query·key dots become scores.
    pub score: AttnScore,
    /// 0: attend to every earlier position; else only to the last `window` positions.
    pub window: usize,
}

/// Batches of fewer queries than this use ggml's per-query kernel precision (see
/// [`kernels::Backend::f16_attend`]); larger ones its f32 tiled kernel. Following the same rule keeps our
/// logits within llama.cpp's, which some models are sensitive to at the 0.1-nat level.
const F16_ACCUM_BELOW: usize = 64;

/// Where one query token sits: its sequence starts at cache row `seq_row0`, and the token is
/// at position `pos` of that sequence (it sees positions `..=pos` of its own sequence only).
#[derive(Clone, Copy, Debug)]
pub struct QueryPlace {
    pub seq_row0: usize,
    pub pos: usize,
}

/// Queries per tile of the f32 kernel: every key and value row a tile sees is converted from
/// f16 once per tile, not once per query.
const TILE_QUERIES: usize = 16;
/// Cache rows converted per step, so a block of keys or values stays in L1/L2 while every
/// query of the tile reads it.
const TILE_ROWS: usize = 64;

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
    let n_tokens = q.len() / q_row;
    if n_tokens >= F16_ACCUM_BELOW {
        return attention_tiled(s, q, keys, values, places, out);
    }
    let group = s.n_head / s.n_head_kv;
    // One task per (token, query head), so a single kv head (Gemma 3) still spreads over
    // the threads: its output is the head's `head_dim_v` run.
    let hv = s.head_dim_v;
    let n_tasks = out.len() / hv.max(1);
    let out_ptr = Disjoint::new(out);
    parallel::for_each(n_tasks, |task| {
        // SAFETY: task `task` owns `out[task * hv..][..hv]` (in bounds: n_tasks whole
        // heads), and `for_each` returns only after every task.
        let out_head = unsafe { out_ptr.slice(task * hv, hv) };
        let (t, h) = (task / s.n_head, task % s.n_head);
        let q16: Vec<f32> = q[t * q_row + h * s.head_dim_k..][..s.head_dim_k]
            .iter()
            .map(|&x| f16::from_f32(x).to_f32())
            .collect();
        // Row p of kv head `kvh` starts at (p * n_head_kv + kvh) * head_dim.
        let kvh = h / group;
        kernels::backend().f16_attend(
            &q16,
            &keys[kvh * s.head_dim_k..],
            &values[kvh * hv..],
            (s.n_head_kv * s.head_dim_k, s.n_head_kv * hv),
            visible(s, places[t]),
            s.score,
            out_head,
        );
    });
}

/// Cache rows token `place` attends to: causal, and within the window on local layers.
fn visible(s: &AttentionShape, place: QueryPlace) -> Rows {
    let QueryPlace { seq_row0, pos } = place;
    let first = if s.window > 0 {
        (pos + 1).saturating_sub(s.window)
    } else {
        0
    };
    seq_row0 + first..seq_row0 + pos + 1
}

/// Big batches (prompts): tiles of up to [`TILE_QUERIES`] consecutive tokens of one sequence,
/// in parallel; within a tile, per kv head, scores for all its queries, a softmax per query,
/// then the weighted values, each cache row converted to f32 once per tile.
fn attention_tiled(
    s: &AttentionShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let out_row = s.n_head * s.head_dim_v;
    let mut tiles = Vec::new();
    let mut t0 = 0;
    for t in 1..=places.len() {
        if t == places.len() || t - t0 == TILE_QUERIES || places[t].seq_row0 != places[t0].seq_row0
        {
            tiles.push(t0..t);
            t0 = t;
        }
    }
    let out_ptr = Disjoint::new(out);
    parallel::for_each(tiles.len(), |i| {
        let tile = tiles[i].clone();
        // SAFETY: tiles are disjoint runs of tokens in order, so tile i owns the output rows
        // of its tokens (in bounds: one row per token); `for_each` returns after every tile.
        let out = unsafe { out_ptr.slice(tile.start * out_row, tile.len() * out_row) };
        // Scratch shared by the tile's kv heads (scores can be hundreds of KiB).
        let mut scratch = Vec::new();
        for kvh in 0..s.n_head_kv {
            attend_tile(
                s,
                q,
                keys,
                values,
                places,
                tile.clone(),
                kvh,
                out,
                &mut scratch,
            );
        }
    });
}

/// One tile and kv head of [`attention_tiled`]; `out` holds the tile's output rows.
#[allow(clippy::too_many_arguments)]
fn attend_tile(
    s: &AttentionShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    places: &[QueryPlace],
    tile: Rows,
    kvh: usize,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let group = s.n_head / s.n_head_kv;
    let (hk, hv) = (s.head_dim_k, s.head_dim_v);
    let (q_row, out_row) = (s.n_head * hk, s.n_head * hv);
    let lo = tile
        .clone()
        .map(|t| visible(s, places[t]).start)
        .min()
        .unwrap_or(0);
    let hi = tile
        .clone()
        .map(|t| visible(s, places[t]).end)
        .max()
        .unwrap_or(0);
    let n_rows = hi - lo;
    // scores[(query in tile) * group + head][row - lo], then one block of converted rows.
    let n_scores = tile.len() * group * n_rows;
    scratch.resize(n_scores + TILE_ROWS * hk.max(hv), 0.0);
    let (scores, buf) = scratch.split_at_mut(n_scores);
    // Walks the tile's cache rows in blocks converted to f32 (`dim` wide), calling
    // `f(query index in tile, token, visible rows of the block as f32, their range - lo)`.
    let mut blocks = |data: &[f16], dim: usize, f: BlockVisit| {
        for b0 in (lo..hi).step_by(TILE_ROWS) {
            let b1 = (b0 + TILE_ROWS).min(hi);
            for (j, p) in (b0..b1).enumerate() {
                let off = (p * s.n_head_kv + kvh) * dim;
                kernels::backend()
                    .f16_row_to_f32(&data[off..off + dim], &mut buf[j * dim..(j + 1) * dim]);
            }
            for (ti, t) in tile.clone().enumerate() {
                let r = visible(s, places[t]);
                let (c0, c1) = (r.start.max(b0), r.end.min(b1));
                if c0 < c1 {
                    f(
                        ti,
                        t,
                        &buf[(c0 - b0) * dim..(c1 - b0) * dim],
                        c0 - lo..c1 - lo,
                    );
                }
            }
        }
    };
    // The group's heads share their visible rows: each kernel call serves all of them.
    let qs = |t: usize| &q[t * q_row + kvh * group * hk..][..group * hk];
    blocks(keys, hk, &mut |ti, t, rows, cols| {
        let sc = &mut scores[ti * group * n_rows + cols.start..];
        kernels::backend().f32_dots(qs(t), hk, rows, sc, n_rows);
    });
    for (ti, t) in tile.clone().enumerate() {
        let r = visible(s, places[t]);
        for g in 0..group {
            let row = &mut scores[(ti * group + g) * n_rows..][..n_rows];
            let row = &mut row[r.start - lo..r.end - lo];
            row.iter_mut().for_each(|x| *x = s.score.of(*x));
            softmax_inplace(row);
        }
        out[ti * out_row + kvh * group * hv..][..group * hv].fill(0.0);
    }
    blocks(values, hv, &mut |ti, _, rows, cols| {
        let w = &scores[ti * group * n_rows + cols.start..];
        let o = &mut out[ti * out_row + kvh * group * hv..][..group * hv];
        kernels::backend().f32_weighted_sum(o, hv, rows, w, n_rows);
    });
}

fn softmax_inplace(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum = kernels::backend().exp_shifted_sum(x, max);
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
                        s.score
                            .of(qh.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>())
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
            for (window, softcap) in [(0, 0.0), (3, 0.0), (0, 0.8)] {
                let s = AttentionShape {
                    n_head: 4,
                    n_head_kv: 2,
                    head_dim_k: 8,
                    head_dim_v: 6,
                    score: AttnScore {
                        scale: 0.35,
                        softcap,
                    },
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
                    assert!(
                        (a - b).abs() < tol,
                        "n {n} window {window} cap {softcap}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn tiles_keep_sequences_apart() {
        // 2 x 40 queries (tiled kernel), the second sequence's rows start at cache row 50: each
        // token must see only its own sequence, including across tile boundaries.
        let s = AttentionShape {
            n_head: 2,
            n_head_kv: 1,
            head_dim_k: 16,
            head_dim_v: 8,
            score: AttnScore::scaled(0.25),
            window: 0,
        };
        let (per_seq, row0) = (40, 50);
        let r = |i: usize| ((i * 7919 % 1000) as f32 / 500.0) - 1.0;
        let rows = row0 + per_seq;
        let k: Vec<f32> = (0..rows * 16)
            .map(|i| f16::from_f32(r(i)).to_f32())
            .collect();
        let v: Vec<f32> = (0..rows * 8)
            .map(|i| f16::from_f32(r(i + 5)).to_f32())
            .collect();
        let q: Vec<f32> = (0..2 * per_seq * 2 * 16).map(|i| r(i + 17)).collect();
        let kh: Vec<f16> = k.iter().map(|&x| f16::from_f32(x)).collect();
        let vh: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
        let places: Vec<QueryPlace> = (0..2 * per_seq)
            .map(|t| QueryPlace {
                seq_row0: if t < per_seq { 0 } else { row0 },
                pos: t % per_seq,
            })
            .collect();
        let mut out = vec![0.0; 2 * per_seq * 2 * 8];
        attention(&s, &q, &kh, &vh, &places, &mut out);
        let (q_half, o_half) = (per_seq * 2 * 16, per_seq * 2 * 8);
        let want0 = naive(&s, &q[..q_half], &k, &v, 0, per_seq);
        let want1 = naive(
            &s,
            &q[q_half..],
            &k[row0 * 16..],
            &v[row0 * 8..],
            0,
            per_seq,
        );
        for (a, b) in out.iter().zip(want0.iter().chain(&want1)) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        assert_eq!(out.len(), 2 * o_half);
    }
}
