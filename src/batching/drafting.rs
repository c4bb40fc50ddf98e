//! The scheduler's drafting: every generating slot drafts a few tokens per step, by prompt
//! lookup first, then, where lookup finds nothing, by a model drafting for all slots at once:
//! a draft model in its own context ([`SharedDrafter`]), or the target's own
//! multi-token-prediction block ([`MtpSequences`]), which reads the target's hidden states and
//! keeps rows in the target's cache, so it follows every change of a slot's sequence.

use super::worker::Slot;
use crate::model::Context;
use crate::speculative::{DraftRequest, DraftSource, Drafter, MtpRun, MtpSequences, SharedDrafter};

/// The model that drafts where lookup finds nothing.
pub(super) enum ModelDrafts {
    Draft(Box<SharedDrafter>),
    Mtp(MtpSequences),
}

impl ModelDrafts {
    /// The block, when it is what drafts.
    fn mtp(this: &mut Option<ModelDrafts>) -> Option<&mut MtpSequences> {
        match this {
            Some(ModelDrafts::Mtp(block)) => Some(block),
            _ => None,
        }
    }

    /// After a failure that may have left caches half-written, every sequence emptied.
    pub fn reset(this: &mut Option<ModelDrafts>, n_seq: usize) {
        match this {
            Some(ModelDrafts::Draft(d)) => d.reset(),
            Some(ModelDrafts::Mtp(block)) => (0..n_seq).for_each(|s| block.forget(s)),
            None => {}
        }
    }

    /// Sequence `seq` was rewound from `held` tokens to `keep` for a new request; returns
    /// what it keeps now. The block pairs the next token with the hidden state of the last
    /// one kept, which a rewind loses. Where a cache rewinds to any position (attention only),
    /// one more token is given back, to be evaluated again; a recurrent state rewinds only to
    /// its checkpoints, and one token back would be a checkpoint back (hundreds of tokens), so
    /// there the first new token's block row is left as it was (its drafts may be worse).
    pub fn rewound(
        this: &mut Option<ModelDrafts>,
        ctx: &mut Context,
        seq: usize,
        (held, keep): (usize, usize),
    ) -> usize {
        let Some(block) = Self::mtp(this) else {
            return keep;
        };
        if keep < held {
            block.forget(seq);
        }
        let exact_anywhere = ctx.rewind_depth() == usize::MAX;
        match keep > 0 && !block.knows(seq) && exact_anywhere {
            true => ctx.truncate_seq(seq, keep - 1),
            false => keep,
        }
    }

    /// Sequence `seq` was replaced (a slot file restored, erased) or emptied.
    pub fn replaced(this: &mut Option<ModelDrafts>, seq: usize) {
        if let Some(block) = Self::mtp(this) {
            block.forget(seq);
        }
    }

    /// Sequence `dst` became a copy of `src`.
    pub fn copied(this: &mut Option<ModelDrafts>, src: usize, dst: usize) {
        if let Some(block) = Self::mtp(this) {
            block.copy(src, dst);
        }
    }

    /// The target's last decode evaluated `runs`, which their sequences keep: the block reads
    /// them (teacher-forced) before it drafts after them. A failure costs only drafts (the
    /// sequences forget their hidden states, and draft again after their next rewind).
    pub fn caught_up(this: &mut Option<ModelDrafts>, ctx: &mut Context, runs: &[MtpRun]) {
        if let Some(block) = Self::mtp(this) {
            let _ = block.catch_up(ctx, runs);
        }
    }
}

/// Drafts for every generating slot that speculates, within the positions and tokens left to
/// it and the batch's room: by prompt lookup first, then, where lookup finds nothing, by the
/// drafting model, in passes the slots share.
pub(super) fn draft_all(ctx: &mut Context, drafter: Option<&mut ModelDrafts>, slots: &mut [Slot]) {
    let n_generating = (slots.iter())
        .filter(|s| s.job.as_ref().is_some_and(|j| j.next.is_some()))
        .count();
    let mut room = ctx.n_batch().saturating_sub(n_generating);
    let mut asks: Vec<DraftRequest> = Vec::new();
    for (seq, slot) in slots.iter_mut().enumerate() {
        let Some(job) = slot.job.as_mut() else {
            continue;
        };
        job.drafts.clear();
        let (Some(spec), Some(next)) = (&mut job.spec, job.next) else {
            continue;
        };
        let held = ctx.seq_tokens(seq);
        // Positions left, and drafts a rejection can rewind exactly (with the pending token).
        let positions =
            (ctx.n_ctx().saturating_sub(held.len() + 1)).min(ctx.rewind_depth().saturating_sub(1));
        // The token sampled after the drafts counts too.
        let tokens_left = job.max_tokens.saturating_sub(job.generated.len() + 1);
        // Each source drafts as long as its own acceptance pays for.
        let mut want = |on: bool, source| match on {
            true => (spec.policy.draft_len_from(source, n_generating))
                .min(positions)
                .min(tokens_left)
                .min(room),
            false => 0,
        };
        let lookup_want = want(spec.lookup.is_some(), DraftSource::Lookup);
        let model_want = want(drafter.is_some(), DraftSource::Model);
        if lookup_want == 0 && model_want == 0 {
            continue;
        }
        let mut history = Vec::with_capacity(held.len() + 1);
        history.extend_from_slice(held);
        history.push(next);
        spec.source = DraftSource::Lookup;
        if let Some(lookup) = spec.lookup.as_mut().filter(|_| lookup_want > 0) {
            job.drafts = lookup.draft(&history, lookup_want).unwrap_or_default();
            job.drafts.truncate(lookup_want);
        }
        if job.drafts.is_empty() && model_want > 0 {
            // Room is held for the model's drafts until they are known.
            spec.source = DraftSource::Model;
            room -= model_want;
            asks.push(DraftRequest {
                seq,
                history,
                max: model_want,
                drafts: Vec::new(),
            });
        } else {
            room -= job.drafts.len();
        }
    }
    let Some(drafter) = drafter.filter(|_| !asks.is_empty()) else {
        return;
    };
    // A draft that fails (it cannot, short of a bug) only costs this step its drafts.
    let ((passes, secs), drafted) = match drafter {
        ModelDrafts::Draft(d) => {
            let drafted = d.draft(&mut asks);
            (d.last_timing(), drafted)
        }
        ModelDrafts::Mtp(block) => {
            let drafted = block.draft(ctx, &mut asks);
            (block.last_timing(), drafted)
        }
    };
    if drafted.is_err() {
        return;
    }
    for ask in asks {
        let Some(job) = slots[ask.seq].job.as_mut() else {
            continue;
        };
        if let Some(spec) = &mut job.spec {
            spec.policy.drafted(passes, secs);
        }
        job.drafts = ask.drafts;
    }
}

/// What a decode's batch holds of each slot: its first row, and the tokens its sequence held
/// before (the block's runs start there).
pub(super) struct BatchPlaces {
    pub first_row: Vec<Option<usize>>,
    pub held_before: Vec<usize>,
}

impl BatchPlaces {
    /// The block's run of `seq`: what it keeps now of what the batch evaluated for it.
    pub fn run(&self, ctx: &Context, seq: usize) -> Option<MtpRun> {
        let row = self.first_row[seq]?;
        let first_pos = self.held_before[seq];
        let len = ctx.seq_len(seq).checked_sub(first_pos)?;
        Some(MtpRun {
            seq,
            first_pos,
            len,
            row,
        })
    }
}
