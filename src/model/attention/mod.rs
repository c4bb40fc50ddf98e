//! Causal grouped-query attention over the KV cache, reading it in the type it is stored in.
//!
//! Three kernels, by batch size and depth:
//! - [`per_query`]: few queries over an f16 cache of at most [`SPLIT_ROWS`] visible rows —
//!   ggml's per-query kernel (f16 queries, values accumulated in f16), one task per query head,
//!   so short generations keep llama.cpp's rounding.
//! - [`streaming`]: few queries otherwise — each task takes a KV head's whole query group over
//!   one chunk of [`SPLIT_ROWS`] rows (every key and value read once for the group), with an
//!   online softmax per block of rows; the chunks' partial results are merged at the end, so
//!   deep contexts spread over all threads even with one KV head.
//! - [`tiled`]: prompts — tiles of queries share each block of key and value rows.
//!
//! Softmax covers only the visible positions (causal, and the sliding window on local layers):
//! memory per task is O(tile x rows seen), never n_ctx x n_ctx.

mod online;
mod per_query;
mod streaming;
mod tiled;

use super::kv_cache::{KvCache, KvType};
use crate::kernels::AttnScore;

type Rows = std::ops::Range<usize>;

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

impl AttentionShape {
    fn group(&self) -> usize {
        self.n_head / self.n_head_kv
    }
}

/// Batches of fewer queries than this attend query by query ([`per_query`] or [`streaming`]);
/// larger ones in tiles. Below it llama.cpp's per-query kernel runs too, and following the
/// same rule keeps our logits within llama.cpp's, which some models are sensitive to at the
/// 0.1-nat level.
const TILED_FROM: usize = 64;

/// Rows per chunk of [`streaming`]; an f16 cache with no more visible rows than this takes
/// [`per_query`]. Fixed, so results do not depend on the thread count.
const SPLIT_ROWS: usize = 1024;

/// Where one query token sits: its sequence starts at cache row `seq_row0`, and the token is
/// at position `pos` of that sequence (it sees positions `..=pos` of its own sequence only).
#[derive(Clone, Copy, Debug)]
pub struct QueryPlace {
    pub seq_row0: usize,
    pub pos: usize,
}

/// `q`: [n_tokens, n_head * head_dim_k] (already roped), one [`QueryPlace`] per token, whose
/// keys/values are already in layer `layer` of `kv`. Writes `out`: [n_tokens, n_head *
/// head_dim_v].
pub fn attention(
    s: &AttentionShape,
    q: &[f32],
    kv: &KvCache,
    layer: usize,
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let n_tokens = places.len();
    assert_eq!(q.len(), n_tokens * s.n_head * s.head_dim_k, "query rows");
    assert_eq!(out.len(), n_tokens * s.n_head * s.head_dim_v, "output rows");
    if n_tokens >= TILED_FROM {
        return tiled::attention(s, q, kv, layer, places, out);
    }
    // Chosen per query, so a token's result never depends on what else is in its batch (a
    // verify pass of speculative decoding must give the bits a single-token pass gives).
    let f16_cache = kv.type_k() == KvType::F16 && kv.type_v() == KvType::F16;
    let short = |p: &QueryPlace| f16_cache && visible(s, *p).len() <= SPLIT_ROWS;
    let n_short = places.iter().filter(|p| short(p)).count();
    if n_short == n_tokens {
        return per_query::attention(s, q, kv, layer, places, out);
    }
    if n_short == 0 {
        return streaming::attention(s, q, kv, layer, places, out);
    }
    let (q_width, out_width) = (s.n_head * s.head_dim_k, s.n_head * s.head_dim_v);
    for want_short in [true, false] {
        let idx: Vec<usize> = (0..n_tokens)
            .filter(|&i| short(&places[i]) == want_short)
            .collect();
        let sub_places: Vec<QueryPlace> = idx.iter().map(|&i| places[i]).collect();
        let sub_q: Vec<f32> = idx
            .iter()
            .flat_map(|&i| &q[i * q_width..(i + 1) * q_width])
            .copied()
            .collect();
        let mut sub_out = vec![0f32; idx.len() * out_width];
        if want_short {
            per_query::attention(s, &sub_q, kv, layer, &sub_places, &mut sub_out);
        } else {
            streaming::attention(s, &sub_q, kv, layer, &sub_places, &mut sub_out);
        }
        for (j, &i) in idx.iter().enumerate() {
            out[i * out_width..(i + 1) * out_width]
                .copy_from_slice(&sub_out[j * out_width..(j + 1) * out_width]);
        }
    }
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

#[cfg(test)]
mod tests;
