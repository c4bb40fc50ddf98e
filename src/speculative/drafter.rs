//! Drafters, and the draft model: a small model of the same vocabulary decoding greedily.

use std::borrow::BorrowMut;

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

    /// Whether drafting costs next to nothing (no model runs), so long drafts are cheap.
    fn is_free(&self) -> bool {
        false
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
    if t.n_vocab() != d.n_vocab() {
        return mismatch(format!(
            "its vocabulary has {} tokens, the target's {}",
            d.n_vocab(),
            t.n_vocab()
        ));
    }
    for id in 0..t.n_vocab() as TokenId {
        if t.token_text(id) != d.token_text(id) || t.is_eog(id) != d.is_eog(id) {
            return mismatch(format!(
                "token {id} is {:?} in the target and {:?} in the draft",
                t.token_text(id).unwrap_or(""),
                d.token_text(id).unwrap_or("")
            ));
        }
    }
    if (t.bos(), t.add_bos()) != (d.bos(), d.add_bos()) {
        return mismatch("their BOS tokens differ".into());
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
        let n_vocab = target
            .model()
            .hparams
            .n_vocab
            .min(d.model().hparams.n_vocab);
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

    fn eval(&mut self, tokens: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        self.passes += tokens.len().div_ceil(self.ctx.borrow().n_batch());
        let seq = self.seq;
        let last = tokens.len() - 1;
        let batch: Vec<BatchToken> = (tokens.iter().enumerate())
            .map(|(i, &token)| BatchToken {
                token,
                seq,
                logits: i == last,
            })
            .collect();
        self.ctx.borrow_mut().decode(&batch)
    }
}

impl<C: BorrowMut<Context>> Drafter for ModelDrafter<C> {
    fn draft(&mut self, history: &[TokenId], max: usize) -> Result<Vec<TokenId>, ModelError> {
        self.passes = 0;
        if history.is_empty() || max == 0 {
            return Ok(Vec::new());
        }
        let ctx = self.ctx.borrow_mut();
        // The last history token is always evaluated here, for its logits.
        let common = (ctx.seq_tokens(self.seq).iter().zip(history))
            .take_while(|(a, b)| a == b)
            .count()
            .min(history.len() - 1);
        ctx.truncate_seq(self.seq, common);
        // The last draft is not evaluated, so `max` drafts need `max - 1` positions.
        let max = max.min((ctx.n_ctx() + 1).saturating_sub(history.len()));
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut logits = self.eval(&history[common..])?;
        let mut drafts = Vec::with_capacity(max);
        while drafts.len() < max {
            let (tok, p) = top_token(&logits[..self.n_vocab]);
            if p < self.p_min {
                break;
            }
            drafts.push(tok);
            if drafts.len() < max {
                logits = self.eval(&[tok])?;
            }
        }
        Ok(drafts)
    }

    fn last_passes(&self) -> usize {
        self.passes
    }
}

/// The most likely token and its probability.
pub(super) fn top_token(logits: &[f32]) -> (TokenId, f32) {
    let best = crate::sampling::argmax(logits);
    let top = logits[best as usize];
    let sum: f64 = logits
        .iter()
        .filter(|l| !l.is_nan())
        .map(|&l| ((l - top) as f64).exp())
        .sum();
    (best, (1.0 / sum.max(1.0)) as f32)
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
        let found = self.lookup.draft(history, max)?;
        self.used_model = found.is_empty();
        if self.used_model {
            self.model.draft(history, max)
        } else {
            Ok(found)
        }
    }

    fn last_passes(&self) -> usize {
        if self.used_model {
            self.model.last_passes()
        } else {
            0
        }
    }
}
