//! One transformer block's tensors, found by the names llama.cpp's converters write and
//! required as the architecture's recipe says.

use super::tensors::Loader;
use super::Linear;
use crate::model::arch::{Arch, FfnRecipe, Presence, QkNorm};
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
            |required: bool, name: &str, len: usize| l.vector_if(required, &n(name), len);
        let (qkv, biases) = QkvWeights::load(l, r.qkv_bias, hp, il)?;
        let (qk_norm, q_norm_len, k_norm_len) = match r.qk_norm {
            QkNorm::None => (false, hp.head_dim_k, hp.head_dim_k),
            QkNorm::PerHead => (true, hp.head_dim_k, hp.head_dim_k),
            QkNorm::Whole => (true, hp.q_dim(), hp.k_dim()),
        };
        Ok(LayerWeights {
            attn_norm: l.vector(&n("attn_norm.weight"), e)?,
            wq: qkv.q,
            wk: qkv.k,
            wv: qkv.v,
            wo: l.linear(&n("attn_output.weight"), hp.n_head * hp.head_dim_v, e)?,
            bq: biases.q,
            bk: biases.k,
            bv: biases.v,
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
            None if arch.recipe.ffn == FfnRecipe::DenseGateUpFused => {
                let name = n("ffn_up.weight");
                let parts = [("gate", hp.n_ff), ("up", hp.n_ff)];
                let [gate, up] = fused_parts(l.fused_opt(&name, e, &parts)?, &name)?;
                Ok(Ffn::Dense {
                    gate,
                    up,
                    down: l.linear(&n("ffn_down.weight"), hp.n_ff, e)?,
                })
            }
            None => Ok(Ffn::Dense {
                gate: l.linear(&n("ffn_gate.weight"), e, hp.n_ff)?,
                up: l.linear(&n("ffn_up.weight"), e, hp.n_ff)?,
                down: l.linear(&n("ffn_down.weight"), hp.n_ff, e)?,
            }),
        }
    }
}

/// Q, K and V (`[q|k|v]`): three tensors, or one fused `attn_qkv` cut into its row blocks, as
/// llama.cpp accepts for every architecture.
struct QkvWeights<T> {
    q: T,
    k: T,
    v: T,
}

type QkvBiases = QkvWeights<Option<Vec<f32>>>;

impl QkvWeights<Linear> {
    /// The projections and their biases: a fused `attn_qkv.bias`, else separate ones.
    /// `bias` says whether the biases are required.
    fn load(
        l: &Loader,
        bias: Presence,
        hp: &HParams,
        il: usize,
    ) -> Result<(Self, QkvBiases), ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let (e, dims) = (hp.n_embd, [hp.q_dim(), hp.k_dim(), hp.v_dim()]);
        let parts = [("q", dims[0]), ("k", dims[1]), ("v", dims[2])];
        let fused = l.fused_opt(&n("attn_qkv.weight"), e, &parts)?;
        let fused_bias = match &fused {
            Some(_) => l.vector_opt(&n("attn_qkv.bias"), dims.iter().sum())?,
            None => None,
        };
        let weights = match fused {
            Some(blocks) => {
                let [q, k, v] = fused_parts(Some(blocks), &n("attn_qkv.weight"))?;
                QkvWeights { q, k, v }
            }
            None => {
                // A file with neither form: the error names both.
                let one = |part: &str, rows| {
                    l.linear(&n(&format!("attn_{part}.weight")), e, rows)
                        .map_err(|err| match err {
                            ModelError::MissingTensor(t) => ModelError::MissingTensor(format!(
                                "{t} (or a fused {})",
                                n("attn_qkv.weight")
                            )),
                            other => other,
                        })
                };
                QkvWeights {
                    q: one("q", dims[0])?,
                    k: one("k", dims[1])?,
                    v: one("v", dims[2])?,
                }
            }
        };
        let biases = match fused_bias {
            Some(b) => {
                let (q, rest) = b.split_at(dims[0]);
                let (k, v) = rest.split_at(dims[1]);
                QkvWeights {
                    q: Some(q.to_vec()),
                    k: Some(k.to_vec()),
                    v: Some(v.to_vec()),
                }
            }
            None => {
                let required = bias == Presence::Required;
                let one =
                    |part: &str, len| l.vector_if(required, &n(&format!("attn_{part}.bias")), len);
                QkvWeights {
                    q: one("q", dims[0])?,
                    k: one("k", dims[1])?,
                    v: one("v", dims[2])?,
                }
            }
        };
        Ok((weights, biases))
    }
}

/// The row blocks of a fused tensor, which must exist.
fn fused_parts<const N: usize>(
    blocks: Option<Vec<Linear>>,
    name: &str,
) -> Result<[Linear; N], ModelError> {
    let blocks = blocks.ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    blocks
        .try_into()
        .map_err(|_| ModelError::MissingTensor(name.into()))
}
