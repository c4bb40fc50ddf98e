//! Few queries over a short f16 cache: ggml's per-query flash-attention kernel (queries
//! rounded to f16, values accumulated in f16), one task per (token, query head).

use half::f16;

use super::{visible, AttentionShape, QueryPlace};
use crate::kernels;
use crate::model::kv_cache::KvCache;
use crate::parallel::{self, Disjoint};

pub(super) fn attention(
    s: &AttentionShape,
    q: &[f32],
    kv: &KvCache,
    layer: usize,
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let (hk, hv) = (s.head_dim_k, s.head_dim_v);
    let q_row = s.n_head * hk;
    // One task per (token, query head), so a single KV head (Gemma 3) still spreads over the
    // threads: its output is the head's `hv` run.
    let n_tasks = places.len() * s.n_head;
    let out_ptr = Disjoint::new(out);
    parallel::for_each(n_tasks, |task| {
        // SAFETY: task `task` owns `out[task * hv..][..hv]` (in bounds: n_tasks whole heads),
        // and `for_each` returns only after every task.
        let out_head = unsafe { out_ptr.slice(task * hv, hv) };
        let (t, h) = (task / s.n_head, task % s.n_head);
        let q16: Vec<f32> = q[t * q_row + h * hk..][..hk]
            .iter()
            .map(|&x| f16::from_f32(x).to_f32())
            .collect();
        let kvh = h / s.group();
        let (keys, values) = (kv.keys(layer, kvh), kv.values(layer, kvh));
        let n_rows = keys.data.len() / keys.row_bytes;
        kernels::backend().f16_attend(
            &q16,
            keys.f16_rows(0..n_rows),
            values.f16_rows(0..n_rows),
            (hk, hv),
            visible(s, places[t]),
            s.score_of(h),
            out_head,
        );
    });
}
