//! One transformer block's tensors, found by the names llama.cpp's converters write and
//! required as the architecture's recipe says.

use super::tensors::Loader;
use super::Linear;
use crate::model::arch::{Arch, Presence, QkNorm};
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

/// One transformer block. Shapes in comments: [out, in] for matrices.
pub struct LayerWeights {
    /// [n_embd]
    pub attn_norm: Vec<f32>,
    /// [n_head*head_dim_k, n_embd]
    pub wq: Linear,
    /// [n_head_kv*head_dim_k, n_embd]
    pub wk: Linear,
    /// [n_head_kv*head_dim_v, n_embd]
    pub wv: Linear,
    /// [n_embd, n_head*head_dim_v]
    pub wo: Linear,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub bo: Option<Vec<f32>>,
    /// [head_dim_k] per head, or [q_dim] and [k_dim] for the whole projections (recipes with
    /// QK-norm): RMS-normalised in pieces of their length.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// [n_embd] (recipes with post-norms)
    pub post_attn_norm: Option<Vec<f32>>,
    /// [n_embd]
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
    /// [n_embd] (recipes with post-norms)
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// The feed-forward block's matrices.
#[allow(clippy::large_enum_variant)] // one per layer: a box would only add an indirection
pub enum Ffn {
    /// gate, up: [n_ff, n_embd]; down: [n_embd, n_ff].
    Dense {
        gate: Linear,
        up: Linear,
        down: Linear,
    },
    Moe(Experts),
}

/// A mixture of experts: the router and each expert's own FFN.
pub struct Experts {
    /// [n_expert, n_embd]: one logit per expert.
    pub router: Linear,
    /// Per expert: [n_ff_exp, n_embd].
    pub gate: Vec<Linear>,
    /// Per expert: [n_ff_exp, n_embd].
    pub up: Vec<Linear>,
    /// Per expert: [n_embd, n_ff_exp].
    pub down: Vec<Linear>,
    pub shared: Option<SharedExpert>,
}

/// An expert every token uses, its output scaled by `sigmoid(gate_inp · x)`.
pub struct SharedExpert {
    /// [n_embd]
    pub gate_inp: Vec<f32>,
    /// [n_ff_shexp, n_embd]
    pub gate: Linear,
    /// [n_ff_shexp, n_embd]
    pub up: Linear,
    /// [n_embd, n_ff_shexp]
    pub down: Linear,
}

impl LayerWeights {
    pub(super) fn load(
        l: &Loader,
        arch: Arch,
        hp: &HParams,
        il: usize,
    ) -> Result<LayerWeights, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let e = hp.n_embd;
        let r = &arch.recipe;
        let vector_if =
            |required: bool, name: &str, len: usize| match l.vector_opt(&n(name), len)? {
                None if required => Err(ModelError::MissingTensor(n(name))),
                other => Ok(other),
            };
        let bias = r.qkv_bias == Presence::Required;
        let (qk_norm, q_norm_len, k_norm_len) = match r.qk_norm {
            QkNorm::None => (false, hp.head_dim_k, hp.head_dim_k),
            QkNorm::PerHead => (true, hp.head_dim_k, hp.head_dim_k),
            QkNorm::Whole => (true, hp.q_dim(), hp.k_dim()),
        };
        Ok(LayerWeights {
            attn_norm: l.vector(&n("attn_norm.weight"), e)?,
            wq: l.linear(&n("attn_q.weight"), e, hp.q_dim())?,
            wk: l.linear(&n("attn_k.weight"), e, hp.k_dim())?,
            wv: l.linear(&n("attn_v.weight"), e, hp.v_dim())?,
            wo: l.linear(&n("attn_output.weight"), hp.n_head * hp.head_dim_v, e)?,
            bq: vector_if(bias, "attn_q.bias", hp.q_dim())?,
            bk: vector_if(bias, "attn_k.bias", hp.k_dim())?,
            bv: vector_if(bias, "attn_v.bias", hp.v_dim())?,
            bo: l.vector_opt(&n("attn_output.bias"), e)?,
            q_norm: vector_if(qk_norm, "attn_q_norm.weight", q_norm_len)?,
            k_norm: vector_if(qk_norm, "attn_k_norm.weight", k_norm_len)?,
            post_attn_norm: vector_if(r.post_norms, "post_attention_norm.weight", e)?,
            ffn_norm: l.vector(&n("ffn_norm.weight"), e)?,
            ffn: Ffn::load(l, arch, hp, il)?,
            post_ffn_norm: vector_if(r.post_norms, "post_ffw_norm.weight", e)?,
        })
    }

    /// The layer's matrices, in load order.
    pub fn matrices(&self) -> Vec<&Linear> {
        let mut m = vec![&self.wq, &self.wk, &self.wv, &self.wo];
        match &self.ffn {
            Ffn::Dense { gate, up, down } => m.extend([gate, up, down]),
            Ffn::Moe(x) => {
                m.push(&x.router);
                m.extend(x.gate.iter().chain(&x.up).chain(&x.down));
                if let Some(s) = &x.shared {
                    m.extend([&s.gate, &s.up, &s.down]);
                }
            }
        }
        m
    }

    pub(super) fn matrices_mut(&mut self) -> Vec<&mut Linear> {
        let mut m = vec![&mut self.wq, &mut self.wk, &mut self.wv, &mut self.wo];
        match &mut self.ffn {
            Ffn::Dense { gate, up, down } => m.extend([gate, up, down]),
            Ffn::Moe(x) => {
                m.push(&mut x.router);
                m.extend(x.gate.iter_mut().chain(&mut x.up).chain(&mut x.down));
                if let Some(s) = &mut x.shared {
                    m.extend([&mut s.gate, &mut s.up, &mut s.down]);
                }
            }
        }
        m
    }
}

impl Ffn {
    fn load(l: &Loader, arch: Arch, hp: &HParams, il: usize) -> Result<Ffn, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let e = hp.n_embd;
        // The hyperparameters have expert counts exactly when the recipe's FFN is a mixture.
        match hp.moe {
            Some(m) => {
                let (f, x) = (m.n_ff_exp, m.n_expert);
                let key = format!("{}.expert_count", arch.name);
                let shared = (m.n_ff_shexp > 0).then(|| {
                    let f = m.n_ff_shexp;
                    Ok::<_, ModelError>(SharedExpert {
                        gate_inp: l.vector(&n("ffn_gate_inp_shexp.weight"), e)?,
                        gate: l.linear(&n("ffn_gate_shexp.weight"), e, f)?,
                        up: l.linear(&n("ffn_up_shexp.weight"), e, f)?,
                        down: l.linear(&n("ffn_down_shexp.weight"), f, e)?,
                    })
                });
                Ok(Ffn::Moe(Experts {
                    router: l.router(&n("ffn_gate_inp.weight"), e, x, &key)?,
                    gate: l.experts(&n("ffn_gate_exps.weight"), e, f, x, &key)?,
                    up: l.experts(&n("ffn_up_exps.weight"), e, f, x, &key)?,
                    down: l.experts(&n("ffn_down_exps.weight"), f, e, x, &key)?,
                    shared: shared.transpose()?,
                }))
            }
            None => Ok(Ffn::Dense {
                gate: l.linear(&n("ffn_gate.weight"), e, hp.n_ff)?,
                up: l.linear(&n("ffn_up.weight"), e, hp.n_ff)?,
                down: l.linear(&n("ffn_down.weight"), hp.n_ff, e)?,
            }),
        }
    }
}
