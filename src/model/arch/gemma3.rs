//! Gemma 3: embeddings scaled by sqrt(n_embd), QK-norm, norms after attention and FFN,
//! GELU-tanh gating, queries scaled before attention, and sliding-window layers (five of every
//! six unless the metadata gives a pattern) with their own RoPE base.

use super::{
    Activation, Architecture, QkNorm, Recipe, RopeStyle, SlidingWindow, SwaRope, LLAMA_LIKE,
};
use crate::model::hparams::HParams;

pub(super) static GEMMA3: Architecture = Architecture {
    name: "gemma3",
    recipe: RECIPE,
    quirks,
};

/// Gemma 3's layers, which Gemma 4 builds on.
pub(super) const RECIPE: Recipe = Recipe {
    rope: RopeStyle::NeoX,
    activation: Activation::GeGlu,
    qk_norm: QkNorm::PerHead,
    post_norms: true,
    scale_embeddings: true,
    scale_queries_before_attention: true,
    // llama.cpp 0c1e57098 reads no default window: without one no layer slides.
    sliding_window: Some(SlidingWindow {
        period: Some(6),
        default_window: 0,
        rope: SwaRope::Own,
    }),
    ..LLAMA_LIKE
};

/// Gemma 3 27B (62 layers) scales queries by 1/sqrt(n_embd/n_head) (`query_pre_attn_scalar`),
/// which GGUF does not record; llama.cpp keys it on the model size the same way.
fn quirks(hp: &mut HParams) {
    if hp.n_layer == 62 {
        hp.attn_scale = 1.0 / ((hp.n_embd / hp.heads[0].n_head) as f32).sqrt();
    }
}
