//! Gemma 4 (E2B, E4B, 12B, 31B, and the 26B-A4B mixture): Gemma 3's layers
//! (scaled embeddings, QK-norm, post-norms, GELU gating, sliding layers on their own RoPE)
//! with values RMS-normed per head, an attention scale of 1 (the norms set the scores'
//! size), `rope_freqs` on the global layers only, the last layers reading an earlier layer's
//! KV cache, per-layer inputs (E2B/E4B) and a scalar on each layer's output; in the mixture
//! a dense FFN beside routed experts. The sliding pattern comes from the file.

use super::{
    gemma3, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Recipe, SlidingWindow, SwaRope,
};
use crate::model::hparams::HParams;

pub(super) static GEMMA4: Architecture = Architecture {
    name: "gemma4",
    recipe: RECIPE,
    quirks,
};

/// Gemma 4's assistant drafter (`gemma4-assistant`): a few of Gemma 4's layers, each with
/// queries only (it reads its target's KV cache) and a dense FFN. Not a model of
/// its own: [`crate::model::Assistant`] loads it beside its target.
pub(crate) static GEMMA4_ASSISTANT: Architecture = Architecture {
    name: "gemma4-assistant",
    recipe: Recipe {
        per_layer_inputs: false,
        ffn: FfnRecipe::Dense,
        ..RECIPE
    },
    quirks,
};

const RECIPE: Recipe = Recipe {
    // The scale is 1: nothing to move before attention.
    scale_queries_before_attention: false,
    sliding_window: Some(SlidingWindow {
        period: None,
        default_window: 0,
        rope: SwaRope::Own,
    }),
    value_norm: true,
    values_may_be_keys: true,
    kv_sharing: true,
    per_layer_inputs: true,
    layer_output_scale: true,
    ffn: FfnRecipe::Moe(MoeRecipe {
        gating: Gating::Softmax,
        norm_weights: true,
        expert_width: ExpertWidth::ExpertKey,
        shared_expert: false,
        selection_bias: false,
        biases: false,
        beside_dense: true,
    }),
    ..gemma3::RECIPE
};

/// Scores are plain dot products of RMS-normed queries and keys (llama.cpp sets the scale to
/// 1 for every Gemma 4 model; the files do not record it).
fn quirks(hp: &mut HParams) {
    hp.attn_scale = 1.0;
}
