//! Qwen3-MoE: Qwen3's attention; every FFN a mixture of experts with a softmax router over all
//! experts, the top `expert_used_count` chosen and their weights renormalised to sum to 1
//! (llama.cpp always renormalises for this architecture).

use super::qwen3::QWEN3_RECIPE;
use super::{no_quirks, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Recipe};

pub(super) static QWEN3MOE: Architecture = Architecture {
    name: "qwen3moe",
    recipe: Recipe {
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::Softmax,
            norm_weights: true,
            expert_width: ExpertWidth::ExpertKey,
            shared_expert: false,
            selection_bias: false,
            biases: false,
            beside_dense: false,
        }),
        ..QWEN3_RECIPE
    },
    quirks: no_quirks,
};
