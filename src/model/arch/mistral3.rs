//! Mistral 3 (Ministral 3B/8B/14B, Mistral Small 3.x text): Llama's layers (interleaved-pair
//! RoPE, no sliding window) with YaRN read in full from the file (its betas and log
//! multiplier) and Llama 4's attention temperature: queries grow with the log of how many
//! original contexts back a position is. The files use the Tekken BPE vocabulary.

use super::{no_quirks, Architecture, Recipe, LLAMA_LIKE};

pub(super) static MISTRAL3: Architecture = Architecture {
    name: "mistral3",
    recipe: Recipe {
        attn_temperature: true,
        yarn_tuning: true,
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
