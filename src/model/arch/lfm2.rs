//! LFM2 (Liquid): a hybrid. Most layers mix tokens with a double-gated short convolution
//! ([`RecurrentMixer::ShortConv`]), the others attend (GQA, per-head QK-norm, NeoX RoPE); every
//! layer then has a SwiGLU FFN. The layers that attend are those with a non-zero entry in the
//! per-layer `attention.head_count_kv`. With `attention.sliding_window` set, every attention
//! layer slides. The output norm is the tensor `token_embd_norm` (as llama.cpp names it).

use super::{
    no_quirks, Architecture, QkNorm, Recipe, RecurrentMixer, RopeStyle, SlidingWindow, SwaRope,
    LLAMA_LIKE,
};

pub(super) const LFM2_RECIPE: Recipe = Recipe {
    rope: RopeStyle::NeoX,
    qk_norm: QkNorm::PerHead,
    sliding_window: Some(SlidingWindow {
        period: Some(0),
        default_window: 0,
        rope: SwaRope::Global,
    }),
    output_norm: "token_embd_norm.weight",
    recurrent: Some(RecurrentMixer::ShortConv),
    ..LLAMA_LIKE
};

pub(super) static LFM2: Architecture = Architecture {
    name: "lfm2",
    recipe: LFM2_RECIPE,
    quirks: no_quirks,
};
