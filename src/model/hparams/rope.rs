//! RoPE scaling as llama.cpp reads it from `<arch>.rope.scaling.*`.

use super::super::error::ModelError;
use crate::gguf::GgufFile;

pub(super) struct RopeScaling {
    /// Multiplies positions (1 / the linear scaling factor).
    pub freq_scale: f32,
    /// Multiplies the rotated dimensions (`attn_factor`, 1 without it).
    pub attn_factor: f32,
    /// `original_context_length`, else the trained context.
    pub n_ctx_orig: usize,
}

/// The scaling type decides whether `rope.scaling.factor` applies: llama.cpp takes an absent
/// type as "linear", and "longrope" (whose per-dimension factors are tensors) scales linearly
/// too; "yarn" and others are refused by name.
pub(super) fn read(
    gguf: &GgufFile,
    prefix: &str,
    n_ctx_train: usize,
) -> Result<RopeScaling, ModelError> {
    let key = |k: &str| format!("{prefix}.rope.scaling.{k}");
    let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
        key: key(k),
        reason,
    };
    let factor = gguf
        .get_f32(&key("factor"))
        .or_else(|| gguf.get_f32(&format!("{prefix}.rope.scale_linear")))
        .unwrap_or(0.0);
    if !(factor.is_finite() && factor >= 0.0) {
        return Err(bad("factor", format!("{factor}")));
    }
    let freq_scale = match gguf.get_str(&key("type")) {
        Some("none") => 1.0,
        None | Some("linear") | Some("longrope") if factor > 0.0 => 1.0 / factor,
        None | Some("linear") | Some("longrope") => 1.0,
        Some(other) => {
            return Err(bad(
                "type",
                format!("RoPE scaling {other:?} is not supported"),
            ))
        }
    };
    let attn_factor = gguf.get_f32(&key("attn_factor")).unwrap_or(1.0);
    if !(attn_factor.is_finite() && attn_factor > 0.0) {
        return Err(bad("attn_factor", format!("{attn_factor}")));
    }
    let n_ctx_orig = gguf
        .get_u64(&key("original_context_length"))
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v > 0)
        .unwrap_or(n_ctx_train);
    Ok(RopeScaling {
        freq_scale,
        attn_factor,
        n_ctx_orig,
    })
}
