//! Query/key balance for quantized key caches. After the Hadamard rotation a block's rounding
//! error falls on its channels alike, so a score `q · k` is off by about `|q| |δk|`, and `|δk|`
//! grows with `|k|`. Where keys are large and queries small in some channels (Qwen2.5's
//! rotating key biases make a few of layer 0's channels 40x the rest), those channels set the
//! block's scale and cost precision that the other channels' queries need.
//!
//! So each key channel `j` is stored times `s_j` and the queries' channel `j` taken times
//! `1 / s_j`: the scores are unchanged (exactly: every `s_j` is a power of two), and with
//! `s_j^2 ≈ rms(q_j) / rms(k_j)` queries and keys carry alike energy per channel, which makes
//! `|q'| |k'|` smallest (SmoothQuant's balance, α = 1/2).
//!
//! The energies come from the weights, not from sample text, so the scales are the same on
//! every machine and a saved state loads wherever its model does. For an attention input of
//! unit variance per dimension, `E[(W x̂ + b)_j^2] = Σ_i W_ji^2 γ_i^2 + b_j^2` (`γ` the
//! attention norm's weights), less the bias that key centering removes; renormalized per head
//! under QK-norm; and shared evenly by the two dimensions of each RoPE pair that turns.

use std::sync::Mutex;

use super::LayerRopes;
use crate::gguf::GgufFile;
use crate::model::kv_cache::KvCache;
use crate::model::ops::Rope;
use crate::model::weights::Linear;
use crate::model::{KvType, Model};
use crate::parallel;

/// Scales stay within 2^±8, so a rescaled key stays far inside f16's range (the Q8_0 and
/// Q4_0 block scales are f16).
const MAX_EXPONENT: i32 = 8;

/// One layer's balance, per KV head channel (`[k_dim]`).
pub(super) struct Balance {
    /// Multiplies the keys before they are stored.
    key: Vec<f32>,
    /// `1 / key`: multiplies the channel in each query head of the KV head's group.
    query: Vec<f32>,
    head_dim: usize,
    /// Query heads per KV head.
    group: usize,
}

impl Balance {
    /// `k *= s` and `q /= s`, for one token's keys (`[k_dim]`) and queries (`[q_dim]`).
    pub(super) fn apply(&self, q: &mut [f32], k: &mut [f32]) {
        self.scale_keys(k);
        let per_kv_head = self.group * self.head_dim;
        for (q, s) in q
            .chunks_mut(per_kv_head)
            .zip(self.query.chunks(self.head_dim))
        {
            for head in q.chunks_exact_mut(self.head_dim) {
                head.iter_mut().zip(s).for_each(|(q, s)| *q *= s);
            }
        }
    }

    /// `k *= s`: stored keys from computed ones.
    pub(super) fn scale_keys(&self, k: &mut [f32]) {
        k.iter_mut().zip(&self.key).for_each(|(k, s)| *k *= s);
    }

    /// `k /= s`: computed keys from stored ones (exact: powers of two).
    pub(super) fn unscale_keys(&self, k: &mut [f32]) {
        k.iter_mut().zip(&self.query).for_each(|(k, s)| *k *= s);
    }

    /// The key scales, for the saved-state checksum.
    pub(super) fn key_scales(&self) -> &[f32] {
        &self.key
    }
}

/// Per layer, the balance of a quantized key cache (`None` for an f16 one: it stores keys as
/// computed), given the layers' key centers (`centering`). Layers in parallel on the current
/// pool: each reads its query and key weights once (0.15 s for the 1.5B on one thread), and a
/// paged model's leave memory again.
pub(super) fn key_balances(
    model: &Model,
    kv: &KvCache,
    ropes: &LayerRopes,
    centers: &[Option<Vec<f32>>],
) -> Vec<Option<Balance>> {
    let hp = &model.hparams;
    let n_kv = hp.attention_layers.len();
    let layers: Vec<Mutex<Option<Balance>>> = (0..n_kv).map(|_| Mutex::new(None)).collect();
    if kv.type_k() != KvType::F16 {
        parallel::for_each(n_kv, |kl| {
            let il = hp.attention_layers[kl];
            let rope = ropes.of(hp, il);
            let balance = layer_balance(model, il, centers[kl].as_deref(), rope);
            if let Some(p) = &model.paging {
                p.after_layer(il);
            }
            *layers[kl].lock().unwrap_or_else(|e| e.into_inner()) = Some(balance);
        });
    }
    (layers.into_iter())
        .map(|l| l.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

fn layer_balance(model: &Model, il: usize, key_center: Option<&[f32]>, rope: &Rope) -> Balance {
    let hp = &model.hparams;
    let layer = model.weights.layer(il);
    let lw = layer.attention().expect("an attention layer");
    let heads = hp.heads(il);
    let hd = heads.head_dim_k;
    let gamma2: Vec<f64> = layer
        .attn_norm
        .iter()
        .map(|&g| f64::from(g).powi(2))
        .collect();
    let energies = |w: &Linear, bias: Option<&[f32]>, center, norm: Option<&[f32]>| {
        let mut e = row_energies(&model.gguf, w, &gamma2, bias, center);
        if let Some(n) = norm {
            renormalize_heads(&mut e, n, hd);
        }
        spread_turning_pairs(&mut e, hd, &rope.turning_pairs(hp.n_ctx_train));
        e
    };
    let eq = energies(&lw.wq, lw.bq.as_deref(), None, lw.q_norm.as_deref());
    let wk = (lw.wk.as_ref()).expect("a layer that stores keys projects them");
    let ek = energies(wk, lw.bk.as_deref(), key_center, lw.k_norm.as_deref());
    let group = heads.gqa_group();
    let key: Vec<f32> = (0..heads.k_dim())
        .map(|j| {
            let (kvh, d) = (j / hd, j % hd);
            let q_mean = (0..group)
                .map(|h| eq[(kvh * group + h) * hd + d])
                .sum::<f64>()
                / group as f64;
            quarter_power_of_two(q_mean / ek[j])
        })
        .collect();
    Balance {
        query: key.iter().map(|s| 1.0 / s).collect(),
        key,
        head_dim: hd,
        group,
    }
}

/// Per output row `j` of `w`: `Σ_i w_ji^2 γ2_i + (b_j - c_j)^2`.
fn row_energies(
    gguf: &GgufFile,
    w: &Linear,
    gamma2: &[f64],
    bias: Option<&[f32]>,
    center: Option<&[f32]>,
) -> Vec<f64> {
    let mut row = vec![0f32; w.k];
    (0..w.rows)
        .map(|j| {
            w.dequantize_row_into(gguf, j, &mut row);
            let weights: f64 = (row.iter().zip(gamma2))
                .map(|(&x, g2)| f64::from(x).powi(2) * g2)
                .sum();
            let b = bias.map_or(0.0, |b| b[j]) - center.map_or(0.0, |c| c[j]);
            weights + f64::from(b).powi(2)
        })
        .collect()
}

/// QK-norm: each head is scaled to unit mean square, then times the norm's weights (one per
/// head dimension, or one per dimension of the whole projection).
fn renormalize_heads(e: &mut [f64], norm: &[f32], head_dim: usize) {
    for (h, head) in e.chunks_exact_mut(head_dim).enumerate() {
        let mean = head.iter().sum::<f64>() / head_dim as f64;
        for (d, x) in head.iter_mut().enumerate() {
            let g = norm[(h * head_dim + d) % norm.len()];
            *x = if mean > 0.0 { *x / mean } else { 1.0 } * f64::from(g).powi(2);
        }
    }
}

/// Over a context, a turning RoPE pair's energy is shared evenly by its two dimensions.
fn spread_turning_pairs(e: &mut [f64], head_dim: usize, pairs: &[(usize, usize)]) {
    for head in e.chunks_exact_mut(head_dim) {
        for &(a, b) in pairs {
            let mean = (head[a] + head[b]) / 2.0;
            (head[a], head[b]) = (mean, mean);
        }
    }
}

/// `2^n` nearest `r^(1/4)` in the log (`n` in ±[`MAX_EXPONENT`]); 1 for a ratio that is not a
/// positive number. Exact from the exponent bits (no libm), so alike on every machine.
fn quarter_power_of_two(r: f64) -> f32 {
    if r.is_nan() || r <= 0.0 {
        return 1.0;
    }
    let n = if r.is_infinite() {
        MAX_EXPONENT
    } else if r < f64::MIN_POSITIVE {
        -MAX_EXPONENT
    } else {
        // floor(log2 r) = e; log2(r) / 4 rounds to n when log2 r is in [4n - 2, 4n + 2).
        let e = ((r.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        (e + 2).div_euclid(4)
    };
    let n = n.clamp(-MAX_EXPONENT, MAX_EXPONENT);
    f32::from_bits(((127 + n) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_the_nearest_power_of_two_of_the_fourth_root() {
        for (r, want) in [
            (1.0, 1.0),
            (16.0, 2.0),
            (1.0 / 16.0, 0.5),
            (3.9, 1.0),  // log2 = 1.96: 1.96 / 4 rounds to 0
            (4.0, 2.0),  // log2 = 2: a tie, rounded up
            (60.0, 2.0), // log2 = 5.9
            (64.0, 4.0), // log2 = 6
            (0.25, 1.0), // log2 = -2: a tie, rounded up
            (0.24, 0.5),
            (1e300, 256.0),
            (1e-300, 1.0 / 256.0),
            (f64::INFINITY, 256.0),
            (5e-324, 1.0 / 256.0),
            (0.0, 1.0),
            (-4.0, 1.0),
            (f64::NAN, 1.0),
        ] {
            assert_eq!(quarter_power_of_two(r), want, "r = {r}");
        }
    }

    #[test]
    fn turning_pairs_share_their_energy_and_qk_norm_renormalizes_heads() {
        let mut e = vec![1.0, 3.0, 5.0, 7.0, 2.0, 2.0, 2.0, 2.0];
        spread_turning_pairs(&mut e, 4, &[(0, 2)]);
        assert_eq!(e, [3.0, 3.0, 3.0, 7.0, 2.0, 2.0, 2.0, 2.0]);
        renormalize_heads(&mut e, &[1.0, 2.0, 1.0, 1.0], 4);
        // Head 0's mean is 4: 3/4 times 1, 3/4 times 4, ...; head 1 is flat.
        assert_eq!(e, [0.75, 3.0, 0.75, 1.75, 1.0, 4.0, 1.0, 1.0]);
    }

    #[test]
    fn balanced_scores_are_unchanged_bit_for_bit() {
        // Two KV heads of 4, groups of 2 query heads.
        let key: Vec<f32> = [2.0f32, 0.5, 1.0, 4.0, 0.25, 1.0, 8.0, 2.0].to_vec();
        let b = Balance {
            query: key.iter().map(|s| 1.0 / s).collect(),
            key,
            head_dim: 4,
            group: 2,
        };
        let mut q: Vec<f32> = (0..16).map(|i| 0.3 * i as f32 - 2.0).collect();
        let mut k: Vec<f32> = (0..8).map(|i| 1.7 - 0.9 * i as f32).collect();
        let score = |q: &[f32], k: &[f32], h: usize| -> f32 {
            q[h * 4..h * 4 + 4]
                .iter()
                .zip(&k[(h / 2) * 4..(h / 2) * 4 + 4])
                .map(|(a, b)| a * b)
                .sum()
        };
        let before: Vec<f32> = (0..4).map(|h| score(&q, &k, h)).collect();
        let k0 = k.clone();
        b.apply(&mut q, &mut k);
        assert_ne!(k, k0, "the keys were scaled");
        let after: Vec<f32> = (0..4).map(|h| score(&q, &k, h)).collect();
        assert_eq!(before, after);
        b.unscale_keys(&mut k);
        assert_eq!(k, k0);
    }
}
