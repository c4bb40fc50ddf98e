//! Sliding-window attention as llama.cpp reads it: `<arch>.attention.sliding_window` (or the
//! architecture's default) and `<arch>.attention.sliding_window_pattern`, either one bool per
//! layer or a period.

use super::super::arch::{Arch, SwaRope};
use super::super::error::ModelError;
use crate::gguf::{GgufFile, Value};

/// RoPE base of [`SwaRope::Own`] sliding layers when `<arch>.rope.freq_base_swa` is absent.
const OWN_SWA_ROPE_BASE: f32 = 10_000.0;

pub(super) struct Window {
    /// 0: no layer slides.
    pub size: usize,
    /// Per layer: whether it slides.
    pub layers: Vec<bool>,
    /// The sliding layers' RoPE base and frequency scale; `None`: the global layers'.
    pub rope_base: Option<f32>,
    pub rope_freq_scale: Option<f32>,
}

pub(super) fn read(
    gguf: &GgufFile,
    arch: Arch,
    layer_count: super::LayerCount,
) -> Result<Window, ModelError> {
    let n_layer = layer_count.trunk;
    let key = |k: &str| format!("{}.{k}", arch.name);
    let none = Window {
        size: 0,
        layers: vec![false; n_layer],
        rope_base: None,
        rope_freq_scale: None,
    };
    let Some(recipe) = arch.recipe.sliding_window else {
        return Ok(none);
    };
    let size = match gguf.get_u64(&key("attention.sliding_window")) {
        Some(v) => usize::try_from(v).unwrap_or(usize::MAX),
        None => recipe.default_window,
    };
    if size == 0 {
        return Ok(none);
    }
    let pattern_key = key("attention.sliding_window_pattern");
    let layers = match gguf.get(&pattern_key) {
        Some(Value::Array(items)) => {
            if layer_count.trunk_entries(items.len()).is_none() {
                return Err(ModelError::BadHyperparameter {
                    key: pattern_key,
                    reason: format!("{} entries for {n_layer} layers", items.len()),
                });
            }
            (items.iter().take(n_layer))
                .map(|v| v.as_bool().unwrap_or(false))
                .collect()
        }
        other => {
            let period = match (other.and_then(|v| v.as_u64()), recipe.period) {
                (Some(n), _) => usize::try_from(n).unwrap_or(usize::MAX),
                (None, Some(p)) => p,
                (None, None) => return Err(ModelError::MissingKey(pattern_key)),
            };
            (0..n_layer).map(|il| slides(il, period)).collect()
        }
    };
    let base = gguf.get_f32(&key("rope.freq_base_swa"));
    if base.is_some_and(|b| !(b.is_finite() && b > 0.0)) {
        return Err(ModelError::BadHyperparameter {
            key: key("rope.freq_base_swa"),
            reason: format!("{base:?}"),
        });
    }
    let (rope_base, rope_freq_scale) = match recipe.rope {
        SwaRope::Own => (Some(base.unwrap_or(OWN_SWA_ROPE_BASE)), Some(1.0)),
        SwaRope::Global => (base, None),
    };
    Ok(Window {
        size,
        layers,
        rope_base,
        rope_freq_scale,
    })
}

/// llama.cpp's pattern: of every `period` layers all but the last slide; period 0: all do.
fn slides(il: usize, period: usize) -> bool {
    period == 0 || il % period < period - 1
}

#[cfg(test)]
mod tests {
    use super::slides;

    #[test]
    fn pattern_periods() {
        let layers = |p| (0..6).map(|il| slides(il, p)).collect::<Vec<_>>();
        assert_eq!(layers(0), [true; 6]);
        assert_eq!(layers(1), [false; 6]);
        assert_eq!(layers(2), [true, false, true, false, true, false]);
        assert_eq!(layers(6), [true, true, true, true, true, false]);
    }
}
