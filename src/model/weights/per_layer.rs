//! Gemma 4's per-layer inputs (E2B/E4B): for every token a vector of `n_embd_per_layer` values
//! per layer, from a table row of the token and a projection of its embedding, which gates a
//! small block after each layer's FFN. The table (`per_layer_token_embd`, the largest tensor
//! of these files) is only ever read a row per token from the mapped file.

use super::tensors::Loader;
use super::Linear;
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

/// The model-wide part. Shapes: [out, in] for matrices.
pub struct PerLayerEmbeddings {
    /// [n_vocab, n_layer * n_embd_per_layer], looked up row by row.
    pub token_embd: Linear,
    /// [n_layer * n_embd_per_layer, n_embd]
    pub model_proj: Linear,
    /// [n_embd_per_layer]: the norm of each layer's slice of the projection.
    pub proj_norm: Vec<f32>,
}

/// One layer's block: `x += post_norm(proj(gelu(inp_gate x) * input))`.
pub struct PerLayerInput {
    /// [n_embd_per_layer, n_embd]
    pub inp_gate: Linear,
    /// [n_embd, n_embd_per_layer]
    pub proj: Linear,
    /// [n_embd]
    pub post_norm: Vec<f32>,
}

impl PerLayerEmbeddings {
    /// The model's table and projection, if it has per-layer inputs.
    pub(super) fn load(l: &Loader, hp: &HParams) -> Result<Option<Self>, ModelError> {
        let p = hp.n_embd_per_layer;
        if p == 0 {
            return Ok(None);
        }
        let width = p
            .checked_mul(hp.n_layer)
            .ok_or_else(|| ModelError::BadHyperparameter {
                key: "embedding_length_per_layer_input".into(),
                reason: format!("{p} x {} layers overflows", hp.n_layer),
            })?;
        let token_embd = l.linear("per_layer_token_embd.weight", width, hp.n_vocab)?;
        if !crate::quant::dequant::is_supported(token_embd.ty) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: token_embd.name,
                ty: token_embd.ty,
            });
        }
        Ok(Some(PerLayerEmbeddings {
            token_embd,
            model_proj: l.linear("per_layer_model_proj.weight", hp.n_embd, width)?,
            proj_norm: l.vector("per_layer_proj_norm.weight", p)?,
        }))
    }
}

impl PerLayerInput {
    pub(super) fn load(l: &Loader, hp: &HParams, il: usize) -> Result<Option<Self>, ModelError> {
        let (p, e) = (hp.n_embd_per_layer, hp.n_embd);
        if p == 0 {
            return Ok(None);
        }
        let n = |s: &str| format!("blk.{il}.{s}");
        Ok(Some(PerLayerInput {
            inp_gate: l.linear(&n("inp_gate.weight"), e, p)?,
            proj: l.linear(&n("proj.weight"), p, e)?,
            post_norm: l.vector(&n("post_norm.weight"), e)?,
        }))
    }
}
