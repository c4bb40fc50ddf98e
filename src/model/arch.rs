//! Supported architectures and what distinguishes them.

use super::error::ModelError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Llama 2/3, Mistral, SmolLM: RMSNorm, SwiGLU, interleaved-pair RoPE.
    Llama,
    /// Qwen2 / Qwen2.5: like Llama plus Q/K/V biases and NeoX RoPE.
    Qwen2,
    /// Gemma 3: scaled embeddings, QK-norm, pre+post norms, GELU-tanh, sliding-window layers.
    Gemma3,
}

/// How RoPE pairs up the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Rotate (x[2i], x[2i+1]) — original Llama.
    Interleaved,
    /// Rotate (x[i], x[i + d/2]) — GPT-NeoX, Qwen, Gemma.
    NeoX,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) * up
    SwiGlu,
    /// gelu_tanh(gate) * up
    GeGlu,
}

impl Arch {
    pub const SUPPORTED: &'static [&'static str] = &["llama", "qwen2", "gemma3"];

    pub fn from_name(name: &str) -> Result<Arch, ModelError> {
        match name {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "gemma3" => Ok(Arch::Gemma3),
            other => Err(ModelError::UnknownArchitecture(other.to_owned())),
        }
    }

    /// The prefix of this architecture's metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }

    pub fn rope_style(self) -> RopeStyle {
        match self {
            Arch::Llama => RopeStyle::Interleaved,
            Arch::Qwen2 | Arch::Gemma3 => RopeStyle::NeoX,
        }
    }

    pub fn activation(self) -> Activation {
        match self {
            Arch::Gemma3 => Activation::GeGlu,
            _ => Activation::SwiGlu,
        }
    }

    /// Gemma multiplies token embeddings by sqrt(n_embd).
    pub fn scales_embeddings(self) -> bool {
        self == Arch::Gemma3
    }

    /// Gemma multiplies the queries by the attention scale instead of scaling the scores.
    pub fn scales_queries_before_attention(self) -> bool {
        self == Arch::Gemma3
    }

    /// Gemma 3 RMS-normalises each query and key head and adds norms after attention and FFN.
    pub fn has_qk_norm_and_post_norms(self) -> bool {
        self == Arch::Gemma3
    }
}
