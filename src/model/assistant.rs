//! Gemma 4's assistant drafter: a small file (`gemma4-assistant`) that drafts for one target
//! from the target's own state, keeping no cache of its own. Per drafted token t
//! ([`super::Context::assistant_batch`]):
//!
//!   x = pre · [E_target[t] * sqrt(B); h]                 [n, 2B] -> [n, d]
//!   x = its layers (Gemma 4's, queries only, over the target's KV cache of positions < t's)
//!   x = rms(x, output_norm)
//!   logits = head · x        h' = post · x               [n, n_vocab], [n, B]
//!
//! `h` is the target's hidden state (after its output norm) of the token before t, or for a
//! chained draft the assistant's `h'` of the draft before; every draft of one step sits at the
//! same position, since the target's cache does not grow while drafting (as llama.cpp's
//! draft-mtp runs it). The head scores the whole vocabulary: Hugging Face's E2B/E4B assistants
//! also have a centroid-masked head (`masked_embedding.*`, scoring a subset), which llama.cpp's
//! converter (0c1e57098) leaves out of the GGUF, and its runtime would not read it either.

use std::path::Path;

use super::arch::GEMMA4_ASSISTANT;
use super::error::ModelError;
use super::hparams::HParams;
use super::load::{self, LoadOptions};
use super::weights::{AssistantProjections, Weights};
use super::Model;
use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;

pub struct Assistant {
    /// Its layers, norm and head, as a model whose layers read the target's KV cache.
    pub model: Model,
    pub projections: AssistantProjections,
    /// The target it was loaded for ([`Model::fingerprint`]).
    target: u64,
}

impl Assistant {
    /// Loads the assistant at `path` for `target`, checking that it belongs to it: a Gemma 4
    /// target, the same vocabulary, its input as wide as the target's hidden state, and head
    /// sizes that match the target's cache layers it reads.
    pub fn load(
        path: impl AsRef<Path>,
        target: &Model,
        opts: &mut LoadOptions,
    ) -> Result<Assistant, ModelError> {
        let path = path.as_ref();
        let (gguf, _, _) = load::open_gguf(&[path.to_path_buf()], opts)?;
        let assistant = Self::from_gguf(gguf, target).map_err(|e| match e {
            ModelError::InvalidArgument(why) => {
                ModelError::InvalidArgument(format!("{}: {why}", path.display()))
            }
            other => other,
        })?;
        opts.report(1.0)?;
        Ok(assistant)
    }

    /// [`Assistant::load`] from a file already open. Its vocabulary is compared last, so that
    /// a broken file is named for what is broken.
    pub fn from_gguf(gguf: GgufFile, target: &Model) -> Result<Assistant, ModelError> {
        let arch = gguf.get_str("general.architecture").unwrap_or("none");
        if arch != GEMMA4_ASSISTANT.name {
            return Err(ModelError::InvalidArgument(format!(
                "a {arch} file, not an assistant drafter ({})",
                GEMMA4_ASSISTANT.name
            )));
        }
        if target.arch.name != "gemma4" {
            return Err(ModelError::InvalidArgument(format!(
                "an assistant drafts for a Gemma 4 model; {} is {}",
                target.display_name(),
                target.arch.name
            )));
        }
        let (arch, n_vocab) = (&GEMMA4_ASSISTANT, target.hparams.n_vocab);
        let mismatch = |difference: String| {
            ModelError::InvalidArgument(format!(
                "the assistant cannot draft for {}: {difference}",
                target.display_name()
            ))
        };
        let own_vocab = Tokenizer::vocab_len(&gguf);
        if own_vocab != n_vocab {
            return Err(mismatch(format!(
                "its vocabulary has {own_vocab} tokens, the target's {n_vocab}"
            )));
        }
        let hparams = HParams::for_assistant(&gguf, arch, &target.hparams, n_vocab)?;
        let (weights, _) = Weights::load(&gguf, arch, &hparams, None, false, &mut |_| Ok(()))?;
        let projections = AssistantProjections::load(&gguf, hparams.n_embd, target.hparams.n_embd)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)
            .map_err(|e| ModelError::Tokenizer(format!("the assistant's vocabulary: {e}")))?;
        if let Some(difference) = target.tokenizer.drafting_difference(&tokenizer) {
            return Err(mismatch(difference));
        }
        load::release_header(&gguf);
        Ok(Assistant {
            model: Model {
                paging: None,
                arch,
                hparams,
                weights,
                tokenizer,
                gguf,
                repacked_from_cache: false,
            },
            projections,
            target: target.fingerprint(),
        })
    }

    /// Whether it was loaded for `target`.
    pub fn drafts_for(&self, target: &Model) -> bool {
        self.target == target.fingerprint()
    }
}
