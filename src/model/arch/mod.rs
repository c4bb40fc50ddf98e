//! Supported architectures, one file each. An architecture is its name (`general.architecture`,
//! also the prefix of its metadata keys), a [`Recipe`] that says which tensors a layer has and
//! how the forward pass combines them, and the hyperparameter quirks its GGUF files leave
//! unwritten. The loader and the forward pass read only the recipe; adding an architecture is
//! one file here and one line in [`ARCHITECTURES`].

mod gemma2;
mod gemma3;
mod gemma4;
mod gpt_oss;
mod lfm2;
mod lfm2moe;
mod llama;
mod mistral3;
mod olmoe;
mod phi3;
mod qwen2;
mod qwen2moe;
mod qwen3;
mod qwen35;
mod qwen35moe;
mod qwen3moe;

use super::error::ModelError;
use super::hparams::HParams;
pub(crate) use gemma4::GEMMA4_ASSISTANT;

pub struct Architecture {
    /// `general.architecture`, and the prefix of the `<arch>.*` metadata keys.
    pub name: &'static str,
    pub recipe: Recipe,
    /// Sets what the metadata does not record (llama.cpp keys these on the model's size too).
    pub quirks: fn(&mut HParams),
}

/// A loaded model's architecture.
pub type Arch = &'static Architecture;

/// Every architecture Kolibri runs.
pub(crate) static ARCHITECTURES: &[&Architecture] = &[
    &llama::LLAMA,
    &qwen2::QWEN2,
    &qwen3::QWEN3,
    &qwen3moe::QWEN3MOE,
    &qwen2moe::QWEN2MOE,
    &olmoe::OLMOE,
    &phi3::PHI3,
    &gemma2::GEMMA2,
    &gemma3::GEMMA3,
    &lfm2::LFM2,
    &lfm2moe::LFM2MOE,
    &qwen35::QWEN35,
    &qwen35moe::QWEN35MOE,
    &gpt_oss::GPT_OSS,
    &mistral3::MISTRAL3,
    &gemma4::GEMMA4,
];

/// How a layer is built and computed: its token mixer (attention, or a recurrent mixer on the
/// layers [`Recipe::recurrent`] names) and its channel mixer ([`FfnRecipe`]).
pub struct Recipe {
    pub rope: RopeStyle,
    pub activation: Activation,
    /// Q, K and V biases (`attn_{q,k,v}.bias`).
    pub qkv_bias: Presence,
    /// Queries and keys RMS-normalised (`attn_{q,k}_norm`) before RoPE.
    pub qk_norm: QkNorm,
    /// RMS norms after attention and after the FFN, before the residual add (Gemma).
    pub post_norms: bool,
    /// Token embeddings multiplied by sqrt(n_embd) (Gemma).
    pub scale_embeddings: bool,
    /// Queries multiplied by the attention scale before attention instead of the scores after
    /// (Gemma; llama.cpp's graph does it so, and the f16 rounding of small queries in its
    /// attention kernel depends on it).
    pub scale_queries_before_attention: bool,
    /// Which layers attend only to a window of recent positions; `None`: the architecture has
    /// no sliding window (whatever the metadata says, as llama.cpp reads it).
    pub sliding_window: Option<SlidingWindow>,
    /// Attention scores and output logits squashed by `cap * tanh(x / cap)` (Gemma 2).
    pub softcap: Option<Softcap>,
    /// The final norm's tensor (`output_norm.weight`; LFM2's files call it `token_embd_norm`).
    pub output_norm: &'static str,
    /// The norm before the FFN (`ffn_norm.weight`; Qwen3.5's files call it
    /// `post_attention_norm`).
    pub ffn_norm: &'static str,
    /// The query projection holds, per head, the queries and then as many gate values; the
    /// attention output is multiplied by their sigmoid before the output projection (Qwen3.5).
    pub attn_output_gate: bool,
    /// A learned per-head logit in every attention softmax (`attn_sinks`, gpt-oss): the
    /// weight a head may give to no position at all.
    pub attn_sinks: bool,
    /// Values RMS-normalised per head, without weights, before they are stored (Gemma 4).
    pub value_norm: bool,
    /// `attn_v` may be missing: the values are then the key projection, taken before the key
    /// norm and RoPE (Gemma 4's larger models).
    pub values_may_be_keys: bool,
    /// The last `attention.shared_kv_layers` layers store no keys and values: each reads the
    /// cache of the last earlier layer of its kind (sliding or global) that has its own (Gemma
    /// 4).
    pub kv_sharing: bool,
    /// Per-layer inputs where `embedding_length_per_layer_input` is set (Gemma 4 E2B/E4B): a
    /// row per token of `per_layer_token_embd` plus a projection of the embedding, gating a
    /// small block after each layer's FFN.
    pub per_layer_inputs: bool,
    /// An optional `layer_output_scale` scalar multiplies each layer's output (Gemma 4).
    pub layer_output_scale: bool,
    /// Queries scaled up with their position by `attention.temperature_scale`, where the file
    /// sets it ([`crate::model::hparams::AttnTemperature`]; Mistral 3).
    pub attn_temperature: bool,
    /// YaRN's `rope.scaling.yarn_beta_fast`, `yarn_beta_slow` and `yarn_log_multiplier` read
    /// from the file (llama.cpp reads them for Mistral 3; others keep 32, 1 and none).
    pub yarn_tuning: bool,
    /// The token mixer of the layers that do not attend; `None`: every layer attends.
    pub recurrent: Option<RecurrentMixer>,
    pub ffn: FfnRecipe,
}

/// A token mixer that keeps a fixed-size state per sequence instead of KV rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecurrentMixer {
    /// LFM2's double-gated short convolution, `out_proj(c * conv(b * x))` with a causal kernel
    /// of `shortconv.l_cache` taps, on the layers whose `attention.head_count_kv` entry is 0.
    ShortConv,
    /// Gated DeltaNet linear attention (Qwen3.5): a causal convolution with SiLU over the
    /// projected queries, keys and values, then per value head the delta rule on a
    /// [head_v x head_k] state with a learned decay, a gated RMS norm and the output
    /// projection; on the layers `attention.recurrent_layers` marks, else all but every
    /// `full_attention_interval`-th.
    GatedDeltaNet,
}

/// Sliding-window attention as an architecture reads it from `attention.sliding_window` and
/// `attention.sliding_window_pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    /// The layer pattern when the metadata gives none: layer `il` slides when
    /// `il % period < period - 1`; 0: every layer slides; `None`: the file must give one.
    pub period: Option<usize>,
    /// The window when the metadata has none; 0: no sliding window unless the metadata sets
    /// one.
    pub default_window: usize,
    /// RoPE of the sliding layers.
    pub rope: SwaRope,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwaRope {
    /// `rope.freq_base_swa` (else 10000), no frequency scaling and no `rope_freqs` factors
    /// (Gemma 3 and 4).
    Own,
    /// `rope.freq_base_swa`, else the global layers' base; the global layers' scaling.
    Global,
}

/// Soft-capping defaults, used when the metadata lacks `attn_logit_softcapping` /
/// `final_logit_softcapping`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Softcap {
    pub attention: f32,
    pub output: f32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QkNorm {
    None,
    /// Each head on its own, weights [head_dim] (Qwen3, Gemma 3).
    PerHead,
    /// The whole projection at once, weights [n_head * head_dim] (OLMoE).
    Whole,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    Required,
    Optional,
}

/// The feed-forward block of every layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnRecipe {
    /// `down(act(gate x) * up x)`.
    Dense,
    /// Dense, with gate and up stored as one matrix `ffn_up` [2 * n_ff, n_embd], gate rows
    /// first (Phi-3).
    DenseGateUpFused,
    /// Mixture of experts: a router picks `expert_used_count` of `expert_count` experts per
    /// token, each a dense FFN of `expert_feed_forward_length`; their outputs are summed,
    /// weighted by the router.
    Moe(MoeRecipe),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeRecipe {
    pub gating: Gating,
    /// Whether the chosen experts' weights are renormalised to sum to 1, when the metadata's
    /// `expert_weights_norm` does not say.
    pub norm_weights: bool,
    /// Where an expert's hidden width comes from.
    pub expert_width: ExpertWidth,
    /// A shared expert every token uses, its output scaled by a sigmoid gate of its own
    /// (`ffn_{gate,up,down}_shexp`, `ffn_gate_inp_shexp`; Qwen2-MoE).
    pub shared_expert: bool,
    /// A per-expert bias (`exp_probs_b.bias`) added to the gate scores to choose the experts,
    /// not to weigh them (LFM2-MoE, DeepSeek V3).
    pub selection_bias: bool,
    /// Biases on the router logits and on every expert's gate, up and down projections
    /// (`ffn_gate_inp.bias`, `ffn_{gate,up,down}_exps.bias`; gpt-oss).
    pub biases: bool,
    /// The experts run beside a dense FFN, each side with its own norms (`ffn_norm`,
    /// `post_ffw_norm_1`; `pre_ffw_norm_2`, `post_ffw_norm_2`), their outputs added; the router
    /// reads the residual stream's unweighted norm over sqrt(n_embd) times `ffn_gate_inp.scale`,
    /// and each expert's output is multiplied by its `ffn_down_exps.scale` (Gemma 4's
    /// 26B-A4B). A file without an expert count is a dense model.
    pub beside_dense: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpertWidth {
    /// `expert_feed_forward_length`, else `feed_forward_length / expert_used_count`.
    ExpertKey,
    /// `feed_forward_length` (OLMoE, as llama.cpp reads it).
    DenseKey,
}

/// How router logits become expert weights (`expert_gating_func` where the metadata says:
/// 1 softmax, 2 sigmoid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// softmax over all experts, then the top k.
    Softmax,
    /// Each expert's sigmoid on its own, then the top k.
    Sigmoid,
    /// The top k by logit, then a softmax over those k only (gpt-oss).
    SoftmaxOfTopK,
}

/// How RoPE pairs up the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Rotate (x[2i], x[2i+1]) — original Llama.
    Interleaved,
    /// Rotate (x[i], x[i + d/2]) — GPT-NeoX, Qwen, Gemma.
    NeoX,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// silu(gate) * up
    SwiGlu,
    /// gelu_tanh(gate) * up
    GeGlu,
    /// gpt-oss's clamped SwiGLU: with `g = min(gate, limit)` and `u = clamp(up, ±limit)`,
    /// `g * sigmoid(alpha * g) * (u + 1)`.
    SwiGluOai { alpha: f32, limit: f32 },
}

/// The recipe most architectures share: Llama's (RMSNorm, SwiGLU, no biases, no extra norms).
pub(crate) const LLAMA_LIKE: Recipe = Recipe {
    rope: RopeStyle::Interleaved,
    activation: Activation::SwiGlu,
    qkv_bias: Presence::Optional,
    qk_norm: QkNorm::None,
    post_norms: false,
    scale_embeddings: false,
    scale_queries_before_attention: false,
    sliding_window: None,
    softcap: None,
    output_norm: "output_norm.weight",
    ffn_norm: "ffn_norm.weight",
    attn_output_gate: false,
    attn_sinks: false,
    value_norm: false,
    values_may_be_keys: false,
    kv_sharing: false,
    per_layer_inputs: false,
    layer_output_scale: false,
    attn_temperature: false,
    yarn_tuning: false,
    recurrent: None,
    ffn: FfnRecipe::Dense,
};

fn no_quirks(_: &mut HParams) {}

impl Architecture {
    pub fn from_name(name: &str) -> Result<Arch, ModelError> {
        if name == GEMMA4_ASSISTANT.name {
            return Err(ModelError::InvalidArgument(
                "a gemma4-assistant file is Gemma 4's drafter, not a model of its own: give it \
                 beside its target (--draft-assistant)"
                    .into(),
            ));
        }
        ARCHITECTURES
            .iter()
            .copied()
            .find(|a| a.name == name)
            .ok_or_else(|| ModelError::UnknownArchitecture(name.to_owned()))
    }

    /// The names of every supported architecture.
    pub fn supported() -> Vec<&'static str> {
        ARCHITECTURES.iter().map(|a| a.name).collect()
    }

    /// The mixture-of-experts recipe, if the FFN is one.
    pub fn moe(&self) -> Option<MoeRecipe> {
        match self.recipe.ffn {
            FfnRecipe::Moe(m) => Some(m),
            FfnRecipe::Dense | FfnRecipe::DenseGateUpFused => None,
        }
    }
}

impl std::fmt::Debug for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Architecture {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
