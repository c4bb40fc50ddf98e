//! Big batches (prompts): tiles of consecutive tokens of one sequence (about
//! [`TILE_QUERIES`] query rows: tokens × the heads of a KV group), in parallel. Per KV head a
//! tile walks the cache a block of [`TILE_ROWS`] rows at a time: the block widened to f32
//! once, its dot products with every query row as one small matrix product (keys × the
//! transposed queries), an online-softmax step along the queries ([`OnlineColumns`]), then the
//! block's values weighted in by a second product. Memory per tile is a block's worth of
//! scores, whatever the depth.

use super::online::OnlineColumns;
use super::{visible, AttentionShape, QueryPlace, Rows};
use crate::kernels::{self, GemmShape, Strided};
use crate::model::kv_cache::{group_start, HeadRows, KeyRows, KvCache};
use crate::parallel::{self, Disjoint};

/// Query rows (tokens × heads of a group) per tile, about: every key and value row a tile sees
/// is converted once per tile, and the products run along this many queries.
const TILE_QUERIES: usize = 128;
/// Cache rows per step: a block of keys or values stays in L1 while every query row of the
/// tile reads it.
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
    let tile_tokens = (TILE_QUERIES / s.group()).max(1);
    let mut tiles = Vec::new();
    let mut t0 = 0;
    // With quantized keys a tile is within one group of positions: its queries read the same
    // rows in f16.
    let group_of = |p: QueryPlace| kv.has_recent().then(|| group_start(p.pos));
    for t in 1..=places.len() {
        if t == places.len()
            || t - t0 == tile_tokens
            || places[t].seq_row0 != places[t0].seq_row0
            || group_of(places[t]) != group_of(places[t0])
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
        for kvh in 0..s.n_head_kv {
            let head = (
                kv.keys_for(layer, kvh, places[tile.start]),
                kv.values(layer, kvh),
            );
            attend_tile(s, q, head, &places[tile.clone()], tile.start, kvh, out);
        }
    });
}

/// One tile (`places`, its first token `t0`) and KV head; `out` holds the tile's output rows.
fn attend_tile(
    s: &AttentionShape,
    q: &[f32],
    (keys, values): (KeyRows, HeadRows),
    places: &[QueryPlace],
    t0: usize,
    kvh: usize,
    out: &mut [f32],
) {
    let group = s.group();
    let (hk, hv) = (s.head_dim_k, s.head_dim_v);
    // Query g = ti * group + h: head h of the group for the tile's token ti. Transposed
    // ([hk][n_q]), so a block's scores come out as [row][query].
    let n_q = places.len() * group;
    let mut queries_t = vec![0f32; hk * n_q];
    for ti in 0..places.len() {
        let token = &q[((t0 + ti) * s.n_head + kvh * group) * hk..][..group * hk];
        for (h, head) in token.chunks_exact(hk).enumerate() {
            for (d, &x) in head.iter().enumerate() {
                queries_t[d * n_q + ti * group + h] = x;
            }
        }
    }
    let seen: Vec<Rows> = places.iter().map(|&p| visible(s, p)).collect();
    let lo = seen.iter().map(|r| r.start).min().unwrap_or(0);
    let hi = seen.iter().map(|r| r.end).max().unwrap_or(0);
    let mut online = OnlineColumns::new(n_q, hv);
    let mut weights = vec![0f32; TILE_ROWS * n_q];
    let mut buf = vec![0f32; TILE_ROWS * hk.max(hv)];
    let backend = kernels::backend();
    for b0 in (lo..hi).step_by(TILE_ROWS) {
        let block = b0..(b0 + TILE_ROWS).min(hi);
        let n = block.len();
        let weights = &mut weights[..n * n_q];
        // dots[j][g] = key row b0 + j · query g.
        keys.widen(block.clone(), &mut buf[..n * hk]);
        let keys_f32 = Strided {
            data: &buf[..n * hk],
            row: hk,
            step: 1,
        };
        backend.f32_gemm(keys_f32, &queries_t, weights, product(n, n_q, hk, false));
        online.weigh(weights, s.score, |dots| {
            mask_unseen(dots, &seen, group, block.clone())
        });
        // acc[g] += Σ_j weights[j][g] · value row b0 + j.
        values.widen(block, &mut buf[..n * hv]);
        let weights_t = Strided {
            data: weights,
            row: 1,
            step: n_q,
        };
        backend.f32_gemm(
            weights_t,
            &buf[..n * hv],
            &mut online.acc,
            product(n_q, hv, n, true),
        );
    }
    let out_row = s.n_head * hv;
    for ti in 0..places.len() {
        for h in 0..group {
            let o = &mut out[ti * out_row + (kvh * group + h) * hv..][..hv];
            online.write_output(ti * group + h, o, s.score_of(kvh * group + h));
        }
    }
}

/// `C (m × n) (+)= A · B (k × n)`, all rows packed.
fn product(m: usize, n: usize, k: usize, accumulate: bool) -> GemmShape {
    GemmShape {
        m,
        n,
        k,
        ldb: n,
        ldc: n,
        accumulate,
    }
}

/// Sets `dots[j][g]` to -inf where query g's token does not see row `block.start + j`
/// (nothing to do for a block every token sees whole, the usual case at depth).
fn mask_unseen(dots: &mut [f32], seen: &[Rows], group: usize, block: Rows) {
    if seen
        .iter()
        .all(|r| r.start <= block.start && block.end <= r.end)
    {
        return;
    }
    let n_q = seen.len() * group;
    for (j, row) in block.zip(dots.chunks_exact_mut(n_q)) {
        for (r, queries) in seen.iter().zip(row.chunks_exact_mut(group)) {
            if !r.contains(&j) {
                queries.fill(f32::NEG_INFINITY);
            }
        }
    }
}
