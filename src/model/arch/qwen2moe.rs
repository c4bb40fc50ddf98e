//! Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention (Q/K/V biases, NeoX RoPE); the
//! FFN a softmax-routed mixture of experts whose weights are not renormalised, plus a shared
//! expert every token uses, scaled by sigmoid(`ffn_gate_inp_shexp` · x).

use super::{
    no_quirks, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Presence, Recipe,
    RopeStyle, LLAMA_LIKE,
};

pub(super) static QWEN2MOE: Architecture = Architecture {
    name: "qwen2moe",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        qkv_bias: Presence::Required,
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::Softmax,
            norm_weights: false,
            expert_width: ExpertWidth::ExpertKey,
            shared_expert: true,
            selection_bias: false,
            biases: false,
            beside_dense: false,
        }),
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
