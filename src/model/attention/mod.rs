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

pub struct AttentionShape<'a> {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// How query·key dots become scores.
    pub score: AttnScore,
    /// 0: attend to every earlier position; else only to the last `window` positions.
    pub window: usize,
    /// Per query head, a logit every softmax adds with no value (attention sinks, gpt-oss).
    pub sinks: Option<&'a [f32]>,
}

impl AttentionShape<'_> {
    fn group(&self) -> usize {
        self.n_head / self.n_head_kv
    }

    /// Query head `h`'s score, with its sink.
    fn score_of(&self, h: usize) -> AttnScore {
        self.score.with_sink(self.sinks.map(|s| s[h]))
    }
}

/// A sequence with fewer queries than this in a batch attends query by query ([`per_query`]
/// or [`streaming`]); one with more, in tiles. Below it llama.cpp's per-query kernel runs too,
/// and following the same rule keeps our logits within llama.cpp's, which some models are
/// sensitive to at the 0.1-nat level.
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
    // Chosen per sequence, so a token's result never depends on what other sequences have in
    // its batch (a server's verify rows beside another slot's prompt chunk give the bits a
    // single-token pass gives).
    let prompt = prompt_queries(places);
    split_queries(
        s,
        q,
        places,
        out,
        |i| prompt[i],
        |tiled, q, places, out| {
            if tiled {
                tiled::attention(s, q, kv, layer, places, out)
            } else {
                few_queries(s, q, kv, layer, places, out)
            }
        },
    );
}

/// Whether each query belongs to a sequence with at least [`TILED_FROM`] queries in the batch.
fn prompt_queries(places: &[QueryPlace]) -> Vec<bool> {
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for p in places {
        match counts.iter_mut().find(|(seq, _)| *seq == p.seq_row0) {
            Some((_, n)) => *n += 1,
            None => counts.push((p.seq_row0, 1)),
        }
    }
    let count = |seq_row0| {
        counts
            .iter()
            .find(|(s, _)| *s == seq_row0)
            .map_or(0, |c| c.1)
    };
    places
        .iter()
        .map(|p| count(p.seq_row0) >= TILED_FROM)
        .collect()
}

/// Queries attending one by one: over a short f16 cache with llama.cpp's per-query kernel,
/// otherwise streaming. Chosen per query, like the tiles, for the same reason.
fn few_queries(
    s: &AttentionShape,
    q: &[f32],
    kv: &KvCache,
    layer: usize,
    places: &[QueryPlace],
    out: &mut [f32],
) {
    let f16_cache = kv.type_k() == KvType::F16 && kv.type_v() == KvType::F16;
    let short = |p: &QueryPlace| f16_cache && visible(s, *p).len() <= SPLIT_ROWS;
    let short: Vec<bool> = places.iter().map(short).collect();
    split_queries(
        s,
        q,
        places,
        out,
        |i| short[i],
        |short, q, places, out| {
            if short {
                per_query::attention(s, q, kv, layer, places, out)
            } else {
                streaming::attention(s, q, kv, layer, places, out)
            }
        },
    );
}

/// Runs `kernel(true, ..)` on the queries `pick` selects and `kernel(false, ..)` on the rest,
/// each part's query and output rows gathered (a part that is the whole batch runs in place,
/// an empty one not at all).
fn split_queries(
    s: &AttentionShape,
    q: &[f32],
    places: &[QueryPlace],
    out: &mut [f32],
    pick: impl Fn(usize) -> bool,
    mut kernel: impl FnMut(bool, &[f32], &[QueryPlace], &mut [f32]),
) {
    let n_tokens = places.len();
    let n_picked = (0..n_tokens).filter(|&i| pick(i)).count();
    if n_picked == n_tokens || n_picked == 0 {
        return kernel(n_picked > 0, q, places, out);
    }
    let (q_width, out_width) = (s.n_head * s.head_dim_k, s.n_head * s.head_dim_v);
    for part in [true, false] {
        let idx: Vec<usize> = (0..n_tokens).filter(|&i| pick(i) == part).collect();
        let sub_places: Vec<QueryPlace> = idx.iter().map(|&i| places[i]).collect();
        let sub_q: Vec<f32> = idx
            .iter()
            .flat_map(|&i| &q[i * q_width..(i + 1) * q_width])
            .copied()
            .collect();
        let mut sub_out = vec![0f32; idx.len() * out_width];
        kernel(part, &sub_q, &sub_places, &mut sub_out);
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
