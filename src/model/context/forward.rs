//! The forward pass: embed, then per layer the attention block and the feed-forward block
//! ([`super::ffn`]), then the final norm and the output head.

use std::sync::Arc;

use super::{BatchToken, Context};
use crate::kernels::{self, ActNeeds, ActSource, AttnScore, QuantizedActivations};
use crate::model::attention::{attention, AttentionShape, QueryPlace};
use crate::model::error::ModelError;
use crate::model::ops;
use crate::model::scratch::Scratch;
use crate::model::weights::Linear;
use crate::parallel;

impl Context {
    /// One pass through the network; `places[t]` is where token `t` sits in the cache. Returns
    /// the logits of the tokens marked `logits`.
    pub(super) fn forward(
        &mut self,
        batch: &[BatchToken],
        places: &[QueryPlace],
    ) -> Result<Vec<f32>, ModelError> {
        let model = Arc::clone(&self.model);
        let (hp, w, gguf) = (&model.hparams, &model.weights, &model.gguf);
        let n = batch.len();
        let e = hp.n_embd;
        let scratch = &mut self.scratch;

        // x: [n, n_embd] residual stream.
        let mut x = scratch.take(n * e);
        for (t, b) in batch.iter().enumerate() {
            w.token_embd
                .dequantize_row_into(gguf, b.token as usize, &mut x[t * e..(t + 1) * e]);
        }
        if model.arch.recipe.scale_embeddings {
            let s = (e as f32).sqrt();
            x.iter_mut().for_each(|v| *v *= s);
        }

        let paging = model.paging.as_ref();
        for (il, lw) in w.layers.iter().enumerate() {
            if let Some(abort) = &mut self.abort {
                if abort() {
                    return Err(ModelError::Cancelled);
                }
            }
            if let Some(p) = paging {
                p.before_layer(il);
            }
            // --- attention block ---
            // Per-token element-wise passes run in parallel row chunks for prompts
            // (`parallel::for_each_row`). The norm feeds the quantizer chunk by chunk
            // (`normed`): no normalized copy of `x` is written.
            let [mut q, mut k, mut v] = {
                let inv = row_inv_rms(&mut x, e, hp.rms_eps);
                let norm = normed(&x, e, &inv, &lw.attn_norm);
                let qkv = [&lw.wq, &lw.wk, &lw.wv];
                project(gguf, ActSource::Computed(&norm), n, e, qkv, scratch)?
            };
            for (rows, bias) in [(&mut q, &lw.bq), (&mut k, &lw.bk), (&mut v, &lw.bv)] {
                if let Some(b) = bias {
                    ops::add_bias(rows, b);
                }
            }
            let (rotate_k, rotate_v) = (self.kv.rotation_k(), self.kv.rotation_v());
            let key_balance = self.key_balance[il].as_ref();
            let key_center = self.key_center[il].as_deref();
            let sliding = hp.is_sliding(il);
            let rope = self.ropes.of(hp, il);
            // Gemma scales the queries before attention (llama.cpp's graph does too, and the f16
            // rounding of small query values in its attention kernel depends on it).
            let q_scale = model
                .arch
                .recipe
                .scale_queries_before_attention
                .then_some(hp.attn_scale);
            parallel::for_each_row(&mut q, hp.q_dim(), &mut k, hp.k_dim(), |t, q_t, k_t| {
                if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
                    ops::rms_norm_rows_inplace(q_t, qn, hp.rms_eps);
                    ops::rms_norm_rows_inplace(k_t, kn, hp.rms_eps);
                }
                rope.apply(&mut [&mut *q_t, &mut *k_t], hp.head_dim_k, places[t].pos);
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
            if let Some(n) = rotate_v {
                parallel::for_each_row(&mut v, hp.v_dim(), &mut [0f32; 0], 0, |_, v_t, _| {
                    ops::hadamard_inplace(v_t, n)
                });
            }
            let scale = if q_scale.is_some() {
                1.0
            } else {
                hp.attn_scale
            };
            let (kd, vd) = (hp.k_dim(), hp.v_dim());
            for (t, place) in places.iter().enumerate() {
                let row = place.seq_row0 + place.pos;
                self.kv
                    .store(il, row, &k[t * kd..(t + 1) * kd], &v[t * vd..(t + 1) * vd]);
            }
            let shape = AttentionShape {
                n_head: hp.n_head,
                n_head_kv: hp.n_head_kv,
                head_dim_k: hp.head_dim_k,
                head_dim_v: hp.head_dim_v,
                score: AttnScore {
                    scale,
                    softcap: hp.attn_softcap,
                },
                window: if sliding { hp.sliding_window } else { 0 },
            };
            let attn_dim = hp.n_head * hp.head_dim_v;
            let mut attn = scratch.take(n * attn_dim);
            attention(&shape, &q, &self.kv, il, places, &mut attn);
            if let Some(n) = rotate_v {
                // The values were stored rotated: so is their weighted sum.
                parallel::for_each_row(&mut attn, attn_dim, &mut [0f32; 0], 0, |_, a_t, _| {
                    ops::hadamard_inplace(a_t, n)
                });
            }
            scratch.give([q, k, v]);
            let [mut o] = project(gguf, ActSource::Rows(&attn), n, attn_dim, [&lw.wo], scratch)?;
            if let Some(b) = &lw.bo {
                ops::add_bias(&mut o, b);
            }
            let post = lw.post_attn_norm.as_deref();
            parallel::for_each_row(&mut x, e, &mut o, e, |_, x_t, o_t| {
                if let Some(pn) = post {
                    ops::rms_norm_rows_inplace(o_t, pn, hp.rms_eps);
                }
                ops::add_inplace(x_t, o_t);
            });
            scratch.give([attn, o]);

            // --- feed-forward block ---
            let mut out = {
                let inv = row_inv_rms(&mut x, e, hp.rms_eps);
                let norm = normed(&x, e, &inv, &lw.ffn_norm);
                super::ffn::ffn(&model, &lw.ffn, &norm, n, scratch)?
            };
            let post = lw.post_ffn_norm.as_deref();
            parallel::for_each_row(&mut x, e, &mut out, e, |_, x_t, d_t| {
                if let Some(pn) = post {
                    ops::rms_norm_rows_inplace(d_t, pn, hp.rms_eps);
                }
                ops::add_inplace(x_t, d_t);
            });
            scratch.give([out]);
            if let Some(p) = paging {
                p.after_layer(il);
            }
        }

        // Output head: only the rows whose logits are wanted.
        let out_rows: Vec<usize> = (0..n).filter(|&t| batch[t].logits).collect();
        if out_rows.is_empty() {
            scratch.give([x]);
            return Ok(Vec::new());
        }
        let m = out_rows.len();
        let mut h = Vec::with_capacity(m * e);
        for &t in &out_rows {
            h.extend_from_slice(&x[t * e..(t + 1) * e]);
        }
        scratch.give([x]);
        ops::rms_norm_rows_inplace(&mut h, &w.output_norm, hp.rms_eps);
        if self.hidden_out {
            return Ok(h);
        }
        // The logits leave with the caller: a buffer of their own.
        let out_src = ActSource::Rows(&h);
        let [mut logits] = project(gguf, out_src, m, e, [&w.output], &mut Scratch::default())?;
        if let Some(p) = paging {
            p.after_output();
        }
        let cap = hp.final_logit_softcap;
        if cap > 0.0 {
            logits.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Ok(logits)
    }
}

/// The 1 / rms of each row of `x` (rows of `e`), in parallel row chunks for prompts. (`x` is
/// only read; `for_each_row` hands out rows of both its buffers mutably.)
pub(super) fn row_inv_rms(x: &mut [f32], e: usize, eps: f32) -> Vec<f32> {
    let mut inv = vec![0f32; x.len() / e];
    parallel::for_each_row(&mut inv, 1, x, e, |_, inv_t, x_t| {
        inv_t[0] = ops::inv_rms(x_t, eps)
    });
    inv
}

/// Rows of `x` (rows of `e`) RMS-normalized with weights `w`, given each row's [`row_inv_rms`],
/// as an [`ActSource::Computed`] fill ([`ops::rms_norm_part`]): computed chunk by chunk as the
/// quantizer asks, so no normalized copy of `x` is written and read back.
pub(super) fn normed<'a>(
    x: &'a [f32],
    e: usize,
    inv: &'a [f32],
    w: &'a [f32],
) -> impl Fn(usize, usize, &mut [f32]) + Sync + 'a {
    move |t, c0, out| {
        let part = c0..c0 + out.len();
        ops::rms_norm_part(&x[t * e..][part.clone()], &w[part], inv[t], out)
    }
}

/// Multiplies the same input rows ([n, k], from `src`) by several matrices, quantizing the
/// input once per activation format rather than once per matrix.
pub(super) fn project<const N: usize>(
    gguf: &crate::gguf::GgufFile,
    src: ActSource,
    n: usize,
    k: usize,
    mats: [&Linear; N],
    scratch: &mut Scratch,
) -> Result<[Vec<f32>; N], ModelError> {
    let mut quantized: Vec<QuantizedActivations> = Vec::new();
    let mut outs: [Vec<f32>; N] = std::array::from_fn(|_| Vec::new());
    for (lin, out) in mats.iter().zip(outs.iter_mut()) {
        let format = lin.plan.needs().format;
        let act = match quantized.iter().position(|a| a.format() == format) {
            Some(i) => &quantized[i],
            None => {
                // With the side data if any matrix reading this format needs it.
                let needs = ActNeeds {
                    format,
                    sides: mats.iter().any(|m| {
                        m.plan.needs()
                            == ActNeeds {
                                format,
                                sides: true,
                            }
                    }),
                };
                let act = QuantizedActivations::quantize_from(kernels::backend(), src, n, k, needs);
                quantized.push(act.map_err(compute_err)?);
                quantized.last().expect("just pushed")
            }
        };
        // Every element is written by the matmul.
        *out = scratch.take_for_overwrite(n * lin.rows);
        lin.matmul(gguf, act, out).map_err(compute_err)?;
    }
    Ok(outs)
}

pub(super) fn compute_err(e: kernels::KernelError) -> ModelError {
    ModelError::Compute(e.to_string())
}
