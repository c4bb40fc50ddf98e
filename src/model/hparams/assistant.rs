//! An assistant drafter's hyperparameters (Gemma 4's `gemma4-assistant`), read beside its
//! target's: its layers attend with queries only, over the KV cache of the target's last layer
//! of their kind (sliding or global; llama.cpp maps a sliding layer to the target's
//! second-to-last layer and a global one to its last, the same layers on Gemma 4's patterns),
//! so a layer's KV heads are that layer's and its head sizes must match them.

use super::{heads, rope, window, HParams, LayerCount, MixerKind, MAX_LAYERS};
use crate::gguf::GgufFile;
use crate::model::arch::Arch;
use crate::model::error::ModelError;

impl HParams {
    /// The assistant in `gguf` (architecture `arch`, `n_vocab` tokens) as layers reading the
    /// KV cache of `target`'s layers.
    pub fn for_assistant(
        gguf: &GgufFile,
        arch: Arch,
        target: &HParams,
        n_vocab: usize,
    ) -> Result<HParams, ModelError> {
        let prefix = arch.name;
        let key = |k: &str| format!("{prefix}.{k}");
        let bad = |k: &str, reason: String| ModelError::BadHyperparameter {
            key: key(k),
            reason,
        };
        let size = |k: &str| -> Result<usize, ModelError> {
            let v = gguf
                .get_u64(&key(k))
                .ok_or(ModelError::MissingKey(key(k)))?;
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0 && v < 1 << 31)
                .ok_or_else(|| bad(k, format!("{v} is out of range")))
        };
        let n_embd = size("embedding_length")?;
        let n_layer = size("block_count")?;
        if n_layer > MAX_LAYERS {
            return Err(bad("block_count", format!("{n_layer} layers")));
        }
        // What the assistant reads: the target's hidden state beside a token's embedding.
        let width_in = size("embedding_length_out")?;
        if width_in != target.n_embd {
            return Err(bad(
                "embedding_length_out",
                format!(
                    "{width_in}, but its target's hidden state has {}: an assistant for \
                     another model",
                    target.n_embd
                ),
            ));
        }
        let layers = LayerCount {
            trunk: n_layer,
            mtp: 0,
        };
        let window = window::read(gguf, arch, layers)?;
        if window.layers.iter().any(|&s| s) && window.size < 2 {
            // It sees the window's positions before its own: at least one.
            return Err(bad("attention.sliding_window", format!("{}", window.size)));
        }
        let mixers = vec![MixerKind::Attention; n_layer];
        let mut heads = heads::read(
            gguf,
            &heads::HeadsInput {
                prefix,
                n_embd,
                mixers: &mixers,
                sliding: &window.layers,
                recurrent_kv_heads: None,
                values_may_be_keys: true,
                mtp_layers: 0,
            },
        )?;
        let mut kv_reads = Vec::with_capacity(n_layer);
        for (il, &sliding) in window.layers.iter().enumerate() {
            let kind = if sliding { "sliding" } else { "global" };
            let source = (0..target.n_layer).rev().find(|&t| {
                target.mixers[t] == MixerKind::Attention && target.swa_layers[t] == sliding
            });
            let Some(source) = source else {
                return Err(bad(
                    "attention.sliding_window_pattern",
                    format!("layer {il} is {kind}; its target has no {kind} attention layer"),
                ));
            };
            let (mine, theirs) = (&mut heads[il], target.heads(source));
            if (mine.head_dim_k, mine.head_dim_v) != (theirs.head_dim_k, theirs.head_dim_v)
                || mine.n_head % theirs.n_head_kv != 0
            {
                return Err(bad(
                    "attention.key_length",
                    format!(
                        "layer {il} has {} heads of {}/{}; the target's layer {source}, whose \
                         cache it reads, {} KV heads of {}/{}",
                        mine.n_head,
                        mine.head_dim_k,
                        mine.head_dim_v,
                        theirs.n_head_kv,
                        theirs.head_dim_k,
                        theirs.head_dim_v
                    ),
                ));
            }
            mine.n_head_kv = theirs.n_head_kv;
            kv_reads.push(target.kv_layer(source));
        }
        let n_ff_layers = heads::per_layer(gguf, &key("feed_forward_length"), layers)?
            .ok_or_else(|| ModelError::MissingKey(key("feed_forward_length")))?;
        let ffn_widths = super::ffn_widths(Some(n_ff_layers), 0, n_layer)
            .ok()
            .filter(|w| w.iter().all(|&w| w > 0))
            .ok_or_else(|| bad("feed_forward_length", "a layer without width".into()))?;
        let global = (0..n_layer).find(|&il| !window.layers[il]).unwrap_or(0);
        let sliding = (0..n_layer).find(|&il| window.layers[il]).unwrap_or(global);
        let dims = |k: &str, head: usize| -> Result<usize, ModelError> {
            let dims = gguf.get_u64(&key(k)).map_or(Ok(head), usize::try_from);
            dims.ok()
                .filter(|&d| d <= head && d % 2 == 0)
                .ok_or_else(|| bad(k, format!("{dims:?} for head size {head}")))
        };
        let rope_base = gguf.get_f32(&key("rope.freq_base")).unwrap_or(10_000.0);
        let rms_eps = (gguf.get_f32(&key("attention.layer_norm_rms_epsilon"))).unwrap_or(1e-6);
        if !(rope_base.is_finite() && rope_base > 0.0 && rms_eps.is_finite() && rms_eps >= 0.0) {
            return Err(bad(
                "rope.freq_base",
                format!("base {rope_base}, eps {rms_eps}"),
            ));
        }
        let rope = rope::read(gguf, prefix, target.n_ctx_train, arch.recipe.yarn_tuning)?;
        let mut hp = HParams {
            n_vocab,
            // It runs at its target's positions.
            n_ctx_train: target.n_ctx_train,
            n_embd,
            n_layer,
            n_mtp_layers: 0,
            n_ff: ffn_widths.iter().copied().max().unwrap_or(0),
            ffn_widths,
            rms_eps,
            rope_base,
            rope_freq_scale: rope.freq_scale,
            rope_dims: dims("rope.dimension_count", heads[global].head_dim_k)?,
            rope_dims_swa: dims("rope.dimension_count_swa", heads[sliding].head_dim_k)?,
            rope_attn_factor: rope.attn_factor,
            n_ctx_orig: rope.n_ctx_orig,
            yarn: rope.yarn,
            sliding_window: window.size,
            swa_layers: window.layers,
            rope_base_swa: window.rope_base.unwrap_or(rope_base),
            rope_freq_scale_swa: window.rope_freq_scale.unwrap_or(rope.freq_scale),
            heads,
            attn_softcap: 0.0,
            final_logit_softcap: 0.0,
            attn_scale: 1.0,
            attn_temperature: None,
            moe: None,
            mixers,
            // No layer stores keys and values: each reads one of the target's cache layers.
            attention_layers: Vec::new(),
            kv_reads,
            n_embd_per_layer: 0,
            conv_kernel: 0,
            delta_net: None,
        };
        (arch.quirks)(&mut hp);
        Ok(hp)
    }
}
