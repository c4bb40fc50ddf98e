//! Big batches (prompts): tiles of up to [`TILE_QUERIES`] consecutive tokens of one sequence,
//! in parallel; within a tile, per KV head, scores for all its queries, a softmax per query,
//! then the weighted values, each cache row converted to f32 once per tile.

use super::{rows, softmax_inplace, visible, AttentionShape, QueryPlace, Rows};
use crate::kernels;
use crate::model::kv_cache::{HeadRows, KvCache};
use crate::parallel::{self, Disjoint};

/// Called per (query in tile, token) with the visible rows of a converted block and their
/// columns in the tile's score rows.
type BlockVisit<'a> = &'a mut dyn FnMut(usize, usize, &[f32], Rows);

/// Queries per tile: every key and value row a tile sees is converted once per tile, not once
/// per query.
const TILE_QUERIES: usize = 16;
/// Cache rows converted per step, so a block of keys or values stays in L1/L2 while every
/// query of the tile reads it.
const TILE_ROWS: usize = 64;

pub(super) fn attention(
    s: &AttentionShape,
    q: &[f32],
    kv: &KvCache,
    layer: usize,
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
        // Scratch shared by the tile's KV heads (scores can be hundreds of KiB).
        let mut scratch = Vec::new();
        for kvh in 0..s.n_head_kv {
            let head = (kv.keys(layer, kvh), kv.values(layer, kvh));
            attend_tile(s, q, head, places, tile.clone(), kvh, out, &mut scratch);
        }
    });
}

/// One tile and KV head; `out` holds the tile's output rows.
#[allow(clippy::too_many_arguments)]
fn attend_tile(
    s: &AttentionShape,
    q: &[f32],
    (keys, values): (HeadRows, HeadRows),
    places: &[QueryPlace],
    tile: Rows,
    kvh: usize,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let group = s.group();
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
    // Walks the tile's cache rows in blocks converted to f32, calling `f(query index in tile,
    // token, visible rows of the block as f32, their range - lo)`.
    let mut blocks = |head: &HeadRows, f: BlockVisit| {
        let dim = head.dim;
        for b0 in (lo..hi).step_by(TILE_ROWS) {
            let b1 = (b0 + TILE_ROWS).min(hi);
            rows::to_f32(head, b0..b1, &mut buf[..(b1 - b0) * dim]);
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
    blocks(&keys, &mut |ti, t, rows, cols| {
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
    blocks(&values, &mut |ti, _, rows, cols| {
        let w = &scores[ti * group * n_rows + cols.start..];
        let o = &mut out[ti * out_row + kvh * group * hv..][..group * hv];
        kernels::backend().f32_weighted_sum(o, hv, rows, w, n_rows);
    });
}
