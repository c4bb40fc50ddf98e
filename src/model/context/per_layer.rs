//! Gemma 4's per-layer inputs (E2B/E4B), as llama.cpp computes them: before the first layer,
//! per token and layer `input = (norm(proj(x) / sqrt(n_embd)) + table[token] * sqrt(p)) /
//! sqrt(2)` ([n, n_layer, p]); after each layer's FFN, `x += post_norm(proj(gelu(inp_gate x) *
//! input))`.

use super::forward::project;
use super::{BatchToken, Context};
use crate::kernels::ActSource;
use crate::model::error::ModelError;
use crate::model::ops;
use crate::model::weights::{PerLayerEmbeddings, PerLayerInput};
use crate::model::Model;

impl Context {
    /// Every layer's input for the batch ([n, n_layer * p]), from the scaled embeddings `x`
    /// ([n, n_embd]).
    pub(super) fn per_layer_inputs(
        &mut self,
        model: &Model,
        p: &PerLayerEmbeddings,
        batch: &[BatchToken],
        x: &[f32],
    ) -> Result<Vec<f32>, ModelError> {
        let (hp, gguf) = (&model.hparams, &model.gguf);
        let (n, e, w) = (batch.len(), hp.n_embd, hp.n_embd_per_layer);
        let width = w * hp.n_layer;
        // [n, n_layer * p]
        let [mut inputs] = project(
            gguf,
            ActSource::Rows(x),
            n,
            e,
            [&p.model_proj],
            &mut self.scratch,
        )?;
        let (proj_scale, table_scale) = (1.0 / (e as f32).sqrt(), (w as f32).sqrt());
        let input_scale = 1.0 / 2f32.sqrt();
        let mut row = vec![0f32; width];
        for (t, b) in batch.iter().enumerate() {
            let proj = &mut inputs[t * width..(t + 1) * width];
            proj.iter_mut().for_each(|v| *v *= proj_scale);
            ops::rms_norm_rows_inplace(proj, &p.proj_norm, hp.rms_eps);
            p.token_embd
                .dequantize_row_into(gguf, b.token as usize, &mut row);
            for (v, &r) in proj.iter_mut().zip(&row) {
                *v = (*v + r * table_scale) * input_scale;
            }
        }
        Ok(inputs)
    }

    /// Layer `il`'s per-layer block on the residual stream `x` ([n, n_embd]) with the batch's
    /// `inputs` ([n, n_layer * p]).
    pub(super) fn per_layer_block(
        &mut self,
        model: &Model,
        b: &PerLayerInput,
        il: usize,
        inputs: &[f32],
        x: &mut [f32],
    ) -> Result<(), ModelError> {
        let (hp, gguf) = (&model.hparams, &model.gguf);
        let (e, w) = (hp.n_embd, hp.n_embd_per_layer);
        let n = x.len() / e;
        // [n, p]: gelu(inp_gate x) times this layer's input (GeGLU's table, as ggml's gelu).
        let scratch = &mut self.scratch;
        let [mut gated] = project(gguf, ActSource::Rows(x), n, e, [&b.inp_gate], scratch)?;
        let width = w * hp.n_layer;
        for (t, g) in gated.chunks_exact_mut(w).enumerate() {
            ops::geglu_inplace(g, &inputs[t * width + il * w..][..w]);
        }
        // [n, n_embd]
        let scratch = &mut self.scratch;
        let [out] = project(gguf, ActSource::Rows(&gated), n, w, [&b.proj], scratch)?;
        self.scratch.give([gated]);
        self.add_residual(x, out, Some(&b.post_norm), hp);
        Ok(())
    }
}
