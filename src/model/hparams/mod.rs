//! Hyperparameters read from GGUF metadata (`<arch>.*` keys).

mod kv_sharing;
mod mixers;
mod moe;
mod rope;
mod window;

pub use mixers::{DeltaNetShape, MixerKind};
pub use moe::MoeParams;
pub use rope::Yarn;

use super::arch::Arch;
use super::error::ModelError;
use crate::gguf::GgufFile;

/// More layers than any model has: a bound before per-layer tables are allocated.
const MAX_LAYERS: usize = 1 << 14;

#[derive(Clone, Debug)]
pub struct HParams {
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Per-head dimension of queries/keys and of values.
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub n_ff: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    /// Multiplies positions (1 / linear scaling factor).
    pub rope_freq_scale: f32,
    /// Dimensions of each head that RoPE rotates (the rest pass through), on the global
    /// layers and on the sliding ones.
    pub rope_dims: usize,
    pub rope_dims_swa: usize,
    /// Multiplies the rotated dimensions of queries and keys (`rope.scaling.attn_factor`;
    /// LongRoPE).
    pub rope_attn_factor: f32,
    /// The context the model was trained at before RoPE scaling: longer contexts take the
    /// long LongRoPE factors.
    pub n_ctx_orig: usize,
    /// YaRN's per-pair blend of scaled and original frequencies, where the file asks for it.
    pub yarn: Option<Yarn>,
    /// Sliding-window size for local layers (0: no sliding window).
    pub sliding_window: usize,
    /// Per layer: whether it attends only within the sliding window.
    pub swa_layers: Vec<bool>,
    pub rope_base_swa: f32,
    pub rope_freq_scale_swa: f32,
    /// `scores = cap * tanh(scores / cap)` when non-zero (Gemma 2).
    pub attn_softcap: f32,
    /// `logits = cap * tanh(logits / cap)` when non-zero (Gemma 2).
    pub final_logit_softcap: f32,
    /// Multiplier applied to attention scores (1/sqrt(head_dim) unless the model says otherwise).
    pub attn_scale: f32,
    /// Queries scaled up with their position, where the recipe and the file ask for it.
    pub attn_temperature: Option<AttnTemperature>,
    /// Mixture-of-experts shape; `None` for a dense model.
    pub moe: Option<MoeParams>,
    /// Per layer: its token mixer.
    pub mixers: Vec<MixerKind>,
    /// The layers that attend and store their keys and values, in order: the KV cache's layer
    /// `j` is layer `attention_layers[j]`.
    pub attention_layers: Vec<usize>,
    /// Per layer: the KV cache layer it reads (its own, or with KV sharing an earlier
    /// layer's); `None` for recurrent layers.
    pub kv_reads: Vec<Option<usize>>,
    /// Width of each layer's per-layer input (`embedding_length_per_layer_input`); 0: none.
    pub n_embd_per_layer: usize,
    /// Taps of the short convolution (`shortconv.l_cache`); 0 without short-convolution layers.
    pub conv_kernel: usize,
    /// The Gated DeltaNet layers' shape, if the model has them.
    pub delta_net: Option<DeltaNetShape>,
}

impl HParams {
    pub fn from_gguf(gguf: &GgufFile, arch: Arch, n_vocab: usize) -> Result<HParams, ModelError> {
        let prefix = arch.name;
        let key = |k: &str| format!("{prefix}.{k}");
        let req = |k: &str| -> Result<usize, ModelError> {
            let full = key(k);
            let v = per_model_value(gguf, &full)?
                .ok_or_else(|| ModelError::MissingKey(full.clone()))?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < (1 << 31))
                .ok_or(ModelError::BadHyperparameter {
                    key: full,
                    reason: format!("{v} is out of range"),
                })
        };
        let opt = |k: &str| -> Result<Option<usize>, ModelError> {
            Ok(per_model_value(gguf, &key(k))?.and_then(|v| usize::try_from(v).ok()))
        };

        let n_embd = req("embedding_length")?;
        let n_head = req("attention.head_count")?;
        let n_layer = req("block_count")?;
        if n_layer > MAX_LAYERS {
            return Err(ModelError::BadHyperparameter {
                key: key("block_count"),
                reason: format!("{n_layer} layers (at most {MAX_LAYERS})"),
            });
        }
        let (mixers, n_head_kv, conv_kernel, delta_net) = match arch.recipe.recurrent {
            None => {
                let n_head_kv = opt("attention.head_count_kv")?;
                (vec![MixerKind::Attention; n_layer], n_head_kv, 0, None)
            }
            Some(_) => {
                let m = mixers::read(gguf, arch, n_layer)?;
                let n_head_kv = m
                    .n_head_kv
                    .map(|h| usize::try_from(h).unwrap_or(usize::MAX));
                (m.kinds, n_head_kv, m.conv_kernel, m.delta_net)
            }
        };
        let n_head_kv = n_head_kv.unwrap_or(n_head);
        let head_dim_k = opt("attention.key_length")?.unwrap_or(n_embd / n_head);
        let head_dim_v = opt("attention.value_length")?.unwrap_or(head_dim_k);
        let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
            key: key(k),
            reason,
        };
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(bad(
                "attention.head_count_kv",
                format!("{n_head_kv} does not divide the head count {n_head}"),
            ));
        }
        if head_dim_k == 0 || head_dim_k % 2 != 0 || head_dim_v == 0 {
            return Err(bad(
                "attention.key_length",
                format!("head size {head_dim_k} must be even"),
            ));
        }
        // Values taken from the key projection have the keys' size.
        if arch.recipe.values_may_be_keys && head_dim_v != head_dim_k {
            return Err(bad(
                "attention.value_length",
                format!("{head_dim_v} differs from the key length {head_dim_k}"),
            ));
        }
        let rope_dims = opt("rope.dimension_count")?.unwrap_or(head_dim_k);
        let rope_dims_swa = match arch.recipe.sliding_window {
            Some(_) => opt("rope.dimension_count_swa")?.unwrap_or(rope_dims),
            None => rope_dims,
        };
        for (k, dims) in [
            ("rope.dimension_count", rope_dims),
            ("rope.dimension_count_swa", rope_dims_swa),
        ] {
            if dims > head_dim_k || dims % 2 != 0 {
                return Err(bad(k, format!("{dims} for head size {head_dim_k}")));
            }
        }
        // Sliding layers with heads of their own size (Gemma 4's 256 beside 512) need a
        // cache of per-layer shapes, which Kolibri does not have yet.
        for (k, global) in [
            ("attention.key_length_swa", head_dim_k),
            ("attention.value_length_swa", head_dim_v),
        ] {
            match opt(k)? {
                Some(d) if d != global => {
                    return Err(bad(
                        k,
                        format!(
                            "sliding layers' heads of {d} beside global ones of {global} are \
                             not supported yet"
                        ),
                    ))
                }
                _ => {}
            }
        }

        let n_ctx_train = opt("context_length")?.unwrap_or(2048);
        let rope = rope::read(gguf, prefix, n_ctx_train, arch.recipe.yarn_tuning)?;
        let window = window::read(gguf, arch, n_layer)?;
        let softcap = |k: &str, default: f32| -> Result<f32, ModelError> {
            let cap = gguf.get_f32(&key(k)).unwrap_or(default);
            if !(cap.is_finite() && cap >= 0.0) {
                return Err(bad(k, format!("{cap}")));
            }
            Ok(cap)
        };
        let (attn_softcap, final_logit_softcap) = match arch.recipe.softcap {
            Some(d) => (
                softcap("attn_logit_softcapping", d.attention)?,
                softcap("final_logit_softcapping", d.output)?,
            ),
            None => (0.0, softcap("final_logit_softcapping", 0.0)?),
        };

        let rms_eps = gguf
            .get_f32(&key("attention.layer_norm_rms_epsilon"))
            .unwrap_or(1e-5);
        let rope_base = gguf.get_f32(&key("rope.freq_base")).unwrap_or(10_000.0);
        if !(rope_base.is_finite() && rope_base > 0.0 && rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(bad(
                "rope.freq_base",
                format!("base {rope_base}, eps {rms_eps}"),
            ));
        }
        let n_ff = opt("feed_forward_length")?;
        let experts_in_file = gguf.get_u64(&key("expert_count")).is_some_and(|n| n > 0);
        let moe = match arch.moe() {
            // Experts beside a dense FFN: a file without them is a dense model.
            Some(recipe) if recipe.beside_dense && !experts_in_file => None,
            Some(recipe) => Some(moe::moe_params(gguf, prefix, recipe, n_ff)?),
            None => {
                moe::refuse_experts(gguf, prefix)?;
                None
            }
        };
        let n_ff = match (n_ff, &moe) {
            (Some(n), _) if n > 0 => n,
            (_, Some(m)) => m.n_ff_exp,
            _ => req("feed_forward_length")?,
        };
        let mut hp = HParams {
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff,
            rms_eps,
            rope_base,
            rope_freq_scale: rope.freq_scale,
            rope_dims,
            rope_dims_swa,
            rope_attn_factor: rope.attn_factor,
            n_ctx_orig: rope.n_ctx_orig,
            yarn: rope.yarn,
            sliding_window: window.size,
            swa_layers: window.layers,
            rope_base_swa: window.rope_base.unwrap_or(rope_base),
            rope_freq_scale_swa: window.rope_freq_scale.unwrap_or(rope.freq_scale),
            attn_softcap,
            final_logit_softcap,
            attn_scale: 1.0 / (head_dim_k as f32).sqrt(),
            attn_temperature: match arch.recipe.attn_temperature {
                true => AttnTemperature::read(gguf, prefix, rope.n_ctx_orig)?,
                false => None,
            },
            moe,
            attention_layers: Vec::new(),
            kv_reads: Vec::new(),
            n_embd_per_layer: match arch.recipe.per_layer_inputs {
                true => opt("embedding_length_per_layer_input")?.unwrap_or(0),
                false => 0,
            },
            mixers,
            conv_kernel,
            delta_net,
        };
        let shared = match arch.recipe.kv_sharing {
            true => opt("attention.shared_kv_layers")?.unwrap_or(0),
            false => 0,
        };
        (hp.attention_layers, hp.kv_reads) = kv_sharing::assign(&hp, shared)
            .map_err(|reason| bad("attention.shared_kv_layers", reason))?;
        (arch.quirks)(&mut hp);
        Ok(hp)
    }

    /// The KV cache layer that layer `il` reads, if it attends.
    pub fn kv_layer(&self, il: usize) -> Option<usize> {
        self.kv_reads[il]
    }

    /// Whether layer `il` stores its own keys and values (it attends, and does not read an
    /// earlier layer's).
    pub fn stores_kv(&self, il: usize) -> bool {
        self.attention_layers.binary_search(&il).is_ok()
    }

    /// Whether layer `il` attends only within the sliding window.
    pub fn is_sliding(&self, il: usize) -> bool {
        self.swa_layers[il]
    }

    /// Number of query heads sharing one key/value head.
    pub fn gqa_group(&self) -> usize {
        self.n_head / self.n_head_kv
    }

    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim_k
    }

    pub fn k_dim(&self) -> usize {
        self.n_head_kv * self.head_dim_k
    }

    pub fn v_dim(&self) -> usize {
        self.n_head_kv * self.head_dim_v
    }
}

/// Llama 4's attention temperature tuning (Mistral 3 too): far from the start, where scores
/// flatten over many positions, queries are scaled by `1 + scale * ln(floor(pos / period) + 1)`
/// (`attention.temperature_scale`; `period`: RoPE's original context).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnTemperature {
    pub scale: f32,
    pub period: usize,
}

impl AttnTemperature {
    fn read(gguf: &GgufFile, prefix: &str, period: usize) -> Result<Option<Self>, ModelError> {
        let key = format!("{prefix}.attention.temperature_scale");
        match gguf.get_f32(&key).unwrap_or(0.0) {
            0.0 => Ok(None),
            scale if scale.is_finite() && period > 0 => Ok(Some(AttnTemperature { scale, period })),
            scale => Err(ModelError::BadHyperparameter {
                key,
                reason: format!("{scale} over an original context of {period}"),
            }),
        }
    }

    /// The query multiplier at position `pos`: the quotient in f32, the rest in f64, as
    /// llama.cpp computes it.
    pub fn at(&self, pos: usize) -> f32 {
        let steps = f64::from((pos as f32 / self.period as f32).floor());
        ((steps + 1.0).ln() * self.scale as f64 + 1.0) as f32
    }
}

/// A whole-model integer: a scalar, or a per-layer array whose entries are all the same (GGUF
/// allows per-layer head counts and widths; Kolibri's models have one value for all layers).
/// A per-layer array that varies is an error, not a default.
fn per_model_value(gguf: &GgufFile, key: &str) -> Result<Option<u64>, ModelError> {
    let Some(value) = gguf.get(key) else {
        return Ok(None);
    };
    let bad = |reason: String| ModelError::BadHyperparameter {
        key: key.to_string(),
        reason,
    };
    if let Some(v) = value.as_u64() {
        return Ok(Some(v));
    }
    let Some(items) = value.as_array() else {
        return Err(bad(format!("{} is not an integer", value.summary())));
    };
    let values: Vec<Option<u64>> = (0..items.len())
        .map(|i| items.get(i).and_then(|v| v.as_u64()))
        .collect();
    match values.first() {
        Some(&Some(first)) if values.iter().all(|&v| v == Some(first)) => Ok(Some(first)),
        _ => Err(bad(format!(
            "per-layer values {} differ between layers (not supported)",
            value.summary()
        ))),
    }
}
