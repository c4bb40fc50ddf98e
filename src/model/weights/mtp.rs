//! A multi-token-prediction block (`nextn`, Qwen3.5 / 3.6): one decoder block after the trunk
//! that predicts the token after next from the next token's embedding and the trunk's hidden
//! state. Loaded only when asked for ([`crate::model::LoadOptions::mtp`]).

use super::tensors::Loader;
use super::{LayerWeights, Linear};
use crate::model::arch::Arch;
use crate::model::error::ModelError;
use crate::model::hparams::HParams;

pub struct MtpWeights {
    /// [n_embd, 2 n_embd]: [normed embedding; normed hidden state] to the block's input.
    pub eh_proj: Linear,
    /// [n_embd] each: the norms of the embedding and of the hidden state.
    pub enorm: Vec<f32>,
    pub hnorm: Vec<f32>,
    /// The norm before the head (`shared_head_norm`); `None`: the model's output norm.
    pub head_norm: Option<Vec<f32>>,
    /// The block's own head and embedding where the file has them; `None`: the model's.
    pub head: Option<Linear>,
    pub embed: Option<Linear>,
    /// A full-attention decoder block, layer `hp.n_layer` of the file.
    pub block: LayerWeights,
}

impl MtpWeights {
    /// The first block after the trunk; `hp` must describe it ([`HParams::add_mtp_block`]).
    pub(super) fn load(l: &Loader, arch: Arch, hp: &HParams) -> Result<MtpWeights, ModelError> {
        let il = hp.n_layer;
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let n = |s: &str| format!("blk.{il}.nextn.{s}");
        Ok(MtpWeights {
            eh_proj: l.linear(&n("eh_proj.weight"), 2 * e, e)?,
            enorm: l.vector(&n("enorm.weight"), e)?,
            hnorm: l.vector(&n("hnorm.weight"), e)?,
            head_norm: l.vector_opt(&n("shared_head_norm.weight"), e)?,
            head: l.linear_opt(&n("shared_head_head.weight"), e, v)?,
            embed: l.linear_opt(&n("embed_tokens.weight"), e, v)?,
            block: LayerWeights::load(l, arch, hp, il)?,
        })
    }

    /// Its matrices (an own embedding is only looked up, as the model's is).
    pub(super) fn matrices_mut(&mut self) -> Vec<&mut Linear> {
        let mut m = vec![&mut self.eh_proj];
        m.extend(self.head.as_mut());
        m.extend(self.block.matrices_mut());
        m
    }
}
