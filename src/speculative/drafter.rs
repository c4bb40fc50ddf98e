//! Drafters, and the draft model: a small model of the same vocabulary decoding greedily.

use std::borrow::BorrowMut;

use super::shared_draft::{draft_greedy, realign};
use super::{DraftRequest, DraftSource};
use crate::model::{BatchToken, Context, Model, ModelError};
use crate::tokenizer::TokenId;

/// Proposes tokens to follow a text.
pub trait Drafter {
    /// Up to `max` tokens guessed to follow `history` (every token of the sequence, the
    /// last one not yet evaluated by the target). Fewer, or none, when unsure.
    fn draft(&mut self, history: &[TokenId], max: usize) -> Result<Vec<TokenId>, ModelError>;

    /// Forward passes the last [`Drafter::draft`] ran (what its time is divided by to cost a
    /// drafted token; a draft cut short by low confidence ran one more than it returned).
    fn last_passes(&self) -> usize {
        0
    }

    /// Brings the drafter up to `prompt`, which the target has just evaluated, so that the
    /// first step drafts at once: a draft model evaluates the prompt here, as prompt
    /// processing, instead of inside the first generation step.
    fn prepare(&mut self, _prompt: &[TokenId]) -> Result<(), ModelError> {
        Ok(())
    }

    /// Whether it drafts with the target's own context (a multi-token-prediction block):
    /// then [`Drafter::draft_on_target`] drafts and [`Drafter::verified`] follows each
    /// verification, instead of [`Drafter::draft`].
    fn on_target(&self) -> bool {
        false
    }

    /// Drafts to follow `history`, whose last token sequence `seq` of `target` does not hold
    /// yet ([`Drafter::on_target`] drafters): up to `lookup_max` tokens from prompt lookup,
    /// `model_max` from the model; returns the drafts and where they came from.
    fn draft_on_target(
        &mut self,
        _target: &mut Context,
        _seq: usize,
        _history: &[TokenId],
        _max: (usize, usize),
    ) -> Result<(Vec<TokenId>, DraftSource), ModelError> {
        Ok((Vec::new(), DraftSource::Model))
    }

    /// After a verification pass of `target` (its hidden states kept): sequence `seq` now
    /// holds `kept` from position `first_pos` (the pending token and the accepted drafts).
    fn verified(
        &mut self,
        _target: &mut Context,
        _seq: usize,
        _first_pos: usize,
        _kept: &[TokenId],
    ) -> Result<(), ModelError> {
        Ok(())
    }

    /// Brings an [`Drafter::on_target`] drafter up to the prompt sequence `seq` of `target`
    /// holds, which the target's last decode evaluated.
    fn prepare_on_target(&mut self, _target: &mut Context, _seq: usize) -> Result<(), ModelError> {
        Ok(())
    }

    /// Whether drafting costs next to nothing (no model runs), so long drafts are cheap.
    fn is_free(&self) -> bool {
        false
    }

    /// Whether prompt lookup drafts (alone, or before a model).
    fn looks_up(&self) -> bool {
        self.is_free()
    }

    /// Whether a draft model drafts (alone, or where lookup finds nothing).
    fn runs_model(&self) -> bool {
        !self.is_free()
    }

    /// [`Drafter::draft`] with a length per source: up to `lookup_max` tokens from prompt
    /// lookup, `model_max` from a draft model; returns the drafts and where they came from.
    fn draft_from(
        &mut self,
        history: &[TokenId],
        lookup_max: usize,
        model_max: usize,
    ) -> Result<(Vec<TokenId>, DraftSource), ModelError> {
        let (source, max) = if self.is_free() {
            (DraftSource::Lookup, lookup_max)
        } else {
            (DraftSource::Model, model_max)
        };
        let drafts = if max == 0 {
            Vec::new()
        } else {
            self.draft(history, max)?
        };
        Ok((drafts, source))
    }
}

/// Checks that `draft` can draft for `target`: the same tokenizer token by token (text and
/// special tokens), and smaller, since a draft as large as the target cannot save time.
pub fn check_draft_model(target: &Model, draft: &Model) -> Result<(), ModelError> {
    let (t, d) = (&target.tokenizer, &draft.tokenizer);
    let mismatch = |what: String| {
        Err(ModelError::InvalidArgument(format!(
            "the draft model {} cannot draft for {}: {what}",
            draft.display_name(),
            target.display_name()
        )))
    };
    if let Some(difference) = t.drafting_difference(d) {
        return mismatch(difference);
    }
    if draft.n_params() >= target.n_params() {
        return mismatch(format!(
            "it has {} parameters, the target {}; a draft must be smaller",
            draft.n_params(),
            target.n_params()
        ));
    }
    Ok(())
}

/// Tokens a draft may propose for a target: the draft's logits beyond the target's vocabulary
/// are padding.
pub(super) fn draft_vocab(target: &Model, draft: &Model) -> usize {
    target.hparams.n_vocab.min(draft.hparams.n_vocab)
}

/// Greedy drafting with a small model on sequence `seq` of its own context `C` (owned, or
/// borrowed from a caller who keeps it). The context is brought in line with the history at
/// each call: what it holds beyond their common prefix is dropped, what it lacks evaluated.
pub struct ModelDrafter<C> {
    ctx: C,
    seq: usize,
    /// Drafting stops at a token the draft gives less probability than this.
    p_min: f32,
    /// Tokens the draft may propose: its logits beyond the target's vocabulary are padding.
    n_vocab: usize,
    passes: usize,
}

impl<C: BorrowMut<Context>> ModelDrafter<C> {
    /// A drafter for `target` over `draft` (checked with [`check_draft_model`]); the draft
    /// context must hold at least as many positions as the target's.
    pub fn new(target: &Context, draft: C, seq: usize, p_min: f32) -> Result<Self, ModelError> {
        let d = draft.borrow();
        check_draft_model(target.model(), d.model())?;
        if d.n_ctx() < target.n_ctx() {
            return Err(ModelError::InvalidArgument(format!(
                "the draft context holds {} positions, the target's {}: a draft context must \
                 hold as many",
                d.n_ctx(),
                target.n_ctx()
            )));
        }
        if seq >= d.n_seq() {
            return Err(ModelError::InvalidArgument(format!(
                "sequence {seq} is not in the draft context's 0..{}",
                d.n_seq()
            )));
        }
        let n_vocab = draft_vocab(target.model(), d.model());
        Ok(Self::checked(draft, seq, p_min, n_vocab))
    }

    /// A drafter over a pairing [`ModelDrafter::new`] has already checked, proposing tokens
    /// below `n_vocab` (the C API rebuilds one around its borrowed draft context each step).
    pub(crate) fn checked(ctx: C, seq: usize, p_min: f32, n_vocab: usize) -> Self {
        ModelDrafter {
            ctx,
            seq,
            p_min,
            n_vocab,
            passes: 0,
        }
    }

    /// Tokens the draft may propose (`0..n_vocab`).
    pub(crate) fn n_vocab(&self) -> usize {
        self.n_vocab
    }
}

impl<C: BorrowMut<Context>> Drafter for ModelDrafter<C> {
    fn draft(&mut self, history: &[TokenId], max: usize) -> Result<Vec<TokenId>, ModelError> {
        self.passes = 0;
        let mut request = [DraftRequest {
            seq: self.seq,
            history: history.to_vec(),
            max,
            drafts: Vec::new(),
        }];
        let ctx = self.ctx.borrow_mut();
        // One sequence: its whole catch-up in this call.
        let run = draft_greedy(ctx, &mut request, (self.p_min, self.n_vocab), usize::MAX)?;
        self.passes = run.passes;
        let [request] = request;
        Ok(request.drafts)
    }

    fn last_passes(&self) -> usize {
        self.passes
    }

    fn prepare(&mut self, prompt: &[TokenId]) -> Result<(), ModelError> {
        let ctx = self.ctx.borrow_mut();
        let common = realign(ctx, self.seq, prompt, prompt.len());
        let batch: Vec<BatchToken> = (prompt[common..].iter())
            .map(|&token| BatchToken {
                token,
                seq: self.seq,
                logits: false,
            })
            .collect();
        if !batch.is_empty() {
            ctx.decode(&batch)?;
        }
        Ok(())
    }
}

/// Prompt lookup first, a draft model when lookup has nothing: edits and quotes are drafted
/// for free, new text by the model.
pub struct LookupThenModel<C> {
    lookup: super::LookupDrafter,
    model: ModelDrafter<C>,
    /// Whether the model ran for the last draft.
    used_model: bool,
}

impl<C: BorrowMut<Context>> LookupThenModel<C> {
    pub fn new(lookup: super::LookupDrafter, model: ModelDrafter<C>) -> Self {
        LookupThenModel {
            lookup,
            model,
            used_model: false,
        }
    }
}

impl<C: BorrowMut<Context>> Drafter for LookupThenModel<C> {
    fn draft(&mut self, history: &[TokenId], max: usize) -> Result<Vec<TokenId>, ModelError> {
        Ok(self.draft_from(history, max, max)?.0)
    }

    fn last_passes(&self) -> usize {
        if self.used_model {
            self.model.last_passes()
        } else {
            0
        }
    }

    /// A lookup match is drafted as long as lookup's own acceptance pays for, not cut to
    /// what the model's drafts are worth.
    fn draft_from(
        &mut self,
        history: &[TokenId],
        lookup_max: usize,
        model_max: usize,
    ) -> Result<(Vec<TokenId>, DraftSource), ModelError> {
        let found = match lookup_max {
            0 => Vec::new(),
            max => self.lookup.draft(history, max)?,
        };
        self.used_model = found.is_empty() && model_max > 0;
        if self.used_model {
            Ok((self.model.draft(history, model_max)?, DraftSource::Model))
        } else {
            Ok((found, DraftSource::Lookup))
        }
    }

    fn prepare(&mut self, prompt: &[TokenId]) -> Result<(), ModelError> {
        self.model.prepare(prompt)
    }

    fn looks_up(&self) -> bool {
        true
    }

    fn runs_model(&self) -> bool {
        true
    }
}
