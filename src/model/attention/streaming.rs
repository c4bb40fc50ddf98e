//! Few queries over a deep or quantized cache. A task is one token's query group of one KV
//! head (or part of the group, when there are too few tasks for the threads) over one chunk of
//! its visible rows: every key and value row is read once for all the group's heads, a block of
//! [`BLOCK_ROWS`] at a time, with an online softmax per head (a block's scores, then the
//! running maximum, sum and f32 value accumulator rescaled once per block). The chunks'
//! partial results are merged per head at the end (flash-decoding).
//!
//! Keys: f16 rows widened per block and multiplied as f32; Q8_0 / Q4_0 rows multiplied in
//! integers against the queries quantized to Q8_0 (llama.cpp's way), by the type's own matmul
//! kernels with the block's rows as the matrix and the group's queries as its tokens. Values: a
//! block widened or dequantized, then weighted into the accumulators.

use super::{rows, visible, AttentionShape, QueryPlace, Rows, SPLIT_ROWS};
use crate::kernels::{self, ActSource, AttnScore, MatmulPlan, QuantizedActivations, WeightMatrix};
use crate::model::kv_cache::{HeadRows, KvCache, KvType};
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
        let head = (kv.keys(layer, k.kvh), kv.values(layer, k.kvh));
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
    (keys, values): (HeadRows, HeadRows),
    k: &Task,
    part: &mut [f32],
) {
    let (hk, hv) = (s.head_dim_k, s.head_dim_v);
    let n_q = k.heads.len();
    let queries = &q[(k.t * s.n_head + k.heads.start) * hk..][..n_q * hk];
    let keys = Keys::new(keys, queries, s.score);
    let backend = kernels::backend();
    let mut scores = vec![0f32; n_q * BLOCK_ROWS];
    let mut buf = vec![0f32; BLOCK_ROWS * hk.max(hv)];
    let mut acc = vec![0f32; n_q * hv];
    let (mut max, mut sum) = (vec![f32::NEG_INFINITY; n_q], vec![0f32; n_q]);
    for b0 in k.rows.clone().step_by(BLOCK_ROWS) {
        let b = b0..(b0 + BLOCK_ROWS).min(k.rows.end);
        let n = b.len();
        keys.scores(b.clone(), &mut buf, &mut scores);
        for g in 0..n_q {
            let sc = &mut scores[g * n..][..n];
            let block_max = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if block_max > max[g] {
                // A new maximum rescales what was accumulated (nothing, the first time).
                let r = (max[g] - block_max).exp();
                acc[g * hv..(g + 1) * hv].iter_mut().for_each(|a| *a *= r);
                sum[g] *= r;
                max[g] = block_max;
            }
            sum[g] += backend.exp_shifted_sum(sc, max[g]);
        }
        rows::to_f32(&values, b, &mut buf[..n * hv]);
        backend.f32_weighted_sum(&mut acc, hv, &buf[..n * hv], &scores, n);
    }
    for (g, p) in part.chunks_exact_mut(PARTIAL_HEAD + hv).enumerate() {
        p[0] = max[g];
        p[1] = sum[g];
        p[PARTIAL_HEAD..].copy_from_slice(&acc[g * hv..(g + 1) * hv]);
    }
}

/// Merges each head's chunks: `out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) sum_c`.
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
        let inv = 1.0 / sum[o];
        head.iter_mut().for_each(|x| *x *= inv);
    }
}

/// A task's queries against a KV head's key rows, by the keys' type.
struct Keys<'a> {
    rows: HeadRows<'a>,
    /// The queries, [n_q * head_dim_k].
    queries: &'a [f32],
    /// For quantized keys: the queries quantized as the rows' type multiplies them (Q8_0).
    quantized: Option<QuantizedActivations>,
    score: AttnScore,
}

impl<'a> Keys<'a> {
    fn new(rows: HeadRows<'a>, queries: &'a [f32], score: AttnScore) -> Keys<'a> {
        let quantized = (rows.ty != KvType::F16).then(|| {
            let plan = Self::plan(&rows, 0..0);
            let (n_q, hk) = (queries.len() / rows.dim, rows.dim);
            let src = ActSource::Rows(queries);
            QuantizedActivations::quantize_from(kernels::backend(), src, n_q, hk, plan.needs())
                .expect("queries of whole blocks")
        });
        Keys {
            rows,
            queries,
            quantized,
            score,
        }
    }

    /// Rows `b` as the matrix of a matmul whose "tokens" are the queries: the type's integer
    /// tile kernels, each row read once for all of them.
    fn plan(rows: &HeadRows, b: Rows) -> MatmulPlan {
        let w = WeightMatrix {
            ty: rows.ty.ggml(),
            rows: b.len(),
            k: rows.dim,
            data: rows.bytes(b),
        };
        MatmulPlan::in_place(kernels::backend(), &w).expect("KV rows of whole blocks")
    }

    /// `scores[g * n + j]`: query `g`'s score of row `b.start + j` (`n = b.len()`).
    fn scores(&self, b: Rows, buf: &mut [f32], scores: &mut [f32]) {
        let (n, hk) = (b.len(), self.rows.dim);
        let n_q = self.queries.len() / hk;
        let scores = &mut scores[..n_q * n];
        match &self.quantized {
            None => {
                rows::to_f32(&self.rows, b, &mut buf[..n * hk]);
                let rows = &buf[..n * hk];
                kernels::backend().f32_dots(self.queries, hk, rows, scores, n);
            }
            Some(act) => {
                Self::plan(&self.rows, b.clone())
                    .matmul(self.rows.bytes(b), act, scores)
                    .expect("shapes checked by the plan");
            }
        }
        scores.iter_mut().for_each(|x| *x = self.score.of(*x));
    }
}
