//! Key centering for quantized key caches: each layer's stored keys have a fixed vector
//! subtracted, the part of the key bias that RoPE hardly turns. Qwen2.5's biases put values
//! over 100 into a few slowly rotating dimensions of layer 0's keys; a Q8_0 block scaled to
//! them rounds every other value coarsely (Q8_0 keys alone cost the 0.5B 3.6% perplexity).
//!
//! Exact, not an approximation: a query's scores against every key of its sequence all move
//! by the same `q · c`, and softmax does not see a constant shift. So it needs the same `c`
//! for every key of a sequence (fixed per model: the bias and the RoPE frequencies over the
//! trained context), no score softcap (tanh is not shift-invariant) and no attention sink (a
//! fixed logit beside the shifted scores).

use super::balance::Balance;
use super::{Context, LayerRopes};
use crate::model::kv_cache::KvCache;
use crate::model::ops;
use crate::model::{KvType, Model};

/// Per attention layer (KV cache layer), the vector subtracted from computed keys (before the balance and the rotation),
/// or `None` where keys are stored as computed (f16 caches, no key bias, QK-norm, softcap).
pub(super) fn raw_centers(
    model: &Model,
    kv: &KvCache,
    ropes: &LayerRopes,
) -> Vec<Option<Vec<f32>>> {
    let hp = &model.hparams;
    let applies = kv.type_k() != KvType::F16 && hp.attn_softcap == 0.0;
    (hp.attention_layers.iter())
        .map(|&il| {
            let lw = model.weights.layer(il).attention()?;
            let bias = lw
                .bk
                .as_deref()
                .filter(|_| applies && lw.k_norm.is_none() && lw.sinks.is_none())?;
            Some(
                ropes
                    .of(hp, il)
                    .still_part(bias, hp.heads(il).head_dim_k, hp.n_ctx_train),
            )
        })
        .collect()
}

/// The centers in the cache's basis, as stored keys have them subtracted: balanced, then
/// Hadamard-rotated (in each cache layer's blocks).
pub(super) fn in_cache_basis(
    mut centers: Vec<Option<Vec<f32>>>,
    balances: &[Option<Balance>],
    kv: &KvCache,
) -> Vec<Option<Vec<f32>>> {
    for (kl, (c, b)) in centers.iter_mut().zip(balances).enumerate() {
        let Some(c) = c else { continue };
        if let Some(b) = b {
            b.scale_keys(c);
        }
        if let Some(n) = kv.rotation_k(kl) {
            ops::hadamard_inplace(c, n);
        }
    }
    centers
}

impl Context {
    /// A checksum of the key centers and balances, for saved state: a state is only loaded
    /// where its keys were stored alike.
    pub(super) fn key_basis_checksum(&self) -> u32 {
        let mut sum = crate::model::checksum::Checksum::new();
        let balances = self.key_balance.iter().flatten().map(Balance::key_scales);
        for c in self
            .key_center
            .iter()
            .flatten()
            .map(Vec::as_slice)
            .chain(balances)
        {
            c.iter().for_each(|x| sum.update(&x.to_le_bytes()));
        }
        sum.finish() as u32
    }
}

/// `k -= c` (stored keys from computed ones).
pub(super) fn center(k: &mut [f32], c: &[f32]) {
    k.iter_mut().zip(c).for_each(|(k, c)| *k -= c);
}

/// `k += c` (computed keys from stored ones).
pub(super) fn uncenter(k: &mut [f32], c: &[f32]) {
    k.iter_mut().zip(c).for_each(|(k, c)| *k += c);
}
