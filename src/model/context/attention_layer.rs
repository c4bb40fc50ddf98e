//! The attention token mixer: QKV → (QK-norm) → RoPE → store K, V in the cache → attention
//! over the sequence's cached positions → output projection. A layer that reads an earlier
//! layer's cache (KV sharing) projects only queries and stores nothing.

use super::forward::project;
use super::Context;
use crate::kernels::{ActSource, AttnScore};
use crate::model::attention::{attention, AttentionShape, QueryPlace};
use crate::model::error::ModelError;
use crate::model::ops::{self, Rope};
use crate::model::weights::AttentionWeights;
use crate::model::Model;
use crate::parallel;

impl Context {
    /// Layer `il`'s attention over its normed input `src` ([n, n_embd]): its output before the
    /// residual add, [n, n_embd].
    pub(super) fn attention(
        &mut self,
        model: &Model,
        a: &AttentionWeights,
        il: usize,
        src: ActSource,
        places: &[QueryPlace],
    ) -> Result<Vec<f32>, ModelError> {
        let hp = &model.hparams;
        let n = places.len();
        let heads = hp.heads(il);
        let kl = hp
            .kv_layer(il)
            .expect("an attention layer has a KV cache layer");
        // [n, q_dim], and where the layer stores them [n, k_dim], [n, v_dim]
        let (mut q, kv) = self.project_qkv(model, a, il, src, n)?;
        let (mut k, mut v) = kv.unwrap_or_default();
        for (rows, bias) in [(&mut q, &a.bq), (&mut k, &a.bk), (&mut v, &a.bv)] {
            if let Some(b) = bias.as_ref().filter(|_| !rows.is_empty()) {
                ops::add_bias(rows, b);
            }
        }
        if model.arch.recipe.value_norm {
            for head in v.chunks_exact_mut(heads.head_dim_v) {
                let s = ops::inv_rms(head, hp.rms_eps);
                head.iter_mut().for_each(|x| *x *= s);
            }
        }
        // [n, q_dim] each: the queries, and the output gate where the recipe has one.
        let gate = (model.arch.recipe.attn_output_gate)
            .then(|| split_query_gate(&mut q, n, heads.n_head, heads.head_dim_k));
        // Gemma scales the queries before attention (llama.cpp's graph does too, and the f16
        // rounding of small query values in its attention kernel depends on it).
        let q_scale = (model.arch.recipe.scale_queries_before_attention).then_some(hp.attn_scale);
        let rope = self.ropes.of(hp, il);
        self.position_queries_and_keys(model, a, (il, kl), rope, q_scale, places, &mut q, &mut k);
        let rotate_v = self.kv.rotation_v(kl);
        if let Some(n) = rotate_v {
            parallel::for_each_row(&mut v, heads.v_dim(), &mut [0f32; 0], 0, |_, v_t, _| {
                ops::hadamard_inplace(v_t, n)
            });
        }
        let (kd, vd) = (heads.k_dim(), heads.v_dim());
        if !k.is_empty() {
            for (t, place) in places.iter().enumerate() {
                let row = place.seq_row0 + place.pos;
                self.kv
                    .store(kl, row, &k[t * kd..(t + 1) * kd], &v[t * vd..(t + 1) * vd]);
            }
        }
        let shape = AttentionShape {
            n_head: heads.n_head,
            n_head_kv: heads.n_head_kv,
            head_dim_k: heads.head_dim_k,
            head_dim_v: heads.head_dim_v,
            score: AttnScore::scaled(if q_scale.is_some() {
                1.0
            } else {
                hp.attn_scale
            })
            .with_softcap(hp.attn_softcap),
            window: if hp.is_sliding(il) {
                hp.sliding_window
            } else {
                0
            },
            sinks: a.sinks.as_deref(),
        };
        self.scratch.give([k, v]);
        self.attend(model, a, kl, &shape, q, places, gate)
    }

    /// Attention of the positioned queries `q` ([n, q_dim]) over cache layer `kl`, gated where
    /// a `gate` is given, through the output projection: [n, n_embd]. `q` goes back to the
    /// scratch buffers.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend(
        &mut self,
        model: &Model,
        a: &AttentionWeights,
        kl: usize,
        shape: &AttentionShape,
        q: Vec<f32>,
        places: &[QueryPlace],
        gate: Option<Vec<f32>>,
    ) -> Result<Vec<f32>, ModelError> {
        let n = places.len();
        let attn_dim = shape.n_head * shape.head_dim_v;
        // [n, n_head * head_dim_v]
        let mut attn = self.scratch.take(n * attn_dim);
        attention(shape, &q, &self.kv, kl, places, &mut attn);
        if let Some(n) = self.kv.rotation_v(kl) {
            // The values were stored rotated: so is their weighted sum.
            parallel::for_each_row(&mut attn, attn_dim, &mut [0f32; 0], 0, |_, a_t, _| {
                ops::hadamard_inplace(a_t, n)
            });
        }
        if let Some(gate) = gate {
            ops::mul_sigmoid_inplace(&mut attn, &gate);
        }
        self.scratch.give([q]);
        let [mut o] = project(
            &model.gguf,
            ActSource::Rows(&attn),
            n,
            attn_dim,
            [&a.wo],
            &mut self.scratch,
        )?;
        if let Some(b) = &a.bo {
            ops::add_bias(&mut o, b);
        }
        self.scratch.give([attn]);
        Ok(o)
    }
}

impl Context {
    /// The queries ([n, q_dim]), and the keys and values ([n, k_dim], [n, v_dim]) where layer
    /// `il` stores its own (the values are the keys' projection where it has no `attn_v`).
    fn project_qkv(
        &mut self,
        model: &Model,
        a: &AttentionWeights,
        il: usize,
        src: ActSource,
        n: usize,
    ) -> Result<(Vec<f32>, Option<KeysValues>), ModelError> {
        let (gguf, e) = (&model.gguf, model.hparams.n_embd);
        let scratch = &mut self.scratch;
        let wk = a.wk.as_ref().filter(|_| model.hparams.stores_kv(il));
        Ok(match (wk, &a.wv) {
            (None, _) => {
                let [q] = project(gguf, src, n, e, [&a.wq], scratch)?;
                (q, None)
            }
            (Some(wk), Some(wv)) => {
                let [q, k, v] = project(gguf, src, n, e, [&a.wq, wk, wv], scratch)?;
                (q, Some((k, v)))
            }
            (Some(wk), None) => {
                let [q, k] = project(gguf, src, n, e, [&a.wq, wk], scratch)?;
                let v = k.clone();
                (q, Some((k, v)))
            }
        })
    }
}

/// A pass's keys and values, [n, k_dim] and [n, v_dim].
type KeysValues = (Vec<f32>, Vec<f32>);

/// Splits query rows that hold per head its queries then its gate values ([n, n_head * 2 *
/// head_dim]) into the queries, left in `q` ([n, n_head * head_dim]), and the gate, returned.
fn split_query_gate(q: &mut Vec<f32>, n: usize, n_head: usize, head_dim: usize) -> Vec<f32> {
    let q_dim = n_head * head_dim;
    let mut queries = vec![0f32; n * q_dim];
    let mut gate = vec![0f32; n * q_dim];
    for (t, row) in q.chunks_exact(2 * q_dim).enumerate() {
        for (h, pair) in row.chunks_exact(2 * head_dim).enumerate() {
            let at = t * q_dim + h * head_dim;
            queries[at..at + head_dim].copy_from_slice(&pair[..head_dim]);
            gate[at..at + head_dim].copy_from_slice(&pair[head_dim..]);
        }
    }
    *q = queries;
    gate
}

impl Context {
    /// QK-norm, RoPE (`rope`, layer `il`'s) at each token's position, the query temperature and
    /// scale, and the key basis of cache layer `kl` (balance, Hadamard rotation, centering), row by row.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn position_queries_and_keys(
        &self,
        model: &Model,
        a: &AttentionWeights,
        (il, kl): (usize, usize),
        rope: &Rope,
        q_scale: Option<f32>,
        places: &[QueryPlace],
        q: &mut [f32],
        k: &mut [f32],
    ) {
        let hp = &model.hparams;
        let rotate_k = self.kv.rotation_k(kl);
        let heads = hp.heads(il);
        let key_balance = self.key_balance[kl].as_ref();
        let key_center = self.key_center[kl].as_deref();
        // A layer reading another's cache has queries only: no key rows to walk.
        let k_dim = if k.is_empty() { 0 } else { heads.k_dim() };
        parallel::for_each_row(q, heads.q_dim(), k, k_dim, |t, q_t, k_t| {
            // Queries are normed with keys (or alone where the keys come from another layer).
            if let Some(qn) = a
                .q_norm
                .as_ref()
                .filter(|_| a.k_norm.is_some() || k_t.is_empty())
            {
                ops::rms_norm_rows_inplace(q_t, qn, hp.rms_eps);
            }
            if let Some(kn) = a.k_norm.as_ref().filter(|_| !k_t.is_empty()) {
                ops::rms_norm_rows_inplace(k_t, kn, hp.rms_eps);
            }
            rope.apply(&mut [&mut *q_t, &mut *k_t], heads.head_dim_k, places[t].pos);
            if let Some(temperature) = &hp.attn_temperature {
                let s = temperature.at(places[t].pos);
                q_t.iter_mut().for_each(|v| *v *= s);
            }
            if let Some(s) = q_scale {
                q_t.iter_mut().for_each(|v| *v *= s);
            }
            if let Some(b) = key_balance {
                b.apply(q_t, k_t);
            }
            if let Some(n) = rotate_k {
                ops::hadamard_inplace(q_t, n);
                ops::hadamard_inplace(k_t, n);
            }
            if let Some(c) = key_center {
                super::centering::center(k_t, c);
            }
        });
    }
}
