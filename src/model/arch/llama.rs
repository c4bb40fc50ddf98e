//! Llama 2/3.x, Mistral, SmolLM: RMSNorm, SwiGLU, interleaved-pair RoPE, optional biases.
//! Llama 3.1+ files carry their RoPE scaling as per-dimension divisors (`rope_freqs.weight`),
//! which the loader takes when present.

use super::{no_quirks, Architecture, LLAMA_LIKE};

pub(super) static LLAMA: Architecture = Architecture {
    name: "llama",
    recipe: LLAMA_LIKE,
    quirks: no_quirks,
};
