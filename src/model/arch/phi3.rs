//! Phi-3 and Phi-4-mini: Q, K and V in one matrix (`attn_qkv`), gate and up in one (`ffn_up`,
//! gate rows first), NeoX RoPE over all or part of each head, and for the long-context models
//! LongRoPE: per-dimension divisors `rope_factors_long` / `rope_factors_short`, the long ones
//! when a context is longer than `rope.scaling.original_context_length`, with
//! `rope.scaling.attn_factor` scaling the rotated dimensions. Queries are scaled before
//! attention, as llama.cpp's graph does. llama.cpp 0c1e57098 ignores Phi's sliding window, and
//! so does Kolibri.

use super::{no_quirks, Architecture, FfnRecipe, Recipe, RopeStyle, LLAMA_LIKE};

pub(super) static PHI3: Architecture = Architecture {
    name: "phi3",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        scale_queries_before_attention: true,
        ffn: FfnRecipe::DenseGateUpFused,
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
