//! Qwen3.5 / 3.6 MoE: Qwen3.5's layers ([`super::qwen35`]) with a mixture of experts as every
//! FFN: a softmax router, the top `expert_used_count` experts renormalised, and a shared expert
//! behind a sigmoid gate of its own. Gate and up experts may be stacked in one tensor.

use super::qwen35::QWEN35_RECIPE;
use super::{no_quirks, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Recipe};

pub(super) static QWEN35MOE: Architecture = Architecture {
    name: "qwen35moe",
    recipe: Recipe {
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::Softmax,
            norm_weights: true,
            expert_width: ExpertWidth::ExpertKey,
            shared_expert: true,
            selection_bias: false,
            biases: false,
            beside_dense: false,
        }),
        ..QWEN35_RECIPE
    },
    quirks: no_quirks,
};
