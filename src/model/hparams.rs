//! Hyperparameters read from GGUF metadata (`<arch>.*` keys).

use super::arch::{Arch, ExpertWidth, MoeRecipe};
use super::error::ModelError;
use crate::gguf::GgufFile;

/// RoPE base of sliding-window layers when `<arch>.rope.freq_base_swa` is absent.
const DEFAULT_SWA_ROPE_BASE: f32 = 10_000.0;

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
    /// Dimensions of each head that RoPE rotates (the rest pass through).
    pub rope_dims: usize,
    /// Sliding-window size for local layers (0: no sliding window).
    pub sliding_window: usize,
    /// Per layer: whether it attends only within the sliding window.
    pub swa_layers: Vec<bool>,
    pub rope_base_swa: f32,
    /// `logits = cap * tanh(logits / cap)` when non-zero (Gemma 2 style).
    pub final_logit_softcap: f32,
    /// Multiplier applied to attention scores (1/sqrt(head_dim) unless the model says otherwise).
    pub attn_scale: f32,
    /// Mixture-of-experts shape; `None` for a dense model.
    pub moe: Option<MoeParams>,
}

/// The experts of a mixture-of-experts FFN.
#[derive(Clone, Copy, Debug)]
pub struct MoeParams {
    /// Experts per layer (`expert_count`).
    pub n_expert: usize,
    /// Experts each token uses (`expert_used_count`).
    pub n_expert_used: usize,
    /// Hidden width of one expert (`expert_feed_forward_length`).
    pub n_ff_exp: usize,
    /// Whether the chosen experts' weights are renormalised to sum to 1.
    pub norm_weights: bool,
    /// Multiplies the expert weights (1 when the metadata has no `expert_weights_scale`).
    pub weights_scale: f32,
    /// Hidden width of the shared expert (`expert_shared_feed_forward_length`); 0 without one.
    pub n_ff_shexp: usize,
}

impl HParams {
    pub fn from_gguf(gguf: &GgufFile, arch: Arch, n_vocab: usize) -> Result<HParams, ModelError> {
        let prefix = arch.name;
        let key = |k: &str| format!("{prefix}.{k}");
        let req = |k: &str| -> Result<usize, ModelError> {
            let full = key(k);
            let v = gguf
                .get_u64(&full)
                .ok_or_else(|| ModelError::MissingKey(full.clone()))?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < (1 << 31))
                .ok_or(ModelError::BadHyperparameter {
                    key: full,
                    reason: format!("{v} is out of range"),
                })
        };
        let opt = |k: &str| gguf.get_u64(&key(k)).and_then(|v| usize::try_from(v).ok());

        let n_embd = req("embedding_length")?;
        let n_head = req("attention.head_count")?;
        let n_head_kv = opt("attention.head_count_kv").unwrap_or(n_head);
        let n_layer = req("block_count")?;
        let head_dim_k = opt("attention.key_length").unwrap_or(n_embd / n_head);
        let head_dim_v = opt("attention.value_length").unwrap_or(head_dim_k);
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
        let rope_dims = opt("rope.dimension_count").unwrap_or(head_dim_k);
        if rope_dims > head_dim_k || rope_dims % 2 != 0 {
            return Err(bad(
                "rope.dimension_count",
                format!("{rope_dims} for head size {head_dim_k}"),
            ));
        }

        let rope_freq_scale = match gguf.get_str(&key("rope.scaling.type")) {
            None | Some("none") => 1.0,
            Some("linear") => {
                let factor = gguf.get_f32(&key("rope.scaling.factor")).unwrap_or(1.0);
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(bad("rope.scaling.factor", format!("{factor}")));
                }
                1.0 / factor
            }
            Some(other) => {
                return Err(bad(
                    "rope.scaling.type",
                    format!("RoPE scaling {other:?} is not supported"),
                ))
            }
        };

        let swa_period = arch.recipe.swa_default_period;
        let sliding_window = match swa_period {
            Some(_) => opt("attention.sliding_window").unwrap_or(0),
            None => 0,
        };
        // The pattern is either one bool per layer or a period n: layer il slides when
        // il % n < n - 1 (n = 0: none slide).
        let swa_layers = match gguf.get(&key("attention.sliding_window_pattern")) {
            _ if sliding_window == 0 => vec![false; n_layer],
            Some(crate::gguf::Value::Array(items)) => {
                if items.len() != n_layer {
                    return Err(bad(
                        "attention.sliding_window_pattern",
                        format!("{} entries for {n_layer} layers", items.len()),
                    ));
                }
                items.iter().map(|v| v.as_bool().unwrap_or(false)).collect()
            }
            other => {
                let n = other
                    .and_then(|v| v.as_u64())
                    .map_or(swa_period.unwrap_or(0), |n| n as usize);
                (0..n_layer).map(|il| n > 0 && il % n < n - 1).collect()
            }
        };
        let rope_base_swa = gguf
            .get_f32(&key("rope.freq_base_swa"))
            .unwrap_or(DEFAULT_SWA_ROPE_BASE);
        let final_logit_softcap = gguf.get_f32(&key("final_logit_softcapping")).unwrap_or(0.0);

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
        let n_ff = opt("feed_forward_length");
        let moe = match arch.moe() {
            Some(recipe) => Some(moe_params(gguf, prefix, recipe, n_ff)?),
            None => None,
        };
        let n_ff = match (n_ff, &moe) {
            (Some(n), _) if n > 0 => n,
            (_, Some(m)) => m.n_ff_exp,
            _ => req("feed_forward_length")?,
        };
        let mut hp = HParams {
            n_vocab,
            n_ctx_train: opt("context_length").unwrap_or(2048),
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff,
            rms_eps,
            rope_base,
            rope_freq_scale,
            rope_dims,
            sliding_window,
            swa_layers,
            rope_base_swa,
            final_logit_softcap,
            attn_scale: 1.0 / (head_dim_k as f32).sqrt(),
            moe,
        };
        (arch.quirks)(&mut hp);
        Ok(hp)
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

/// The expert counts of a mixture-of-experts model, checked against each other.
fn moe_params(
    gguf: &GgufFile,
    prefix: &str,
    recipe: MoeRecipe,
    n_ff: Option<usize>,
) -> Result<MoeParams, ModelError> {
    let key = |k: &str| format!("{prefix}.{k}");
    let count = |k: &str| -> Result<usize, ModelError> {
        let v = gguf
            .get_u64(&key(k))
            .ok_or_else(|| ModelError::MissingKey(key(k)))?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0 && v <= MAX_EXPERTS)
            .ok_or(ModelError::BadHyperparameter {
                key: key(k),
                reason: format!("{v} experts (1..={MAX_EXPERTS} allowed)"),
            })
    };
    let n_expert = count("expert_count")?;
    let n_expert_used = count("expert_used_count")?;
    if n_expert_used > n_expert {
        return Err(ModelError::BadHyperparameter {
            key: key("expert_used_count"),
            reason: format!("{n_expert_used} experts per token of only {n_expert}"),
        });
    }
    // Without the key, llama.cpp splits the dense width among the used experts.
    let n_ff_exp = match (
        recipe.expert_width,
        gguf.get_u64(&key("expert_feed_forward_length")),
    ) {
        (ExpertWidth::DenseKey, _) => n_ff.unwrap_or(0),
        (ExpertWidth::ExpertKey, Some(v)) => usize::try_from(v).unwrap_or(0),
        (ExpertWidth::ExpertKey, None) => n_ff.unwrap_or(0) / n_expert_used,
    };
    if n_ff_exp == 0 || n_ff_exp >= 1 << 31 {
        return Err(ModelError::BadHyperparameter {
            key: key("expert_feed_forward_length"),
            reason: format!("expert width {n_ff_exp}"),
        });
    }
    // Without the key, llama.cpp gives the shared expert the dense width.
    let n_ff_shexp = match gguf.get_u64(&key("expert_shared_feed_forward_length")) {
        _ if !recipe.shared_expert => 0,
        Some(v) => usize::try_from(v).unwrap_or(0),
        None => n_ff.unwrap_or(0),
    };
    if recipe.shared_expert && (n_ff_shexp == 0 || n_ff_shexp >= 1 << 31) {
        return Err(ModelError::BadHyperparameter {
            key: key("expert_shared_feed_forward_length"),
            reason: format!("shared expert width {n_ff_shexp}"),
        });
    }
    let weights_scale = gguf.get_f32(&key("expert_weights_scale")).unwrap_or(0.0);
    if !weights_scale.is_finite() || weights_scale < 0.0 {
        return Err(ModelError::BadHyperparameter {
            key: key("expert_weights_scale"),
            reason: format!("{weights_scale}"),
        });
    }
    Ok(MoeParams {
        n_expert,
        n_expert_used,
        n_ff_exp,
        norm_weights: gguf
            .get_bool(&key("expert_weights_norm"))
            .unwrap_or(recipe.norm_weights),
        // 0 (absent) means no scaling, as in llama.cpp.
        weights_scale: if weights_scale == 0.0 {
            1.0
        } else {
            weights_scale
        },
        n_ff_shexp,
    })
}

/// More experts than any released model has (DeepSeek: 256, Kimi: 384); a larger count is a
/// corrupt file.
const MAX_EXPERTS: usize = 4096;
