//! RoPE scaling as llama.cpp reads it from `<arch>.rope.scaling.*`.

use super::super::error::ModelError;
use crate::gguf::GgufFile;

pub(super) struct RopeScaling {
    /// Multiplies positions (1 / the linear scaling factor).
    pub freq_scale: f32,
    /// Multiplies the rotated dimensions (`attn_factor`, 1 without it; with YaRN also its
    /// magnitude correction).
    pub attn_factor: f32,
    /// `original_context_length`, else the trained context.
    pub n_ctx_orig: usize,
    pub yarn: Option<Yarn>,
}

/// YaRN: per rotated pair a blend of the interpolated (scaled) and the original frequency,
/// the original where a pair turns more than `beta_fast` times over the original context, the
/// interpolated below `beta_slow` turns, linear in the pair index between.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// The context the blend is measured over (`original_context_length`).
    pub n_ctx_orig: usize,
}

impl Yarn {
    /// The ramp's ends in pair indices for `n_rot` rotated dimensions at `base` (ggml's
    /// `rope_yarn_corr_dims`).
    pub fn corr_dims(&self, n_rot: usize, base: f32) -> (f32, f32) {
        let dim = |turns: f32| {
            let n_ctx = self.n_ctx_orig as f32;
            n_rot as f32 * (n_ctx / (turns * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln())
        };
        let start = dim(self.beta_fast).floor().max(0.0);
        let end = dim(self.beta_slow).ceil().min(n_rot as f32 - 1.0);
        (start, end)
    }

    /// How much of pair `i`'s original frequency the blend keeps: 1 below the ramp, 0 above.
    pub fn extrapolation(&self, (low, high): (f32, f32), i: usize) -> f32 {
        let y = (i as f32 - low) / (high - low).max(0.001);
        1.0 - y.clamp(0.0, 1.0)
    }
}

/// The scaling type decides whether `rope.scaling.factor` applies: llama.cpp takes an absent
/// type as "linear", and "longrope" (whose per-dimension factors are tensors) scales linearly
/// too; "yarn" blends per pair ([`Yarn`]); others are refused by name. With `yarn_keys` the
/// file's `yarn_beta_fast`, `yarn_beta_slow` and `yarn_log_multiplier` apply (llama.cpp reads
/// them only for the architectures whose converters write them).
pub(super) fn read(
    gguf: &GgufFile,
    prefix: &str,
    n_ctx_train: usize,
    yarn_keys: bool,
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
    let ty = gguf.get_str(&key("type"));
    let freq_scale = match ty {
        Some("none") => 1.0,
        None | Some("linear") | Some("longrope") | Some("yarn") if factor > 0.0 => 1.0 / factor,
        None | Some("linear") | Some("longrope") | Some("yarn") => 1.0,
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
    let tuning = |k: &str, default: f32| -> Result<f32, ModelError> {
        let v = match yarn_keys {
            true => gguf.get_f32(&key(k)).unwrap_or(default),
            false => default,
        };
        match v.is_finite() && v >= 0.0 {
            true => Ok(v),
            false => Err(bad(k, format!("{v}"))),
        }
    };
    let (beta_fast, beta_slow) = (
        tuning("yarn_beta_fast", 32.0)?,
        tuning("yarn_beta_slow", 1.0)?,
    );
    let log_mul = tuning("yarn_log_multiplier", 0.0)?;
    let yarn = (ty == Some("yarn")).then_some(Yarn {
        beta_fast,
        beta_slow,
        n_ctx_orig,
    });
    // YaRN scales the rotated dimensions by its magnitude correction `1 + 0.1 ln(factor)`, or
    // with a log multiplier m by `(1 + 0.1 ln f) / (1 + 0.1 m ln f)` (1 for Mistral 3's m = 1).
    // llama.cpp sets its `yarn_attn_factor` to that over `1 + 0.1 ln f`, then ggml multiplies
    // it back: the same steps here, for the same rounding.
    let attn_factor = match yarn {
        Some(_) => {
            let f = 1.0 / freq_scale;
            let mscale = |m: f32| {
                if f <= 1.0 {
                    1.0
                } else {
                    0.1 * m * f.ln() + 1.0
                }
            };
            let correction = match log_mul {
                0.0 => mscale(1.0),
                m => mscale(1.0) / mscale(m),
            };
            let yarn_attn_factor = correction * (1.0 / (1.0 + 0.1 * f.ln())) * attn_factor;
            yarn_attn_factor * (1.0 + 0.1 * (1.0 / freq_scale).ln())
        }
        None => attn_factor,
    };
    Ok(RopeScaling {
        freq_scale,
        attn_factor,
        n_ctx_orig,
        yarn,
    })
}
