//! An assistant drafter's own tensors besides its layers (Gemma 4's `gemma4-assistant`): the
//! projections between its width and its target's hidden state. Its layers, norm and head load
//! as a model's ([`super::Weights::load`]).

use super::tensors::Loader;
use super::Linear;
use crate::gguf::GgufFile;
use crate::model::error::ModelError;

pub struct AssistantProjections {
    /// [n_embd, 2 n_target]: [scaled target embedding of the token; target hidden state] to
    /// the assistant's input.
    pub pre: Linear,
    /// [n_target, n_embd]: the assistant's normed output to the hidden state the next drafted
    /// token pairs with.
    pub post: Linear,
}

impl AssistantProjections {
    /// For an assistant `n_embd` wide beside a target whose hidden state has `n_target`
    /// values; repacked where their type has an interleaved layout.
    pub fn load(
        gguf: &GgufFile,
        n_embd: usize,
        n_target: usize,
    ) -> Result<AssistantProjections, ModelError> {
        let l = Loader { gguf };
        let mut p = AssistantProjections {
            pre: l.linear("nextn.pre_projection.weight", 2 * n_target, n_embd)?,
            post: l.linear("nextn.post_projection.weight", n_embd, n_target)?,
        };
        for lin in [&mut p.pre, &mut p.post] {
            lin.repack(gguf, &|_| {});
        }
        Ok(p)
    }
}
