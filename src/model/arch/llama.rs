//! Llama 2/3.x, Mistral, SmolLM: RMSNorm, SwiGLU, interleaved-pair RoPE, optional biases.
//! Llama 3.1+ files carry their RoPE scaling as per-dimension divisors (`rope_freqs.weight`),
//! which the loader takes when present. Mistral-style files that set
//! `llama.attention.sliding_window` attend within that window on every layer, as the model was
//! trained (llama.cpp 0c1e57098 ignores the key and attends to the whole context).

use super::{no_quirks, Architecture, Recipe, SlidingWindow, SwaRope, LLAMA_LIKE};

pub(super) static LLAMA: Architecture = Architecture {
    name: "llama",
    recipe: Recipe {
        sliding_window: Some(SlidingWindow {
            period: Some(0),
            default_window: 0,
            rope: SwaRope::Global,
        }),
        ..LLAMA_LIKE
    },
    quirks: no_quirks,
};
