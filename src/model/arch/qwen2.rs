//! Qwen2 / Qwen2.5: Llama's layer with required Q/K/V biases and NeoX RoPE.

use super::{no_quirks, Architecture, Presence, Recipe, RopeStyle, LLAMA_LIKE};

pub(super) static QWEN2: Architecture = Architecture {
    name: "qwen2",
    recipe: Recipe {
        rope: RopeStyle::NeoX,
        qkv_bias: Presence::Required,
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
