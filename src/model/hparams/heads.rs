//! Each layer's attention heads, as llama.cpp reads them: `attention.head_count` and
//! `attention.head_count_kv` (a value, or one per layer), the head sizes `attention.key_length`
//! and `attention.value_length`, and for sliding-window layers `attention.key_length_swa` and
//! `attention.value_length_swa` (Gemma 4: heads of 256 on sliding layers, 512 on global ones;
//! its 31B also has fewer KV heads on its global layers).

use super::mixers::MixerKind;
use crate::gguf::GgufFile;
use crate::model::error::ModelError;

/// One attention layer's heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Per-head size of queries and keys, and of values.
    pub head_dim_k: usize,
    pub head_dim_v: usize,
}

impl HeadShape {
    /// Query heads sharing one key/value head.
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

    /// The output width of the attention, before its projection.
    pub fn out_dim(&self) -> usize {
        self.n_head * self.head_dim_v
    }

    /// Each size the largest of the two (buffers that serve every layer).
    pub fn widest(self, other: HeadShape) -> HeadShape {
        HeadShape {
            n_head: self.n_head.max(other.n_head),
            n_head_kv: self.n_head_kv.max(other.n_head_kv),
            head_dim_k: self.head_dim_k.max(other.head_dim_k),
            head_dim_v: self.head_dim_v.max(other.head_dim_v),
        }
    }
}

/// What the heads are read from besides their own keys.
pub(super) struct HeadsInput<'a> {
    pub prefix: &'a str,
    pub n_embd: usize,
    pub mixers: &'a [MixerKind],
    pub sliding: &'a [bool],
    /// A recurrent architecture's KV head count (read with its mixers); `None`: read here.
    pub recurrent_kv_heads: Option<Option<u64>>,
    /// Values may be the key projection: they must have the keys' size.
    pub values_may_be_keys: bool,
    /// Multi-token-prediction blocks after the trunk: per-layer arrays have entries for them.
    pub mtp_layers: usize,
}

/// Per layer its heads (a recurrent layer gets the attention layers' shape: it has none).
pub(super) fn read(gguf: &GgufFile, input: &HeadsInput) -> Result<Vec<HeadShape>, ModelError> {
    let n_layer = input.mixers.len();
    let layers = super::LayerCount {
        trunk: n_layer,
        mtp: input.mtp_layers,
    };
    let key = |k: &str| format!("{}.{k}", input.prefix);
    let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
        key: key(k),
        reason,
    };
    let n_head = per_layer(gguf, &key("attention.head_count"), layers)?
        .ok_or_else(|| ModelError::MissingKey(key("attention.head_count")))?;
    let n_head_kv = match input.recurrent_kv_heads {
        Some(one) => one.map(|h| vec![h; n_layer]),
        None => per_layer(gguf, &key("attention.head_count_kv"), layers)?,
    }
    .unwrap_or_else(|| n_head.clone());
    // The head count the default head size divides by: the first attention layer's.
    let first_heads = (0..n_layer)
        .find(|&il| input.mixers[il] == MixerKind::Attention)
        .map_or(n_head[0], |il| n_head[il]) as usize;
    let size = |k: &str, default: usize| -> Result<usize, ModelError> {
        match gguf.get_u64(&key(k)) {
            None => Ok(default),
            Some(v) => usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < (1 << 20))
                .ok_or_else(|| bad(k, format!("head size {v}"))),
        }
    };
    let head_dim_k = size("attention.key_length", input.n_embd / first_heads.max(1))?;
    let head_dim_v = size("attention.value_length", head_dim_k)?;
    let head_dim_k_swa = size("attention.key_length_swa", head_dim_k)?;
    let head_dim_v_swa = size("attention.value_length_swa", head_dim_v)?;
    let mut layers = Vec::with_capacity(n_layer);
    for il in 0..n_layer {
        let sliding = input.sliding[il];
        let (k_key, v_key) = match sliding {
            true => ("attention.key_length_swa", "attention.value_length_swa"),
            false => ("attention.key_length", "attention.value_length"),
        };
        let shape = HeadShape {
            n_head: n_head[il] as usize,
            n_head_kv: n_head_kv[il] as usize,
            head_dim_k: if sliding { head_dim_k_swa } else { head_dim_k },
            head_dim_v: if sliding { head_dim_v_swa } else { head_dim_v },
        };
        if input.mixers[il] != MixerKind::Attention {
            layers.push(HeadShape {
                n_head: first_heads,
                ..shape
            });
            continue;
        }
        if shape.n_head == 0 || shape.n_head >= 1 << 20 {
            return Err(bad(
                "attention.head_count",
                format!("{} heads on layer {il}", shape.n_head),
            ));
        }
        if shape.n_head_kv == 0 || !shape.n_head.is_multiple_of(shape.n_head_kv) {
            return Err(bad(
                "attention.head_count_kv",
                format!(
                    "{} on layer {il} does not divide its head count {}",
                    shape.n_head_kv, shape.n_head
                ),
            ));
        }
        if shape.head_dim_k == 0 || !shape.head_dim_k.is_multiple_of(2) {
            return Err(bad(
                k_key,
                format!("head size {} must be even", shape.head_dim_k),
            ));
        }
        // Values taken from the key projection have the keys' size.
        if input.values_may_be_keys && shape.head_dim_v != shape.head_dim_k {
            return Err(bad(
                v_key,
                format!(
                    "{} differs from the key length {}",
                    shape.head_dim_v, shape.head_dim_k
                ),
            ));
        }
        layers.push(shape);
    }
    Ok(layers)
}

/// A value per trunk layer: one for all, or an array of one per layer (GGUF writes per-layer
/// head counts and widths so). `None`: the key is absent.
pub(super) fn per_layer(
    gguf: &GgufFile,
    key: &str,
    layers: super::LayerCount,
) -> Result<Option<Vec<u64>>, ModelError> {
    Ok(match integers(gguf, key)? {
        None => None,
        Some(Integers::One(v)) => Some(vec![v; layers.trunk]),
        Some(Integers::PerLayer(mut values)) => match layers.trunk_entries(values.len()) {
            Some(n) => {
                values.truncate(n);
                Some(values)
            }
            None => {
                return Err(ModelError::BadHyperparameter {
                    key: key.to_string(),
                    reason: format!("{} entries for {} layers", values.len(), layers.trunk),
                })
            }
        },
    })
}

/// An integer key as a file writes it.
pub(super) enum Integers {
    One(u64),
    PerLayer(Vec<u64>),
}

/// The integer or integer array at `key` (`None`: absent); anything else is an error naming it.
pub(super) fn integers(gguf: &GgufFile, key: &str) -> Result<Option<Integers>, ModelError> {
    let Some(value) = gguf.get(key) else {
        return Ok(None);
    };
    let bad = |reason: String| ModelError::BadHyperparameter {
        key: key.to_string(),
        reason,
    };
    if let Some(v) = value.as_u64() {
        return Ok(Some(Integers::One(v)));
    }
    let Some(items) = value.as_array() else {
        return Err(bad(format!("{} is not an integer", value.summary())));
    };
    (0..items.len())
        .map(|i| {
            (items.get(i).and_then(|v| v.as_u64())).ok_or_else(|| {
                bad(format!(
                    "entry {i} of {} is not an integer",
                    value.summary()
                ))
            })
        })
        .collect::<Result<Vec<u64>, _>>()
        .map(|values| Some(Integers::PerLayer(values)))
}
