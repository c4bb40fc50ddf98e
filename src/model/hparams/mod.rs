//! Hyperparameters read from GGUF metadata (`<arch>.*` keys).

mod assistant;
mod heads;
mod kv_sharing;
mod mixers;
mod moe;
mod rope;
mod window;

pub use heads::HeadShape;
pub use mixers::{DeltaNetShape, MixerKind};
pub use moe::MoeParams;
pub use rope::Yarn;

use super::arch::Arch;
use super::error::ModelError;
use crate::gguf::GgufFile;

/// More layers than any model has: a bound before per-layer tables are allocated.
const MAX_LAYERS: usize = 1 << 14;

/// Layers as a file counts them: the trunk, then the multi-token-prediction blocks. A
/// per-layer array has an entry for each; the trunk reads its own.
#[derive(Clone, Copy, Debug)]
pub(super) struct LayerCount {
    pub trunk: usize,
    pub mtp: usize,
}

impl LayerCount {
    /// The trunk's entries of a per-layer array of `len` entries: `None` unless it has one
    /// per trunk layer, or one per layer of the file.
    pub fn trunk_entries(self, len: usize) -> Option<usize> {
        (len == self.trunk || len == self.trunk + self.mtp).then_some(self.trunk)
    }
}

#[derive(Clone, Debug)]
pub struct HParams {
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    /// The trunk's layers (the forward pass's).
    pub n_layer: usize,
    /// Multi-token-prediction blocks stored after the trunk (`nextn_predict_layers`, counted
    /// in `block_count`): drafters, not run by the forward pass.
    pub n_mtp_layers: usize,
    /// Per layer: its attention heads (see [`HParams::heads`]).
    pub heads: Vec<HeadShape>,
    /// The widest dense FFN (or the experts' width in a model without dense layers).
    pub n_ff: usize,
    /// Per layer: its dense FFN's width (Gemma 4 E2B's KV-sharing layers are twice as wide).
    pub ffn_widths: Vec<usize>,
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
        let n_file_layers = req("block_count")?;
        if n_file_layers > MAX_LAYERS {
            return Err(ModelError::BadHyperparameter {
                key: key("block_count"),
                reason: format!("{n_file_layers} layers (at most {MAX_LAYERS})"),
            });
        }
        // block_count counts the multi-token-prediction blocks stored after the trunk.
        let n_mtp_layers = opt("nextn_predict_layers")?.unwrap_or(0);
        if n_mtp_layers >= n_file_layers {
            return Err(ModelError::BadHyperparameter {
                key: key("nextn_predict_layers"),
                reason: format!("{n_mtp_layers} of {n_file_layers} layers"),
            });
        }
        let n_layer = n_file_layers - n_mtp_layers;
        let layers = LayerCount {
            trunk: n_layer,
            mtp: n_mtp_layers,
        };
        let (mixers, recurrent_kv_heads, conv_kernel, delta_net) = match arch.recipe.recurrent {
            None => (vec![MixerKind::Attention; n_layer], None, 0, None),
            Some(_) => {
                let m = mixers::read(gguf, arch, layers)?;
                (m.kinds, Some(m.n_head_kv), m.conv_kernel, m.delta_net)
            }
        };
        let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
            key: key(k),
            reason,
        };
        let window = window::read(gguf, arch, layers)?;
        let heads = heads::read(
            gguf,
            &heads::HeadsInput {
                prefix,
                n_embd,
                mixers: &mixers,
                mtp_layers: n_mtp_layers,
                sliding: &window.layers,
                recurrent_kv_heads,
                values_may_be_keys: arch.recipe.values_may_be_keys,
            },
        )?;
        // The global layers' head size (the first global attention layer's): RoPE's default
        // width and the default attention scale.
        let global = (0..n_layer)
            .find(|&il| mixers[il] == MixerKind::Attention && !window.layers[il])
            .map_or(heads[0], |il| heads[il]);
        let sliding =
            (0..n_layer).find(|&il| mixers[il] == MixerKind::Attention && window.layers[il]);
        let rope_dims = opt("rope.dimension_count")?.unwrap_or(global.head_dim_k);
        let rope_dims_swa = match arch.recipe.sliding_window {
            Some(_) => opt("rope.dimension_count_swa")?.unwrap_or(rope_dims),
            None => rope_dims,
        };
        let swa_head = sliding.map_or(global, |il| heads[il]);
        for (k, dims, head) in [
            ("rope.dimension_count", rope_dims, global.head_dim_k),
            (
                "rope.dimension_count_swa",
                rope_dims_swa,
                swa_head.head_dim_k,
            ),
        ] {
            if dims > head || dims % 2 != 0 {
                return Err(bad(k, format!("{dims} for head size {head}")));
            }
        }

        let n_ctx_train = opt("context_length")?.unwrap_or(2048);
        let rope = rope::read(gguf, prefix, n_ctx_train, arch.recipe.yarn_tuning)?;
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
        let n_ff_layers = heads::per_layer(gguf, &key("feed_forward_length"), layers)?;
        let n_ff =
            (n_ff_layers.iter().flatten().max()).map(|&w| usize::try_from(w).unwrap_or(usize::MAX));
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
        let ffn_widths = ffn_widths(n_ff_layers, n_ff, n_layer)
            .map_err(|reason| bad("feed_forward_length", reason))?;
        let mut hp = HParams {
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_mtp_layers,
            heads,
            n_ff,
            ffn_widths,
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
            attn_scale: 1.0 / (global.head_dim_k as f32).sqrt(),
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

    /// Describes the first multi-token-prediction block as layer `n_layer`, a full-attention
    /// layer with the trunk's last attention layer's heads and FFN width and a KV cache layer
    /// of its own (the forward pass still runs `n_layer` layers). Nothing without a block.
    pub fn add_mtp_block(&mut self) {
        let Some(&last) = self.attention_layers.last() else {
            return;
        };
        if self.n_mtp_layers == 0 || self.mtp_block_loaded() {
            return;
        }
        self.heads.push(self.heads[last]);
        self.ffn_widths.push(self.ffn_widths[last]);
        self.swa_layers.push(false);
        self.mixers.push(MixerKind::Attention);
        self.kv_reads.push(Some(self.attention_layers.len()));
        self.attention_layers.push(self.n_layer);
    }

    /// Whether [`HParams::add_mtp_block`] described the block.
    pub fn mtp_block_loaded(&self) -> bool {
        self.mixers.len() > self.n_layer
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

    /// Layer `il`'s attention heads.
    pub fn heads(&self, il: usize) -> HeadShape {
        self.heads[il]
    }

    /// Every size the largest of any attention layer's (buffers that serve every layer).
    pub fn widest_heads(&self) -> HeadShape {
        (self.kv_reads.iter().zip(&self.heads))
            .filter(|(read, _)| read.is_some())
            .map(|(_, h)| *h)
            .reduce(HeadShape::widest)
            .unwrap_or(self.heads[0])
    }

    /// Layer `il`'s dense FFN width.
    pub fn ffn_width(&self, il: usize) -> usize {
        self.ffn_widths[il]
    }
}

/// Per layer the dense FFN's width: the file's per-layer values where it has them (a 0 entry, a
/// layer of experts only, takes `widest`), else `widest`.
fn ffn_widths(file: Option<Vec<u64>>, widest: usize, n_layer: usize) -> Result<Vec<usize>, String> {
    let Some(widths) = file else {
        return Ok(vec![widest; n_layer]);
    };
    (widths.iter().enumerate())
        .map(|(il, &w)| match usize::try_from(w) {
            Ok(0) => Ok(widest),
            Ok(w) if w < 1 << 31 => Ok(w),
            _ => Err(format!("{w} on layer {il} is out of range")),
        })
        .collect()
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
/// allows per-layer values of any key; those Kolibri reads per layer are read in [`heads`]).
/// A per-layer array that varies is an error, not a default.
fn per_model_value(gguf: &GgufFile, key: &str) -> Result<Option<u64>, ModelError> {
    match heads::integers(gguf, key)? {
        None => Ok(None),
        Some(heads::Integers::One(v)) => Ok(Some(v)),
        Some(heads::Integers::PerLayer(values)) => match values.first() {
            Some(&first) if values.iter().all(|&v| v == first) => Ok(Some(first)),
            _ => Err(ModelError::BadHyperparameter {
                key: key.to_string(),
                reason: format!(
                    "per-layer values {values:?} differ between layers (not supported)"
                ),
            }),
        },
    }
}
