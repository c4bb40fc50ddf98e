//! Qwen3 (dense): per-head RMSNorm of queries and keys before NeoX RoPE, no Q/K/V biases; the
//! head size (`attention.key_length`) is independent of the embedding width.

use super::{no_quirks, Architecture, QkNorm, Recipe, RopeStyle, LLAMA_LIKE};

pub(super) const QWEN3_RECIPE: Recipe = Recipe {
    rope: RopeStyle::NeoX,
    qk_norm: QkNorm::PerHead,
    ..LLAMA_LIKE
};

pub(super) static QWEN3: Architecture = Architecture {
    name: "qwen3",
    recipe: QWEN3_RECIPE,
    quirks: no_quirks,
};
