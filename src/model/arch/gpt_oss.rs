//! gpt-oss (OpenAI's open-weight MoE, 20B and 120B): every layer attends, the even ones within
//! a sliding window (`attention.sliding_window`, 128 in the released files) and the odd ones
//! over the whole context, with Q/K/V/O biases, NeoX RoPE (YaRN-scaled in the released
//! files) and a learned sink logit per head in every softmax. Every FFN is a mixture of
//! experts, normed by `post_attention_norm`: the top `expert_used_count` router logits (the
//! router has a bias) softmaxed among themselves, each expert a clamped SwiGLU with biased
//! projections. Experts ship as MXFP4.

use super::{
    no_quirks, Activation, Architecture, ExpertWidth, FfnRecipe, Gating, MoeRecipe, Recipe,
    RopeStyle, SlidingWindow, SwaRope, LLAMA_LIKE,
};

pub(super) static GPT_OSS: Architecture = Architecture {
    name: "gpt-oss",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        activation: Activation::SwiGluOai {
            alpha: 1.702,
            limit: 7.0,
        },
        sliding_window: Some(SlidingWindow {
            period: Some(2),
            default_window: 0,
            rope: SwaRope::Global,
        }),
        ffn_norm: "post_attention_norm.weight",
        attn_sinks: true,
        ffn: FfnRecipe::Moe(MoeRecipe {
            gating: Gating::SoftmaxOfTopK,
            norm_weights: false,
            expert_width: ExpertWidth::ExpertKey,
            shared_expert: false,
            selection_bias: false,
            biases: true,
            beside_dense: false,
        }),
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
