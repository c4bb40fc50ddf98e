//! Which token mixer each layer has: attention, or the architecture's recurrent mixer
//! ([`RecurrentMixer`]), and the recurrent mixer's shape. Hybrid files say it per layer: for
//! LFM2 a layer attends exactly when its `attention.head_count_kv` entry is non-zero; for
//! Qwen3.5 `attention.recurrent_layers` marks the recurrent ones, or else every
//! `full_attention_interval`-th layer attends (as llama.cpp reads them).

use super::super::arch::{Arch, RecurrentMixer};
use super::super::error::ModelError;
use crate::gguf::GgufFile;

/// Longest short-convolution kernel accepted (LFM2's is 3).
const MAX_CONV_KERNEL: usize = 64;

/// Largest head size and head count a delta-net layer may have (Qwen3.5: 128 and 32-64).
const MAX_DELTA_HEAD: usize = 1024;

/// A layer's token mixer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixerKind {
    Attention,
    /// [`RecurrentMixer::ShortConv`].
    ShortConv,
    /// [`RecurrentMixer::GatedDeltaNet`].
    DeltaNet,
}

/// The shape of a Gated DeltaNet layer (`ssm.*` keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaNetShape {
    /// Taps of the convolution over queries, keys and values (`ssm.conv_kernel`).
    pub conv_kernel: usize,
    /// Key (and query) heads (`ssm.group_count`); value head `h` reads key head
    /// `h % n_k_heads`.
    pub n_k_heads: usize,
    /// Value heads, each with its own state (`ssm.time_step_rank`).
    pub n_v_heads: usize,
    /// Size of a key head (`ssm.state_size`).
    pub head_k: usize,
    /// Size of a value head (`ssm.inner_size / n_v_heads`).
    pub head_v: usize,
}

impl DeltaNetShape {
    pub fn key_dim(&self) -> usize {
        self.n_k_heads * self.head_k
    }

    pub fn value_dim(&self) -> usize {
        self.n_v_heads * self.head_v
    }

    /// Channels of the convolution: queries, keys, values.
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }
}

pub(super) struct Mixers {
    pub kinds: Vec<MixerKind>,
    /// The attention layers' KV head count (the per-layer entries that are not 0); `None`
    /// when the key is absent.
    pub n_head_kv: Option<u64>,
    /// Taps of the short convolution; 0 without short-convolution layers.
    pub conv_kernel: usize,
    pub delta_net: Option<DeltaNetShape>,
}

/// The mixers of an architecture with a recurrent mixer (see [`super::HParams::mixers`]).
pub(super) fn read(
    gguf: &GgufFile,
    arch: Arch,
    layers: super::LayerCount,
) -> Result<Mixers, ModelError> {
    match arch.recipe.recurrent {
        Some(RecurrentMixer::ShortConv) => short_conv(gguf, arch, layers),
        Some(RecurrentMixer::GatedDeltaNet) => delta_net(gguf, arch, layers),
        None => unreachable!("called for recurrent architectures only"),
    }
}

fn short_conv(
    gguf: &GgufFile,
    arch: Arch,
    layers: super::LayerCount,
) -> Result<Mixers, ModelError> {
    let n_layer = layers.trunk;
    let key = |k: &str| format!("{}.{k}", arch.name);
    let kv_key = key("attention.head_count_kv");
    let bad = |reason: String| ModelError::BadHyperparameter {
        key: kv_key.clone(),
        reason,
    };
    let per_layer: Vec<u64> = match gguf.get(&kv_key) {
        None => return Err(ModelError::MissingKey(kv_key)),
        Some(v) => match (v.as_u64(), v.as_array()) {
            (Some(n), _) => vec![n; n_layer],
            (None, Some(items)) if layers.trunk_entries(items.len()).is_some() => (0..n_layer)
                .map(|i| items.get(i).and_then(|v| v.as_u64()))
                .collect::<Option<_>>()
                .ok_or_else(|| bad(format!("{} has a non-integer entry", v.summary())))?,
            _ => {
                return Err(bad(format!(
                    "{} is not an integer or one per layer ({n_layer})",
                    v.summary()
                )))
            }
        },
    };
    let mut heads = per_layer.iter().copied().filter(|&h| h != 0);
    let n_head_kv = heads.next();
    if let Some(h) = n_head_kv {
        if heads.any(|other| other != h) {
            return Err(bad(format!(
                "attention layers with different KV head counts ({per_layer:?}) are not supported"
            )));
        }
    }
    let kinds: Vec<MixerKind> = (per_layer.iter())
        .map(|&h| match h {
            0 => MixerKind::ShortConv,
            _ => MixerKind::Attention,
        })
        .collect();
    let conv_kernel = if kinds.contains(&MixerKind::ShortConv) {
        let k = key("shortconv.l_cache");
        let v = gguf
            .get_u64(&k)
            .ok_or_else(|| ModelError::MissingKey(k.clone()))?;
        usize::try_from(v)
            .ok()
            .filter(|v| (2..=MAX_CONV_KERNEL).contains(v))
            .ok_or(ModelError::BadHyperparameter {
                key: k,
                reason: format!("kernel of {v} taps (2..={MAX_CONV_KERNEL} allowed)"),
            })?
    } else {
        0
    };
    Ok(Mixers {
        kinds,
        n_head_kv,
        conv_kernel,
        delta_net: None,
    })
}

fn delta_net(gguf: &GgufFile, arch: Arch, layers: super::LayerCount) -> Result<Mixers, ModelError> {
    let n_layer = layers.trunk;
    let key = |k: &str| format!("{}.{k}", arch.name);
    let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
        key: key(k),
        reason,
    };
    let recurrent_key = key("attention.recurrent_layers");
    let recurrent: Vec<bool> = match gguf.get(&recurrent_key) {
        Some(v) => match v.as_array() {
            Some(items) if layers.trunk_entries(items.len()).is_some() => (0..n_layer)
                .map(|i| items.get(i).and_then(|v| v.as_bool()))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("attention.recurrent_layers", "non-bool entries".into()))?,
            _ => {
                return Err(bad(
                    "attention.recurrent_layers",
                    format!("{} is not one bool per layer ({n_layer})", v.summary()),
                ))
            }
        },
        None => {
            let interval = match gguf.get_u64(&key("full_attention_interval")) {
                None => 4,
                Some(v) => usize::try_from(v)
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| bad("full_attention_interval", format!("{v}")))?,
            };
            (0..n_layer).map(|il| (il + 1) % interval != 0).collect()
        }
    };
    let size = |k: &str, max: usize| -> Result<usize, ModelError> {
        let v = gguf
            .get_u64(&key(k))
            .ok_or_else(|| ModelError::MissingKey(key(k)))?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0 && v <= max)
            .ok_or_else(|| bad(k, format!("{v} (1..={max} allowed)")))
    };
    let conv_kernel = size("ssm.conv_kernel", MAX_CONV_KERNEL)?;
    if conv_kernel < 2 {
        return Err(bad(
            "ssm.conv_kernel",
            format!("kernel of {conv_kernel} taps"),
        ));
    }
    let n_k_heads = size("ssm.group_count", MAX_DELTA_HEAD)?;
    let n_v_heads = size("ssm.time_step_rank", MAX_DELTA_HEAD)?;
    let head_k = size("ssm.state_size", MAX_DELTA_HEAD)?;
    let inner = size("ssm.inner_size", MAX_DELTA_HEAD * MAX_DELTA_HEAD)?;
    if n_v_heads % n_k_heads != 0 {
        return Err(bad(
            "ssm.time_step_rank",
            format!("{n_v_heads} value heads for {n_k_heads} key heads (a multiple is needed)"),
        ));
    }
    if inner % n_v_heads != 0 || inner / n_v_heads != head_k {
        return Err(bad(
            "ssm.inner_size",
            format!("{inner} over {n_v_heads} value heads is not the key head size {head_k}"),
        ));
    }
    let n_head_kv = super::per_model_value(gguf, &key("attention.head_count_kv"))?;
    Ok(Mixers {
        kinds: (recurrent.iter())
            .map(|&r| {
                if r {
                    MixerKind::DeltaNet
                } else {
                    MixerKind::Attention
                }
            })
            .collect(),
        n_head_kv,
        conv_kernel: 0,
        delta_net: Some(DeltaNetShape {
            conv_kernel,
            n_k_heads,
            n_v_heads,
            head_k,
            head_v: head_k,
        }),
    })
}
