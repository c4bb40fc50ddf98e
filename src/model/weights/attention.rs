//! An attention layer's tensors: Q, K, V and output projections, their optional biases and the
//! optional QK-norm weights.

use super::layer::fused_parts;
use super::tensors::Loader;
use super::Linear;
use crate::model::arch::{Arch, Presence, QkNorm};
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

/// Shapes: [out, in] for matrices.
pub struct AttentionWeights {
    /// [n_head*head_dim_k, n_embd], or with an output gate [n_head*2*head_dim_k, n_embd]: per
    /// head its queries, then its gate values.
    pub wq: Linear,
    /// [n_head_kv*head_dim_k, n_embd]; `None` in a layer that reads another's KV cache.
    pub wk: Option<Linear>,
    /// [n_head_kv*head_dim_v, n_embd]; `None` where the values are the key projection
    /// ([`crate::model::arch::Recipe::values_may_be_keys`]) or not stored.
    pub wv: Option<Linear>,
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
    /// [n_head]: each head's attention-sink logit (recipes with sinks).
    pub sinks: Option<Vec<f32>>,
}

impl AttentionWeights {
    pub(super) fn load(
        l: &Loader,
        arch: Arch,
        hp: &HParams,
        il: usize,
    ) -> Result<AttentionWeights, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let r = &arch.recipe;
        let heads = hp.heads(il);
        // With an output gate, the query rows hold each head's queries then its gate values.
        let q_rows = if r.attn_output_gate { 2 } else { 1 } * heads.q_dim();
        let kv = match (hp.stores_kv(il), r.values_may_be_keys) {
            (false, _) => KvParts::Shared,
            (true, false) => KvParts::KeysAndValues,
            (true, true) => KvParts::KeysMaybeValues,
        };
        let (qkv, biases) = QkvWeights::load(l, r.qkv_bias, hp, q_rows, kv, il)?;
        let (qk_norm, q_norm_len, k_norm_len) = match r.qk_norm {
            QkNorm::None => (false, heads.head_dim_k, heads.head_dim_k),
            QkNorm::PerHead => (true, heads.head_dim_k, heads.head_dim_k),
            QkNorm::Whole => (true, heads.q_dim(), heads.k_dim()),
        };
        let k_norm = qk_norm && kv != KvParts::Shared;
        let vector_if =
            |required: bool, name: &str, len: usize| l.vector_if(required, &n(name), len);
        Ok(AttentionWeights {
            wq: qkv.q,
            wk: qkv.k,
            wv: qkv.v,
            wo: l.linear(&n("attn_output.weight"), heads.out_dim(), hp.n_embd)?,
            bq: biases.q,
            bk: biases.k,
            bv: biases.v,
            bo: l.vector_opt(&n("attn_output.bias"), hp.n_embd)?,
            q_norm: vector_if(qk_norm, "attn_q_norm.weight", q_norm_len)?,
            k_norm: vector_if(k_norm, "attn_k_norm.weight", k_norm_len)?,
            sinks: vector_if(r.attn_sinks, "attn_sinks.weight", heads.n_head)?,
        })
    }
}

/// Which of K and V a layer projects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KvParts {
    KeysAndValues,
    /// Keys, and values where the file has them.
    KeysMaybeValues,
    /// Neither: the layer reads another layer's cache.
    Shared,
}

/// Q, K and V (`[q|k|v]`): three tensors, or one fused `attn_qkv` cut into its row blocks, as
/// llama.cpp accepts for every architecture.
struct QkvWeights<T, KV = T> {
    q: T,
    k: KV,
    v: KV,
}

type QkvBiases = QkvWeights<Option<Vec<f32>>>;

impl QkvWeights<Linear, Option<Linear>> {
    /// The projections and their biases: a fused `attn_qkv.bias`, else separate ones.
    /// `bias` says whether the biases are required.
    fn load(
        l: &Loader,
        bias: Presence,
        hp: &HParams,
        q_rows: usize,
        kv: KvParts,
        il: usize,
    ) -> Result<(Self, QkvBiases), ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let heads = hp.heads(il);
        let (e, dims) = (hp.n_embd, [q_rows, heads.k_dim(), heads.v_dim()]);
        let parts = [("q", dims[0]), ("k", dims[1]), ("v", dims[2])];
        let fused = l.fused_opt(&n("attn_qkv.weight"), e, &parts)?;
        let fused_bias = match &fused {
            Some(_) => l.vector_opt(&n("attn_qkv.bias"), dims.iter().sum())?,
            None => None,
        };
        let weights = match fused {
            Some(blocks) => {
                let [q, k, v] = fused_parts(Some(blocks), &n("attn_qkv.weight"))?;
                let stored = kv != KvParts::Shared;
                QkvWeights {
                    q,
                    k: stored.then_some(k),
                    v: stored.then_some(v),
                }
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
                let v_name = n("attn_v.weight");
                QkvWeights {
                    q: one("q", dims[0])?,
                    k: match kv {
                        KvParts::Shared => None,
                        _ => Some(one("k", dims[1])?),
                    },
                    v: match kv {
                        KvParts::Shared => None,
                        KvParts::KeysMaybeValues => l.linear_opt(&v_name, e, dims[2])?,
                        KvParts::KeysAndValues => Some(one("v", dims[2])?),
                    },
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
