//! Qwen3.5 / 3.6 (dense): a hybrid of Gated DeltaNet layers ([`RecurrentMixer::GatedDeltaNet`])
//! and, every `full_attention_interval`-th layer (4), gated attention: per-head QK-norm, partial
//! NeoX RoPE (`rope.dimension_count` of each head; text positions make the multi-section RoPE
//! the plain one) and the output multiplied by the sigmoid of a per-head gate that the query
//! projection also produces. The FFN's norm is the tensor `post_attention_norm`.

use super::{no_quirks, Architecture, QkNorm, Recipe, RecurrentMixer, RopeStyle, LLAMA_LIKE};

pub(super) const QWEN35_RECIPE: Recipe = Recipe {
    rope: RopeStyle::NeoX,
    qk_norm: QkNorm::PerHead,
    ffn_norm: "post_attention_norm.weight",
    attn_output_gate: true,
    recurrent: Some(RecurrentMixer::GatedDeltaNet),
    ..LLAMA_LIKE
};

pub(super) static QWEN35: Architecture = Architecture {
    name: "qwen35",
    recipe: QWEN35_RECIPE,
    quirks: no_quirks,
};
