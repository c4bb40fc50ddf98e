//! Context shift: when a sequence has filled its positions, forget a run of old tokens and move
//! the later ones down, so generation continues (llama.cpp's `--context-shift`). Values move as
//! stored; keys carry their position in their RoPE rotation, so each moved key is rotated back
//! by the distance it moved (widened and taken back to the basis it was computed in where it is
//! quantized, re-rotated, stored again).

use super::Context;
use crate::model::{ops, ModelError};

impl Context {
    /// Forgets positions `n_keep..n_keep + n_discard` of sequence `seq` and moves every later
    /// one down by `n_discard`. The tokens moved keep what they computed while the forgotten
    /// ones were there (as llama.cpp's shift does); the next token goes to the new end.
    pub fn shift_seq(
        &mut self,
        seq: usize,
        n_keep: usize,
        n_discard: usize,
    ) -> Result<(), ModelError> {
        let len = self.tokens.get(seq).map(Vec::len).ok_or_else(|| {
            ModelError::InvalidArgument(format!("sequence {seq} of {}", self.tokens.len()))
        })?;
        if n_keep.checked_add(n_discard).is_none_or(|end| end > len) {
            return Err(ModelError::InvalidArgument(format!(
                "context shift: keep {n_keep} and discard {n_discard} of {len} positions"
            )));
        }
        if n_discard == 0 {
            return Ok(());
        }
        let hp = &self.model.hparams;
        let row0 = self.kv.row(seq, 0);
        for (layer, center) in self.key_center.iter().enumerate() {
            let il = hp.attention_layers[layer];
            let hadamard = self.kv.rotation_k(layer);
            let heads = hp.heads(il);
            let mut k = vec![0f32; heads.k_dim()];
            let balance = self.key_balance[layer].as_ref();
            let rope = self.ropes.of(hp, il);
            let back = rope.shift(-(n_discard as f32));
            for pos in n_keep + n_discard..len {
                let (src, dst) = (row0 + pos, row0 + pos - n_discard);
                self.kv.copy_row(layer, src, dst);
                self.kv.load_keys(layer, dst, &mut k);
                if let Some(c) = center {
                    super::centering::uncenter(&mut k, c);
                }
                if let Some(n) = hadamard {
                    ops::hadamard_inplace(&mut k, n);
                }
                if let Some(b) = balance {
                    b.unscale_keys(&mut k);
                }
                back.apply(&mut [&mut k], heads.head_dim_k);
                if let Some(b) = balance {
                    b.scale_keys(&mut k);
                }
                if let Some(n) = hadamard {
                    ops::hadamard_inplace(&mut k, n);
                }
                if let Some(c) = center {
                    super::centering::center(&mut k, c);
                }
                self.kv.store_keys(layer, dst, &k);
            }
        }
        self.tokens[seq].drain(n_keep..n_keep + n_discard);
        self.recurrent.shift(seq, n_keep, n_discard);
        // Moved keys were re-stored from their quantized rows, so the ring's last group is too.
        let n = self.tokens[seq].len();
        self.kv
            .refill_recent(seq, crate::model::kv_cache::group_start(n)..n);
        Ok(())
    }

    /// Sequence `seq`'s keys of KV cache layer `layer` (the `layer`-th layer that stores keys) at
    /// position `pos`, widened to f32 (as rotated for
    /// attention): for tests of what the cache holds.
    #[doc(hidden)]
    pub fn key_row(&self, layer: usize, seq: usize, pos: usize) -> Vec<f32> {
        let hp = &self.model.hparams;
        let mut k = vec![0f32; hp.heads(hp.attention_layers[layer]).k_dim()];
        self.kv.load_keys(layer, self.kv.row(seq, pos), &mut k);
        k
    }
}
