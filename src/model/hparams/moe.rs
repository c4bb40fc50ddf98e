//! The expert counts of mixture-of-experts models.

use super::super::arch::{ExpertWidth, Gating, MoeRecipe};
use super::super::error::ModelError;
use crate::gguf::GgufFile;

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
    /// How router logits become expert weights.
    pub gating: Gating,
    /// The first layers whose FFN is dense, not a mixture (`leading_dense_block_count`).
    pub n_dense_lead: usize,
}

/// The expert counts of a mixture-of-experts model, checked against each other.
pub(super) fn moe_params(
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
    // A per-layer array (LFM2-MoE's converter writes one) must hold one width.
    let n_ff_exp = match (
        recipe.expert_width,
        super::per_model_value(gguf, &key("expert_feed_forward_length"))?,
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
    // gpt-oss routes its own way whatever the key says (llama.cpp's graph fixes it too).
    let gating = match gguf.get_u64(&key("expert_gating_func")) {
        _ if recipe.gating == Gating::SoftmaxOfTopK => recipe.gating,
        None => recipe.gating,
        Some(1) => Gating::Softmax,
        Some(2) => Gating::Sigmoid,
        Some(3) => Gating::SoftmaxOfTopK,
        Some(other) => {
            return Err(ModelError::BadHyperparameter {
                key: key("expert_gating_func"),
                reason: format!(
                    "gating function {other} (1: softmax, 2: sigmoid, 3: softmax of the top k)"
                ),
            })
        }
    };
    let n_dense_lead = gguf
        .get_u64(&key("leading_dense_block_count"))
        .map_or(0, |v| usize::try_from(v).unwrap_or(usize::MAX));
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
        gating,
        n_dense_lead,
    })
}

/// More experts than any released model has (DeepSeek: 256, Kimi: 384); a larger count is a
/// corrupt file.
const MAX_EXPERTS: usize = 4096;

/// A file of a dense architecture that says it has experts (a Mixtral-style `llama`, a MoE
/// `mistral3`): refused by name, not loaded as a dense model it is not.
pub(super) fn refuse_experts(gguf: &GgufFile, prefix: &str) -> Result<(), ModelError> {
    let key = format!("{prefix}.expert_count");
    match gguf.get_u64(&key) {
        Some(n) if n > 0 => Err(ModelError::BadHyperparameter {
            key,
            reason: format!("{n} experts: Kolibri runs `{prefix}` files as dense models only"),
        }),
        _ => Ok(()),
    }
}
