//! The forward pass: embed, then per layer a token mixer (attention, [`super::attention_layer`], or
//! a recurrent mixer, [`super::short_conv`]) and a channel mixer (the feed-forward block,
//! [`super::ffn`]), each behind its norm and added to the residual stream; then the final norm
//! and the output head.

use std::sync::Arc;

use super::{BatchToken, Context};
use crate::kernels::{self, ActNeeds, ActSource, QuantizedActivations};
use crate::model::attention::QueryPlace;
use crate::model::error::ModelError;
use crate::model::hparams::HParams;
use crate::model::ops;
use crate::model::scratch::Scratch;
use crate::model::weights::{LayerWeights, Linear, TokenMixer};
use crate::model::Model;
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

        // x: [n, n_embd] residual stream.
        let mut x = self.scratch.take(n * e);
        for (t, b) in batch.iter().enumerate() {
            w.token_embd
                .dequantize_row_into(gguf, b.token as usize, &mut x[t * e..(t + 1) * e]);
        }
        if model.arch.recipe.scale_embeddings {
            let s = (e as f32).sqrt();
            x.iter_mut().for_each(|v| *v *= s);
        }
        // [n, n_layer * n_embd_per_layer] (Gemma 4 E2B/E4B)
        let per_layer_inputs = match &w.per_layer {
            Some(p) => Some(self.per_layer_inputs(&model, p, batch, &x)?),
            None => None,
        };

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
            self.decoder_layer(
                &model,
                il,
                lw,
                &mut x,
                batch,
                places,
                per_layer_inputs.as_deref(),
            )?;
            if let Some(p) = paging {
                p.after_layer(il);
            }
        }

        if let Some(inputs) = per_layer_inputs {
            self.scratch.give([inputs]);
        }
        if let Some(kept) = &mut self.kept_hidden {
            let start = kept.len();
            kept.extend_from_slice(&x);
            ops::rms_norm_rows_inplace(&mut kept[start..], &w.output_norm, hp.rms_eps);
        }
        // Output head: only the rows whose logits are wanted.
        let out_rows: Vec<usize> = (0..n).filter(|&t| batch[t].logits).collect();
        if out_rows.is_empty() {
            self.scratch.give([x]);
            return Ok(Vec::new());
        }
        let m = out_rows.len();
        let mut h = Vec::with_capacity(m * e);
        for &t in &out_rows {
            h.extend_from_slice(&x[t * e..(t + 1) * e]);
        }
        self.scratch.give([x]);
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

impl Context {
    /// Layer `il` (weights `lw`) on the residual stream `x` ([n, n_embd]): its token mixer and
    /// its channel mixer, each behind its norm and added back. Per-token element-wise passes
    /// run in parallel row chunks for prompts (`parallel::for_each_row`); each norm feeds the
    /// quantizer chunk by chunk (`normed`): no normalized copy of `x` is written.
    #[allow(clippy::too_many_arguments)] // the pass's state, handed down as the loop has it
    pub(super) fn decoder_layer(
        &mut self,
        model: &Model,
        il: usize,
        lw: &LayerWeights,
        x: &mut Vec<f32>,
        batch: &[BatchToken],
        places: &[QueryPlace],
        per_layer_inputs: Option<&[f32]>,
    ) -> Result<(), ModelError> {
        self.mix_tokens(model, il, lw, x, batch, places)?;
        self.mix_channels(model, il, lw, x, per_layer_inputs)
    }

    /// A layer's token mixer, attention or recurrent, added into `x` (its cache rows or state
    /// written).
    pub(super) fn mix_tokens(
        &mut self,
        model: &Model,
        il: usize,
        lw: &LayerWeights,
        x: &mut [f32],
        batch: &[BatchToken],
        places: &[QueryPlace],
    ) -> Result<(), ModelError> {
        let hp = &model.hparams;
        let e = hp.n_embd;
        let mixed = {
            let inv = row_inv_rms(x, e, hp.rms_eps);
            let norm = normed(x, e, &inv, &lw.attn_norm);
            let src = ActSource::Computed(&norm);
            match &lw.mixer {
                TokenMixer::Attention(a) => self.attention(model, a, il, src, places)?,
                TokenMixer::ShortConv(c) => self.short_conv(model, c, il, src, batch, places)?,
                TokenMixer::DeltaNet(d) => self.delta_net(model, d, il, src, batch, places)?,
            }
        };
        self.add_residual(x, mixed, lw.post_attn_norm.as_deref(), hp);
        Ok(())
    }

    /// A layer's channel mixer (the feed-forward block) added into `x`, then what follows it
    /// (per-layer inputs, the output scale).
    pub(super) fn mix_channels(
        &mut self,
        model: &Model,
        il: usize,
        lw: &LayerWeights,
        x: &mut Vec<f32>,
        per_layer_inputs: Option<&[f32]>,
    ) -> Result<(), ModelError> {
        let hp = &model.hparams;
        let e = hp.n_embd;
        let out = {
            let inv = row_inv_rms(x, e, hp.rms_eps);
            let norm = normed(x, e, &inv, &lw.ffn_norm);
            let stream = super::ffn::Stream { x, inv: &inv };
            super::ffn::ffn(model, &lw.ffn, &norm, stream, &mut self.scratch)?
        };
        self.add_residual(x, out, lw.post_ffn_norm.as_deref(), hp);
        if let (Some(b), Some(inputs)) = (&lw.per_layer_input, per_layer_inputs) {
            self.per_layer_block(model, b, il, inputs, x)?;
        }
        if let Some(s) = lw.output_scale {
            x.iter_mut().for_each(|v| *v *= s);
        }
        Ok(())
    }

    /// `x += post_norm(out)` row by row (the norm only where the recipe has post-norms); `out`
    /// goes back to the scratch buffers.
    pub(super) fn add_residual(
        &mut self,
        x: &mut [f32],
        mut out: Vec<f32>,
        post: Option<&[f32]>,
        hp: &HParams,
    ) {
        let e = hp.n_embd;
        parallel::for_each_row(x, e, &mut out, e, |_, x_t, o_t| {
            if let Some(pn) = post {
                ops::rms_norm_rows_inplace(o_t, pn, hp.rms_eps);
            }
            ops::add_inplace(x_t, o_t);
        });
        self.scratch.give([out]);
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
