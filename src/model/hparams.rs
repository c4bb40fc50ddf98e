//! Hyperparameters read from GGUF metadata (`<arch>.*` keys).

use super::arch::Arch;
use super::error::ModelError;
use crate::gguf::GgufFile;

/// RoPE base of sliding-window layers when `<arch>.rope.freq_base_swa` is absent.
const DEFAULT_SWA_ROPE_BASE: f32 = 10_000.0;
/// Gemma 3: every 6th layer is global, the others slide (unless metadata says otherwise).
const GEMMA3_SWA_PATTERN: usize = 6;

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
}

impl HParams {
    pub fn from_gguf(gguf: &GgufFile, arch: Arch, n_vocab: usize) -> Result<HParams, ModelError> {
        let prefix = arch.name();
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

        let sliding_window = match arch {
            Arch::Gemma3 => opt("attention.sliding_window").unwrap_or(0),
            _ => 0,
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
                    .map_or(GEMMA3_SWA_PATTERN, |n| n as usize);
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
        Ok(HParams {
            n_vocab,
            n_ctx_train: opt("context_length").unwrap_or(2048),
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff: req("feed_forward_length")?,
            rms_eps,
            rope_base,
            rope_freq_scale,
            rope_dims,
            sliding_window,
            swa_layers,
            rope_base_swa,
            final_logit_softcap,
            attn_scale: 1.0 / (head_dim_k as f32).sqrt(),
        })
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
