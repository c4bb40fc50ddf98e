//! Speculative decoding: guess several next tokens cheaply, check them all in one batched
//! pass of the target model, keep the longest prefix the target agrees with.
//!
//! A pass over a few tokens costs little more than a pass over one (the weights are read once
//! either way), so every accepted guess is a token almost for free. Two kinds of guesser
//! ([`Drafter`]): a small draft model sharing the target's vocabulary ([`ModelDrafter`]), and
//! prompt lookup ([`LookupDrafter`]), which proposes what followed the latest earlier
//! occurrence of the text's last few tokens (edits and RAG answers repeat their input), and
//! the two together ([`LookupThenModel`]); a server's slots share one draft model
//! ([`SharedDrafter`]); and the target's own multi-token-prediction block ([`MtpDrafter`]).
//!
//! Exactness: the target's logits of a token are the same bits in a verify batch as in a
//! single-token pass (`tests/batch_invariance.rs`), so greedy output is token for token that of
//! plain decoding; with sampling, [`Sampler::sample_given_draft`] keeps the target's
//! distribution exactly. How many tokens to draft is chosen per step from the acceptance and
//! the pass times measured so far ([`DraftPolicy`]).

mod drafter;
mod lookup;
mod mtp;
mod policy;
mod shared_draft;

use std::time::Instant;

pub use drafter::{check_draft_model, Drafter, LookupThenModel, ModelDrafter};
pub use lookup::{LookupDrafter, NgramPool};
pub use mtp::{MtpDrafter, MtpRun, MtpSequences, OwnDrafter};
pub use policy::{DraftPolicy, DraftSource};
pub use shared_draft::{DraftRequest, SharedDrafter};

use crate::model::{BatchToken, Context, ModelError};
use crate::sampling::Sampler;
use crate::tokenizer::TokenId;

/// What speculation achieved so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecStats {
    /// Tokens the drafter proposed and the target checked.
    pub drafted: u64,
    /// Of those, the ones the target agreed with.
    pub accepted: u64,
    /// Target forward passes (verify passes and plain steps).
    pub target_passes: u64,
    /// Draft model passes (none for prompt lookup).
    pub draft_passes: u64,
    /// Tokens produced, accepted drafts plus one sampled token per pass.
    pub generated: u64,
    /// Seconds spent drafting, and in target passes.
    pub draft_secs: f64,
    pub target_secs: f64,
}

impl SpecStats {
    /// Accepted over drafted (0 when nothing was drafted).
    pub fn acceptance(&self) -> f64 {
        ratio(self.accepted, self.drafted)
    }

    /// Tokens per target pass: 1 for plain decoding.
    pub fn tokens_per_pass(&self) -> f64 {
        ratio(self.generated, self.target_passes)
    }

    /// Drafts accepted per target pass.
    pub fn accepted_per_pass(&self) -> f64 {
        ratio(self.accepted, self.target_passes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Speculative generation for one sequence of a target context: what has been learnt about
/// drafting it (the [`DraftPolicy`]) and the [`SpecStats`]. The drafter is passed to each
/// step, so its context can stay with its owner between steps.
pub struct Speculator {
    policy: DraftPolicy,
    stats: SpecStats,
}

impl Speculator {
    /// For `drafter`; `max_draft`: most tokens drafted per step (the policy picks fewer when
    /// they do not pay), at most 32: verify passes stay below attention's tiled kernel, whose
    /// rounding differs from a single token's.
    pub fn new(drafter: &dyn Drafter, max_draft: usize) -> Speculator {
        Speculator {
            policy: DraftPolicy::new(max_draft.min(32), drafter.is_free()),
            stats: SpecStats::default(),
        }
    }

    pub fn stats(&self) -> SpecStats {
        self.stats
    }

    /// One step of `drafter` (the one the speculator was made for) after `pending`, the last sampled token, which sequence `seq` of `target` does
    /// not hold yet (as after plain sampling). Drafts, verifies the drafts in one pass and
    /// returns the tokens generated (at least one; the last is the new pending token). A step
    /// stops after an end-of-generation token. On error (a full context, a cancelled pass)
    /// the target and the sampler are as before, so the step can be retried.
    pub fn step(
        &mut self,
        drafter: &mut dyn Drafter,
        target: &mut Context,
        seq: usize,
        pending: TokenId,
        sampler: &mut Sampler,
    ) -> Result<Vec<TokenId>, ModelError> {
        let held = target.seq_len(seq);
        // Positions left after the pending token, and drafts a rejection can rewind exactly
        // (the pending token is verified with them).
        let room =
            (target.n_ctx().saturating_sub(held + 1)).min(target.rewind_depth().saturating_sub(1));
        let mut len = |uses: bool, source| match uses {
            true => self.policy.draft_len_from(source, 1).min(room),
            false => 0,
        };
        let lookup_len = len(drafter.looks_up(), DraftSource::Lookup);
        let model_len = len(drafter.runs_model(), DraftSource::Model);
        let (mut drafts, mut source) = (Vec::new(), DraftSource::Model);
        if lookup_len > 0 || model_len > 0 {
            let mut history = Vec::with_capacity(held + 1);
            history.extend_from_slice(target.seq_tokens(seq));
            history.push(pending);
            let t = Instant::now();
            let max = (lookup_len, model_len);
            (drafts, source) = match drafter.on_target() {
                true => drafter.draft_on_target(target, seq, &history, max)?,
                false => drafter.draft_from(&history, lookup_len, model_len)?,
            };
            drafts.truncate(match source {
                DraftSource::Lookup => lookup_len,
                DraftSource::Model => model_len,
            });
            // The first call also brings a draft model up to the prompt: not a drafting cost.
            let (secs, passes) = (t.elapsed().as_secs_f64(), drafter.last_passes());
            self.stats.draft_secs += secs;
            self.stats.draft_passes += passes as u64;
            if self.stats.target_passes > 0 {
                self.policy.drafted(passes, secs);
            }
        }

        let batch: Vec<BatchToken> = std::iter::once(pending)
            .chain(drafts.iter().copied())
            .map(|token| BatchToken {
                token,
                seq,
                logits: true,
            })
            .collect();
        let t = Instant::now();
        let logits = target.decode(&batch)?;
        let secs = t.elapsed().as_secs_f64();
        self.stats.target_secs += secs;
        self.policy.verified(batch.len(), secs);

        let n_vocab = logits.len() / batch.len();
        let tokenizer = &target.model().tokenizer;
        let mut out = Vec::with_capacity(batch.len());
        for (i, row) in logits.chunks(n_vocab).enumerate() {
            let tok = match drafts.get(i) {
                Some(&d) => sampler.sample_given_draft(row, d),
                None => sampler.sample(row),
            };
            sampler.accept(tok);
            out.push(tok);
            if drafts.get(i) != Some(&tok) || tokenizer.is_eog(tok) {
                break;
            }
        }
        let accepted = out.len() - 1;
        // The cache keeps the pending token and the accepted drafts; the rest is rewound.
        target.truncate_seq(seq, held + 1 + accepted);
        if drafter.on_target() {
            let kept: Vec<TokenId> = batch[..=accepted].iter().map(|b| b.token).collect();
            // The tokens are the target's now: a drafter that cannot follow (a cancelled pass)
            // forgets its state and only drafts worse, the step still returns them.
            let _ = drafter.verified(target, seq, held, &kept);
        }
        self.policy.accepted_from(source, drafts.len(), accepted);
        self.stats.drafted += drafts.len() as u64;
        self.stats.accepted += accepted as u64;
        self.stats.target_passes += 1;
        self.stats.generated += out.len() as u64;
        Ok(out)
    }
}
