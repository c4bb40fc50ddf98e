//! A Gated DeltaNet layer's tensors (Qwen3.5), as llama.cpp names them.

use super::tensors::Loader;
use super::Linear;
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

/// Shapes: [out, in] for matrices. `key_dim = n_k_heads * head_k`, `value_dim = n_v_heads *
/// head_v`, `conv_dim = 2 * key_dim + value_dim`.
pub struct DeltaNetWeights {
    /// [conv_dim, n_embd]: queries, keys, values, before the convolution.
    pub qkv: Linear,
    /// [value_dim, n_embd]: the output gate `z`.
    pub z: Linear,
    /// [n_v_heads, n_embd]: each head's write strength, before its sigmoid.
    pub beta: Linear,
    /// [n_v_heads, n_embd]: each head's decay, before `softplus(. + dt_bias) * a`.
    pub alpha: Linear,
    /// [conv_dim][conv_kernel]: the causal convolution's taps, oldest position first.
    pub conv: Vec<f32>,
    /// [n_v_heads]
    pub dt_bias: Vec<f32>,
    /// [n_v_heads]: `-exp(A_log)`, the decay rates (negative).
    pub a: Vec<f32>,
    /// [head_v]: the gated RMS norm's weights, shared by the heads.
    pub norm: Vec<f32>,
    /// [n_embd, value_dim]
    pub out: Linear,
}

impl DeltaNetWeights {
    pub(super) fn load(l: &Loader, hp: &HParams, il: usize) -> Result<DeltaNetWeights, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let d = hp
            .delta_net
            .expect("delta-net layers have a delta-net shape");
        let e = hp.n_embd;
        Ok(DeltaNetWeights {
            qkv: l.linear(&n("attn_qkv.weight"), e, d.conv_dim())?,
            z: l.linear(&n("attn_gate.weight"), e, d.value_dim())?,
            beta: l.linear(&n("ssm_beta.weight"), e, d.n_v_heads)?,
            alpha: l.linear(&n("ssm_alpha.weight"), e, d.n_v_heads)?,
            conv: l.small_matrix(&n("ssm_conv1d.weight"), d.conv_kernel, d.conv_dim())?,
            dt_bias: l.vector(&n("ssm_dt.bias"), d.n_v_heads)?,
            a: l.vector(&n("ssm_a"), d.n_v_heads)?,
            norm: l.vector(&n("ssm_norm.weight"), d.head_v)?,
            out: l.linear(&n("ssm_out.weight"), d.value_dim(), e)?,
        })
    }
}
