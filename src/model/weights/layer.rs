//! One layer's tensors, found by the names llama.cpp's converters write and
//! required as the architecture's recipe says.

use super::attention::AttentionWeights;
use super::delta_net::DeltaNetWeights;
use super::per_layer::PerLayerInput;
use super::short_conv::ShortConvWeights;
use super::tensors::Loader;
use super::Linear;
use crate::model::arch::{Arch, FfnRecipe};
use crate::model::error::ModelError;
use crate::model::hparams::{HParams, MixerKind};

/// One layer: a norm and a token mixer, then a norm and a channel mixer (the FFN). Shapes in
/// comments: [out, in] for matrices.
pub struct LayerWeights {
    /// [n_embd]: the norm before the token mixer.
    pub attn_norm: Vec<f32>,
    pub mixer: TokenMixer,
    /// [n_embd] (recipes with post-norms)
    pub post_attn_norm: Option<Vec<f32>>,
    /// [n_embd]
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
    /// [n_embd] (recipes with post-norms)
    pub post_ffn_norm: Option<Vec<f32>>,
    /// The per-layer input block after the FFN (Gemma 4 E2B/E4B).
    pub per_layer_input: Option<PerLayerInput>,
    /// Multiplies the layer's output, residual stream included (Gemma 4's
    /// `layer_output_scale`).
    pub output_scale: Option<f32>,
}

/// What mixes information between positions in a layer.
#[allow(clippy::large_enum_variant)] // one per layer: a box would only add an indirection
pub enum TokenMixer {
    Attention(AttentionWeights),
    ShortConv(ShortConvWeights),
    DeltaNet(DeltaNetWeights),
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
    /// [n_expert]: added to the gate scores to choose experts (recipes with a selection
    /// bias).
    pub selection_bias: Option<Vec<f32>>,
    /// The router's and the experts' biases (recipes with them).
    pub biases: Option<ExpertBiases>,
    /// [n_expert]: each expert's output multiplied by its own (`ffn_down_exps.scale`, where
    /// the file has one).
    pub down_scale: Option<Vec<f32>>,
    /// The dense FFN beside the experts, and the norms of both sides (recipes with it).
    pub beside: Option<DenseBeside>,
}

/// A dense FFN beside a mixture of experts (Gemma 4): `post_norm_1(ffn(ffn_norm(x))) +
/// post_norm_2(experts(pre_norm_2(x)))`, routed by `router(norm(x) / sqrt(n_embd) *
/// router_scale)`.
pub struct DenseBeside {
    /// gate, up: [n_ff, n_embd]; down: [n_embd, n_ff].
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    /// [n_embd] each: after the dense FFN; before and after the experts.
    pub post_norm_1: Vec<f32>,
    pub pre_norm_2: Vec<f32>,
    pub post_norm_2: Vec<f32>,
    /// [n_embd]
    pub router_scale: Vec<f32>,
}

impl DenseBeside {
    fn load(l: &Loader, hp: &HParams, il: usize) -> Result<Self, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let (e, f) = (hp.n_embd, hp.ffn_width(il));
        Ok(DenseBeside {
            gate: l.linear(&n("ffn_gate.weight"), e, f)?,
            up: l.linear(&n("ffn_up.weight"), e, f)?,
            down: l.linear(&n("ffn_down.weight"), f, e)?,
            post_norm_1: l.vector(&n("post_ffw_norm_1.weight"), e)?,
            pre_norm_2: l.vector(&n("pre_ffw_norm_2.weight"), e)?,
            post_norm_2: l.vector(&n("post_ffw_norm_2.weight"), e)?,
            router_scale: l.vector(&n("ffn_gate_inp.scale"), e)?,
        })
    }
}

/// Biases of a mixture's router and of each expert's projections, read whole as f32.
pub struct ExpertBiases {
    /// [n_expert]
    pub router: Vec<f32>,
    /// [n_expert, n_ff_exp], [n_expert, n_ff_exp], [n_expert, n_embd]
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

impl ExpertBiases {
    fn load(l: &Loader, il: usize, e: usize, f: usize, x: usize) -> Result<Self, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        Ok(ExpertBiases {
            router: l.vector(&n("ffn_gate_inp.bias"), x)?,
            gate: l.small_matrix(&n("ffn_gate_exps.bias"), f, x)?,
            up: l.small_matrix(&n("ffn_up_exps.bias"), f, x)?,
            down: l.small_matrix(&n("ffn_down_exps.bias"), e, x)?,
        })
    }

    /// Expert `x`'s biases of its gate, up and down projections.
    pub fn gate(&self, x: usize) -> &[f32] {
        let f = self.gate.len() / self.router.len();
        &self.gate[x * f..(x + 1) * f]
    }

    pub fn up(&self, x: usize) -> &[f32] {
        let f = self.up.len() / self.router.len();
        &self.up[x * f..(x + 1) * f]
    }

    pub fn down(&self, x: usize) -> &[f32] {
        let e = self.down.len() / self.router.len();
        &self.down[x * e..(x + 1) * e]
    }
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
        // Post-norms only where the recipe has them (Qwen3.5's `post_attention_norm` is its
        // FFN's pre-norm).
        let post_norm = |name: &str| match r.post_norms {
            true => l.vector(&n(name), e).map(Some),
            false => Ok(None),
        };
        let mixer = match hp.mixers[il] {
            MixerKind::Attention => TokenMixer::Attention(AttentionWeights::load(l, arch, hp, il)?),
            MixerKind::ShortConv => TokenMixer::ShortConv(ShortConvWeights::load(l, hp, il)?),
            MixerKind::DeltaNet => TokenMixer::DeltaNet(DeltaNetWeights::load(l, hp, il)?),
        };
        Ok(LayerWeights {
            attn_norm: l.vector(&n("attn_norm.weight"), e)?,
            mixer,
            post_attn_norm: post_norm("post_attention_norm.weight")?,
            ffn_norm: l.vector(&n(r.ffn_norm), e)?,
            ffn: Ffn::load(l, arch, hp, il)?,
            post_ffn_norm: post_norm("post_ffw_norm.weight")?,
            per_layer_input: PerLayerInput::load(l, hp, il)?,
            output_scale: match r.layer_output_scale {
                true => l
                    .vector_opt(&n("layer_output_scale.weight"), 1)?
                    .map(|s| s[0]),
                false => None,
            },
        })
    }

    /// The layer's matrices, in load order.
    pub fn matrices(&self) -> Vec<&Linear> {
        let mut m = match &self.mixer {
            TokenMixer::Attention(a) => [Some(&a.wq), a.wk.as_ref(), a.wv.as_ref(), Some(&a.wo)]
                .into_iter()
                .flatten()
                .collect(),
            TokenMixer::ShortConv(c) => vec![&c.in_proj, &c.out_proj],
            TokenMixer::DeltaNet(d) => vec![&d.qkv, &d.z, &d.beta, &d.alpha, &d.out],
        };
        match &self.ffn {
            Ffn::Dense { gate, up, down } => m.extend([gate, up, down]),
            Ffn::Moe(x) => {
                m.push(&x.router);
                m.extend(x.gate.iter().chain(&x.up).chain(&x.down));
                if let Some(s) = &x.shared {
                    m.extend([&s.gate, &s.up, &s.down]);
                }
                if let Some(d) = &x.beside {
                    m.extend([&d.gate, &d.up, &d.down]);
                }
            }
        }
        if let Some(p) = &self.per_layer_input {
            m.extend([&p.inp_gate, &p.proj]);
        }
        m
    }

    pub(super) fn matrices_mut(&mut self) -> Vec<&mut Linear> {
        let mut m = match &mut self.mixer {
            TokenMixer::Attention(a) => {
                let (q, o) = (Some(&mut a.wq), Some(&mut a.wo));
                [q, a.wk.as_mut(), a.wv.as_mut(), o]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            TokenMixer::ShortConv(c) => vec![&mut c.in_proj, &mut c.out_proj],
            TokenMixer::DeltaNet(d) => {
                vec![&mut d.qkv, &mut d.z, &mut d.beta, &mut d.alpha, &mut d.out]
            }
        };
        match &mut self.ffn {
            Ffn::Dense { gate, up, down } => m.extend([gate, up, down]),
            Ffn::Moe(x) => {
                m.push(&mut x.router);
                m.extend(x.gate.iter_mut().chain(&mut x.up).chain(&mut x.down));
                if let Some(s) = &mut x.shared {
                    m.extend([&mut s.gate, &mut s.up, &mut s.down]);
                }
                if let Some(d) = &mut x.beside {
                    m.extend([&mut d.gate, &mut d.up, &mut d.down]);
                }
            }
        }
        if let Some(p) = &mut self.per_layer_input {
            m.extend([&mut p.inp_gate, &mut p.proj]);
        }
        m
    }

    /// The attention weights, if the layer attends.
    pub fn attention(&self) -> Option<&AttentionWeights> {
        match &self.mixer {
            TokenMixer::Attention(a) => Some(a),
            TokenMixer::ShortConv(_) | TokenMixer::DeltaNet(_) => None,
        }
    }
}

impl Ffn {
    fn load(l: &Loader, arch: Arch, hp: &HParams, il: usize) -> Result<Ffn, ModelError> {
        let n = |s: &str| format!("blk.{il}.{s}");
        let e = hp.n_embd;
        // The hyperparameters have expert counts exactly when the recipe's FFN is a mixture;
        // its first `n_dense_lead` layers are dense.
        match hp.moe.filter(|m| il >= m.n_dense_lead) {
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
                // The router first: its shape names a wrong expert count best.
                let router = l.router(&n("ffn_gate_inp.weight"), e, x, &key)?;
                // Gate and up stacked apart, or in one tensor (Qwen3.5-MoE's converter).
                let fused = n("ffn_gate_up_exps.weight");
                let (gate, up) = match l.experts_gate_up_opt(&fused, e, f, x, &key)? {
                    Some(both) => both,
                    None => (
                        l.experts(&n("ffn_gate_exps.weight"), e, f, x, &key)?,
                        l.experts(&n("ffn_up_exps.weight"), e, f, x, &key)?,
                    ),
                };
                Ok(Ffn::Moe(Experts {
                    router,
                    gate,
                    up,
                    down: l.experts(&n("ffn_down_exps.weight"), f, e, x, &key)?,
                    shared: shared.transpose()?,
                    selection_bias: match arch.moe() {
                        Some(r) if r.selection_bias => Some(l.vector(&n("exp_probs_b.bias"), x)?),
                        _ => None,
                    },
                    biases: match arch.moe() {
                        Some(r) if r.biases => Some(ExpertBiases::load(l, il, e, f, x)?),
                        _ => None,
                    },
                    down_scale: l.vector_opt(&n("ffn_down_exps.scale"), x)?,
                    beside: match arch.moe() {
                        Some(r) if r.beside_dense => Some(DenseBeside::load(l, hp, il)?),
                        _ => None,
                    },
                }))
            }
            None if arch.recipe.ffn == FfnRecipe::DenseGateUpFused => {
                let name = n("ffn_up.weight");
                let f = hp.ffn_width(il);
                let parts = [("gate", f), ("up", f)];
                let [gate, up] = fused_parts(l.fused_opt(&name, e, &parts)?, &name)?;
                Ok(Ffn::Dense {
                    gate,
                    up,
                    down: l.linear(&n("ffn_down.weight"), f, e)?,
                })
            }
            None => Ok(Ffn::Dense {
                gate: l.linear(&n("ffn_gate.weight"), e, hp.ffn_width(il))?,
                up: l.linear(&n("ffn_up.weight"), e, hp.ffn_width(il))?,
                down: l.linear(&n("ffn_down.weight"), hp.ffn_width(il), e)?,
            }),
        }
    }
}

/// The row blocks of a fused tensor, which must exist.
pub(super) fn fused_parts<const N: usize>(
    blocks: Option<Vec<Linear>>,
    name: &str,
) -> Result<[Linear; N], ModelError> {
    let blocks = blocks.ok_or_else(|| ModelError::MissingTensor(name.into()))?;
    blocks
        .try_into()
        .map_err(|_| ModelError::MissingTensor(name.into()))
}
