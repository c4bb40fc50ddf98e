//! OLMoE: RMS norms of the whole query and key projections (not per head) before NeoX RoPE;
//! the FFN a softmax-routed mixture of experts whose weights are not renormalised.

use super::{
    no_quirks, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, QkNorm, Recipe, RopeStyle,
    LLAMA_LIKE,
};

pub(super) static OLMOE: Architecture = Architecture {
    name: "olmoe",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        qk_norm: QkNorm::Whole,
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::Softmax,
            norm_weights: false,
            expert_width: ExpertWidth::DenseKey,
            shared_expert: false,
            selection_bias: false,
            biases: false,
            beside_dense: false,
        }),
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
