//! Few queries over a deep or quantized cache. A task is one token's query group of one KV
//! head (or part of the group, when there are too few tasks for the threads) over one chunk of
//! its visible rows: every key and value row is read once for all the group's heads, a block of
//! [`BLOCK_ROWS`] at a time, with an online softmax per head (a block's scores, then the
//! running maximum, sum and f32 value accumulator rescaled once per block). The chunks'
//! partial results are merged per head at the end (flash-decoding).
//!
//! Keys and values: a block widened (f16) or dequantized (Q8_0, Q4_0) into a small f32 buffer,
//! then multiplied by the group's queries and weighted into the accumulators. (Quantized keys
//! against Q8_0-quantized queries through the integer matmul kernels measured slower: a block
//! of 64 rows by a few queries is too small for them.)

use super::online::Online;
use super::{visible, AttentionShape, QueryPlace, Rows, SPLIT_ROWS};
use crate::kernels;
use crate::model::kv_cache::{HeadRows, KeyRows, KvCache};
use crate::parallel::{self, Disjoint};

/// Rows per block: a block of keys and of values (f32) stays in L1/L2 for the whole group.
const BLOCK_ROWS: usize = 64;

/// One task: token `t`, query heads `heads` (of KV head `kvh`), cache rows `rows`.
struct Task {
    t: usize,
    kvh: usize,
    heads: Rows,
    rows: Rows,
    /// Where its partial results start, in heads of [`Partial`].
    slot: usize,
}

/// Per head of a task: the running maximum score, the sum of e^(score - max), and the values
/// weighted by those terms (`head_dim_v` floats, stored after the two).
const PARTIAL_HEAD: usize = 2;

pub(super) fn attention(
    s: &AttentionShape,
    q: &[f32],
    kv: &KvCache,
    layer: usize,
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let hv = s.head_dim_v;
    let tasks = plan(s, places, parallel::threads());
    let per_head = PARTIAL_HEAD + hv;
    let n_heads: usize = tasks.iter().map(|k| k.heads.len()).sum();
    let mut partials = vec![0f32; n_heads * per_head];
    let ptr = Disjoint::new(&mut partials);
    parallel::for_each(tasks.len(), |i| {
        let k = &tasks[i];
        // SAFETY: tasks own disjoint runs of heads in `partials` (slots assigned in order by
        // `plan`), and `for_each` returns after every task.
        let part = unsafe { ptr.slice(k.slot * per_head, k.heads.len() * per_head) };
        let head = (
            kv.keys_for(layer, k.kvh, places[k.t]),
            kv.values(layer, k.kvh),
        );
        attend_chunk(s, q, head, k, part);
    });
    merge(s, &tasks, &partials, places.len(), out);
}

/// Splits the work: per token and KV head, its visible rows in chunks of [`SPLIT_ROWS`]; where
/// that gives fewer tasks than threads, each group's heads are shared out too (a head's result
/// does not depend on which others share its task).
fn plan(s: &AttentionShape, places: &[QueryPlace], threads: usize) -> Vec<Task> {
    let group = s.group();
    let chunks: usize = places
        .iter()
        .map(|&p| visible(s, p).len().div_ceil(SPLIT_ROWS))
        .sum();
    let n_base = chunks * s.n_head_kv;
    let parts = threads.div_ceil(n_base.max(1)).clamp(1, group);
    let per_part = group.div_ceil(parts);
    let mut tasks = Vec::new();
    let mut slot = 0;
    for (t, &p) in places.iter().enumerate() {
        let vis = visible(s, p);
        for kvh in 0..s.n_head_kv {
            for c0 in vis.clone().step_by(SPLIT_ROWS) {
                let rows = c0..(c0 + SPLIT_ROWS).min(vis.end);
                for g0 in (0..group).step_by(per_part) {
                    let heads = kvh * group + g0..kvh * group + (g0 + per_part).min(group);
                    let n = heads.len();
                    tasks.push(Task {
                        t,
                        kvh,
                        heads,
                        rows: rows.clone(),
                        slot,
                    });
                    slot += n;
                }
            }
        }
    }
    tasks
}

/// The task's heads over its rows, into `part` ([`PARTIAL_HEAD`] + `hv` floats per head).
fn attend_chunk(
    s: &AttentionShape,
    q: &[f32],
    (keys, values): (KeyRows, HeadRows),
    k: &Task,
    part: &mut [f32],
) {
    let (hk, hv) = (s.head_dim_k, s.head_dim_v);
    let n_q = k.heads.len();
    let queries = &q[(k.t * s.n_head + k.heads.start) * hk..][..n_q * hk];
    let mut online = Online::new(n_q, hv);
    let mut weights = vec![0f32; n_q * BLOCK_ROWS];
    let mut buf = vec![0f32; BLOCK_ROWS * hk.max(hv)];
    for b0 in k.rows.clone().step_by(BLOCK_ROWS) {
        let b = b0..(b0 + BLOCK_ROWS).min(k.rows.end);
        let n = b.len();
        // weights[g][j] = query g · key row b0 + j.
        keys.widen(b.clone(), &mut buf[..n * hk]);
        kernels::backend().f32_dots(queries, hk, &buf[..n * hk], &mut weights, n);
        for g in 0..n_q {
            online.weigh(g, &mut weights[g * n..][..n], 0..n, s.score);
        }
        values.widen(b, &mut buf[..n * hv]);
        online.add_values(&buf[..n * hv], &weights, n);
    }
    for (g, p) in part.chunks_exact_mut(PARTIAL_HEAD + hv).enumerate() {
        let (max, sum, acc) = online.partial(g);
        p[0] = max;
        p[1] = sum;
        p[PARTIAL_HEAD..].copy_from_slice(acc);
    }
}

/// Merges each head's chunks: `out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) sum_c`
/// (the sink's term added to the denominator).
fn merge(s: &AttentionShape, tasks: &[Task], partials: &[f32], n_tokens: usize, out: &mut [f32]) {
    let hv = s.head_dim_v;
    let per_head = PARTIAL_HEAD + hv;
    // Per output head: the maximum over its chunks first.
    let mut max = vec![f32::NEG_INFINITY; n_tokens * s.n_head];
    for k in tasks {
        for (i, h) in k.heads.clone().enumerate() {
            let m = &mut max[k.t * s.n_head + h];
            *m = m.max(partials[(k.slot + i) * per_head]);
        }
    }
    let mut sum = vec![0f32; n_tokens * s.n_head];
    out.fill(0.0);
    for k in tasks {
        for (i, h) in k.heads.clone().enumerate() {
            let p = &partials[(k.slot + i) * per_head..][..per_head];
            let o = k.t * s.n_head + h;
            let w = (p[0] - max[o]).exp();
            sum[o] += w * p[1];
            for (x, a) in out[o * hv..(o + 1) * hv].iter_mut().zip(&p[PARTIAL_HEAD..]) {
                *x += w * a;
            }
        }
    }
    for (o, head) in out.chunks_exact_mut(hv).enumerate() {
        let (rescale, sum) = s.score_of(o % s.n_head).sink_term(max[o], sum[o]);
        let inv = rescale / sum;
        head.iter_mut().for_each(|x| *x *= inv);
    }
}
