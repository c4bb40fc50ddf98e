//! Drafting with the target's own multi-token-prediction block ([`Context::mtp_pass`]), as
//! llama.cpp's `draft-mtp` does: the block reads the next token and the trunk's hidden state
//! of the token before it, and predicts the token after; chained on its own hidden state it
//! drafts several. Its KV rows sit at the sequence's positions in the target's cache:
//! drafting writes them past the sequence's end, and after each verification they are
//! written again from the kept tokens and the target's hidden states (teacher-forced), so the
//! block always reads what llama.cpp's reads.

use super::Drafter;
use crate::model::{Context, ModelError};
use crate::sampling::argmax;
use crate::tokenizer::TokenId;

/// Prompt tokens the block catches up on per pass.
const CATCH_UP_CHUNK: usize = 512;

pub struct MtpDrafter {
    /// The trunk's hidden state of the last token the target holds: what the pending token
    /// pairs with. Zeros before any.
    pending_hidden: Vec<f32>,
    passes: usize,
}

impl MtpDrafter {
    /// For `target`, whose model was loaded with its block
    /// ([`crate::model::LoadOptions::mtp`]); keeps its hidden states from now on.
    pub fn new(target: &mut Context) -> Result<MtpDrafter, ModelError> {
        let model = target.model();
        if model.weights.mtp.is_none() {
            return Err(ModelError::InvalidArgument(
                "the model was loaded without its multi-token-prediction block".into(),
            ));
        }
        let n_embd = model.hparams.n_embd;
        target.keep_hidden(true);
        Ok(MtpDrafter {
            pending_hidden: vec![0.0; n_embd],
            passes: 0,
        })
    }

    /// The block over `tokens`, which `seq` holds from `first_pos` and the last decode
    /// evaluated (the rows of [`Context::last_hidden`]), token t with the hidden state of the
    /// token before it; the last token's hidden state becomes the pending one.
    fn catch_up(
        &mut self,
        target: &mut Context,
        seq: usize,
        first_pos: usize,
        tokens: &[TokenId],
    ) -> Result<(), ModelError> {
        let e = self.pending_hidden.len();
        let evaluated = target.last_hidden();
        if evaluated.len() < tokens.len() * e {
            return Err(ModelError::InvalidArgument(format!(
                "the drafter needs the hidden states of {} tokens; the last pass kept {}",
                tokens.len(),
                evaluated.len() / e.max(1)
            )));
        }
        // Row t: the hidden state of token t - 1.
        let mut paired = Vec::with_capacity(tokens.len() * e);
        paired.extend_from_slice(&self.pending_hidden);
        paired.extend_from_slice(&evaluated[..(tokens.len() - 1) * e]);
        self.pending_hidden = evaluated[(tokens.len() - 1) * e..tokens.len() * e].to_vec();
        for (i, chunk) in tokens.chunks(CATCH_UP_CHUNK).enumerate() {
            let start = i * CATCH_UP_CHUNK;
            let rows = &paired[start * e..(start + chunk.len()) * e];
            target.mtp_pass(seq, first_pos + start, chunk, rows)?;
        }
        Ok(())
    }
}

impl Drafter for MtpDrafter {
    fn draft(&mut self, _history: &[TokenId], _max: usize) -> Result<Vec<TokenId>, ModelError> {
        Err(ModelError::InvalidArgument(
            "the multi-token-prediction drafter drafts on the target's context".into(),
        ))
    }

    fn on_target(&self) -> bool {
        true
    }

    fn last_passes(&self) -> usize {
        self.passes
    }

    fn prepare_on_target(&mut self, target: &mut Context, seq: usize) -> Result<(), ModelError> {
        let tokens = target.seq_tokens(seq).to_vec();
        self.pending_hidden.iter_mut().for_each(|h| *h = 0.0);
        self.catch_up(target, seq, 0, &tokens)
    }

    fn draft_on_target(
        &mut self,
        target: &mut Context,
        seq: usize,
        pending: TokenId,
        max: usize,
    ) -> Result<Vec<TokenId>, ModelError> {
        let first_pos = target.seq_len(seq);
        let (mut token, mut hidden) = (pending, self.pending_hidden.clone());
        let mut drafts = Vec::with_capacity(max);
        self.passes = 0;
        let model = std::sync::Arc::clone(target.model());
        for i in 0..max {
            let out = target.mtp_pass(seq, first_pos + i, &[token], &hidden)?;
            self.passes += 1;
            token = argmax(&out.logits);
            drafts.push(token);
            if model.tokenizer.is_eog(token) {
                break;
            }
            hidden = out.hidden;
        }
        Ok(drafts)
    }

    fn verified(
        &mut self,
        target: &mut Context,
        seq: usize,
        first_pos: usize,
        kept: &[TokenId],
    ) -> Result<(), ModelError> {
        self.catch_up(target, seq, first_pos, kept)
    }
}
