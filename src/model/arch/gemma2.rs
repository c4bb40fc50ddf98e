//! Gemma 2: Gemma's embedding scaling, post-norms, GELU-tanh gating and pre-scaled queries,
//! without QK-norm; attention scores and output logits soft-capped (50 and 30 unless the
//! metadata says), and every other layer (the even ones) attending to a sliding window of 4096
//! positions unless the metadata says otherwise, with the global RoPE.

use super::{
    Activation, Architecture, Recipe, RopeStyle, SlidingWindow, Softcap, SwaRope, LLAMA_LIKE,
};
use crate::model::hparams::HParams;

pub(super) static GEMMA2: Architecture = Architecture {
    name: "gemma2",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        activation: Activation::GeGlu,
        post_norms: true,
        scale_embeddings: true,
        scale_queries_before_attention: true,
        sliding_window: Some(SlidingWindow {
            period: Some(2),
            default_window: 4096,
            rope: SwaRope::Global,
        }),
        softcap: Some(Softcap {
            attention: 50.0,
            output: 30.0,
        }),
        ..LLAMA_LIKE
    },
    quirks,
};

/// Gemma 2 27B (46 layers) scales queries by 1/sqrt(n_embd/n_head) (`query_pre_attn_scalar`),
/// which GGUF does not record; llama.cpp keys it on the model size the same way.
fn quirks(hp: &mut HParams) {
    if hp.n_layer == 46 {
        hp.attn_scale = 1.0 / ((hp.n_embd / hp.heads[0].n_head) as f32).sqrt();
    }
}
