//! A draft model drafting for many sequences at once (a server's slots): each draft step is
//! one forward pass over every sequence still drafting, so the draft's weights are read once
//! per step, not once per sequence. [`draft_greedy`] is the drafting itself, which the
//! one-sequence [`super::ModelDrafter`] runs too.

use std::time::Instant;

use super::drafter::{check_draft_model, draft_vocab};
use crate::model::{BatchToken, Context, ModelError};
use crate::tokenizer::TokenId;

/// What one sequence asks of a [`SharedDrafter::draft`] call, and what it gets.
#[derive(Clone, Debug, Default)]
pub struct DraftRequest {
    /// The sequence, in the draft context and the target's alike.
    pub seq: usize,
    /// Every token of the sequence, the last one not yet evaluated by the target.
    pub history: Vec<TokenId>,
    /// Most tokens to draft.
    pub max: usize,
    /// The tokens drafted (filled by the call; empty while the draft is still catching up).
    pub drafts: Vec<TokenId>,
}

/// Greedy drafting with a small model, one sequence of its context per target sequence.
/// Each call brings every asking sequence in line with its history (what the draft holds
/// beyond their common prefix is dropped, what it lacks evaluated), at most `n_batch`
/// catch-up tokens per call in all: a new long prompt is caught up over several calls, and
/// its sequence drafts nothing until then, so no call stalls the others for long.
pub struct SharedDrafter {
    ctx: Context,
    /// Drafting stops at a token the draft gives less probability than this.
    p_min: f32,
    /// Tokens the draft may propose: its logits beyond the target's vocabulary are padding.
    n_vocab: usize,
    passes: usize,
    /// Passes of the last call that cost what a draft step costs, and their seconds.
    timed: (usize, f64),
}

impl SharedDrafter {
    /// A drafter for `target` over `draft`, a context of a model checked with
    /// [`check_draft_model`] that holds as many sequences and positions as the target's.
    pub fn new(target: &Context, draft: Context, p_min: f32) -> Result<Self, ModelError> {
        check_draft_model(target.model(), draft.model())?;
        if draft.n_ctx() < target.n_ctx() || draft.n_seq() < target.n_seq() {
            return Err(ModelError::InvalidArgument(format!(
                "the draft context holds {} sequences of {} positions, the target's {} of {}: \
                 a draft context must hold as many",
                draft.n_seq(),
                draft.n_ctx(),
                target.n_seq(),
                target.n_ctx()
            )));
        }
        let n_vocab = draft_vocab(target.model(), draft.model());
        Ok(SharedDrafter {
            ctx: draft,
            p_min,
            n_vocab,
            passes: 0,
            timed: (0, 0.0),
        })
    }

    /// Forward passes the last [`SharedDrafter::draft`] ran.
    pub fn last_passes(&self) -> usize {
        self.passes
    }

    /// The passes of the last call that drafted (not those that caught up a new prompt) and
    /// their seconds: what a drafted token costs.
    pub fn last_timing(&self) -> (usize, f64) {
        self.timed
    }

    /// Forgets every sequence (after a failure that may have left the caches half-written).
    pub fn reset(&mut self) {
        for seq in 0..self.ctx.n_seq() {
            self.ctx.truncate_seq(seq, 0);
        }
    }

    /// Drafts for every request at once. On error the requests have no drafts and the draft
    /// context is as the catch-up left it (the next call realigns it).
    pub fn draft(&mut self, requests: &mut [DraftRequest]) -> Result<(), ModelError> {
        (self.passes, self.timed) = (0, (0, 0.0));
        let budget = self.ctx.n_batch();
        let run = draft_greedy(&mut self.ctx, requests, (self.p_min, self.n_vocab), budget)?;
        (self.passes, self.timed) = (run.passes, run.timed);
        Ok(())
    }
}

/// What a [`draft_greedy`] call ran: forward passes, and those that cost what a draft step
/// costs (not a new prompt's catch-up) with their seconds.
pub(super) struct DraftRun {
    pub passes: usize,
    pub timed: (usize, f64),
}

/// Greedy drafting on sequences of a draft context, every request at once: each sequence is
/// realigned with its history (at most `catch_up_budget` tokens evaluated in all; a sequence
/// not caught up drafts nothing), then drafts until `max` tokens or a token the draft gives
/// less probability than `p_min`; only tokens below `n_vocab` are proposed.
pub(super) fn draft_greedy(
    ctx: &mut Context,
    requests: &mut [DraftRequest],
    (p_min, n_vocab): (f32, usize),
    catch_up_budget: usize,
) -> Result<DraftRun, ModelError> {
    let mut run = DraftRun {
        passes: 0,
        timed: (0, 0.0),
    };
    let (batch, mut active) = catch_up(ctx, requests, catch_up_budget);
    if batch.is_empty() {
        return Ok(run);
    }
    // Realigning after a verify step takes a token or two per sequence: a draft step.
    let drafting = batch.len() <= 2 * active.len();
    let mut logits = run.eval(ctx, &batch, drafting)?;
    let row_len = ctx.model().hparams.n_vocab;
    while !active.is_empty() {
        let mut next = Vec::with_capacity(active.len());
        let mut batch = Vec::with_capacity(active.len());
        for (row, &i) in logits.chunks_mut(row_len).zip(&active) {
            let r = &mut requests[i];
            let (token, p) = top_token(&mut row[..n_vocab]);
            if p < p_min {
                continue;
            }
            r.drafts.push(token);
            // The last draft is not evaluated: the target checks it.
            if r.drafts.len() < r.max {
                next.push(i);
                batch.push(BatchToken {
                    token,
                    seq: r.seq,
                    logits: true,
                });
            }
        }
        active = next;
        if active.is_empty() {
            break;
        }
        logits = (run.eval(ctx, &batch, true)).inspect_err(|_| clear(requests))?;
    }
    Ok(run)
}

/// Realigns each request's sequence with its history and returns the batch evaluating
/// what the sequences lack (within `budget` tokens), and the requests whose history it
/// completes, in batch order: their last token's logits give their first draft.
fn catch_up(
    ctx: &mut Context,
    requests: &mut [DraftRequest],
    mut budget: usize,
) -> (Vec<BatchToken>, Vec<usize>) {
    let n_ctx = ctx.n_ctx();
    let (mut batch, mut ready) = (Vec::new(), Vec::new());
    for (i, r) in requests.iter_mut().enumerate() {
        r.drafts.clear();
        // `max` drafts take the history's positions and `max - 1` more.
        r.max = r.max.min((n_ctx + 1).saturating_sub(r.history.len()));
        if r.history.is_empty() || r.max == 0 || r.seq >= ctx.n_seq() {
            continue;
        }
        // The last history token is always evaluated here, for its logits.
        let common = realign(ctx, r.seq, &r.history, r.history.len() - 1);
        let missing = &r.history[common..];
        let take = missing.len().min(budget);
        budget -= take;
        let complete = take == missing.len();
        batch.extend(
            missing[..take]
                .iter()
                .enumerate()
                .map(|(j, &token)| BatchToken {
                    token,
                    seq: r.seq,
                    logits: complete && j + 1 == take,
                }),
        );
        if complete {
            ready.push(i);
        }
    }
    (batch, ready)
}

/// Drops what sequence `seq` holds beyond its common prefix with `tokens` (at most `limit`
/// tokens long) and returns that prefix's length: the tokens from there on are to evaluate.
pub(super) fn realign(ctx: &mut Context, seq: usize, tokens: &[TokenId], limit: usize) -> usize {
    let held = ctx.seq_tokens(seq);
    let common = (held.iter().zip(tokens))
        .take_while(|(a, b)| a == b)
        .count()
        .min(limit);
    ctx.truncate_seq(seq, common)
}

impl DraftRun {
    fn eval(
        &mut self,
        ctx: &mut Context,
        batch: &[BatchToken],
        timed: bool,
    ) -> Result<Vec<f32>, ModelError> {
        // The context splits a batch longer than its n_batch into passes.
        self.passes += batch.len().div_ceil(ctx.n_batch());
        let started = Instant::now();
        let logits = ctx.decode(batch)?;
        if timed {
            self.timed.0 += 1;
            self.timed.1 += started.elapsed().as_secs_f64();
        }
        Ok(logits)
    }
}

/// The most likely token and its probability. The row is spent: its logits become the
/// softmax's numerators, on the backend's vector exp (an `f64::exp` per logit took 0.8 ms of a
/// 12 ms draft step on a 152k vocabulary).
fn top_token(logits: &mut [f32]) -> (TokenId, f32) {
    let best = crate::sampling::argmax(logits);
    let top = logits[best as usize];
    let mut sum = crate::kernels::backend().exp_shifted_sum(logits, top);
    if sum.is_nan() {
        // A NaN logit, or a top of ±inf: the finite terms only, as the argmax skips NaN.
        sum = logits
            .iter()
            .filter(|v| !v.is_nan())
            .map(|&v| v as f64)
            .sum::<f64>() as f32;
    }
    (best, 1.0 / sum.max(1.0))
}

fn clear(requests: &mut [DraftRequest]) {
    requests.iter_mut().for_each(|r| r.drafts.clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probability every logit's `exp` gives, in f64.
    fn exact_top(logits: &[f32]) -> f32 {
        let top = logits[crate::sampling::argmax(logits) as usize];
        let sum: f64 = (logits.iter())
            .filter(|l| !l.is_nan())
            .map(|&l| ((l - top) as f64).exp())
            .sum();
        (1.0 / sum) as f32
    }

    #[test]
    fn top_token_matches_the_full_softmax() {
        let mut seed = 7u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1 << 24) as f32
        };
        for spread in [0.5f32, 4.0, 40.0, 400.0] {
            let mut logits: Vec<f32> = (0..50_000)
                .map(|_| next() * spread - spread / 2.0)
                .collect();
            logits[99] = f32::NEG_INFINITY;
            let want = (crate::sampling::argmax(&logits), exact_top(&logits));
            let (token, p) = top_token(&mut logits.clone());
            assert_eq!(token, want.0);
            let close = |p: f32, want: f32| (p - want).abs() <= 1e-5 * want;
            assert!(close(p, want.1), "{spread}: {p} vs {}", want.1);
            logits[17] = f32::NAN;
            let (token_nan, p_nan) = top_token(&mut logits.clone());
            assert_eq!(token_nan, token, "a NaN logit is skipped");
            let want_nan = exact_top(&logits);
            assert!(
                close(p_nan, want_nan),
                "{spread}, NaN: {p_nan} vs {want_nan}"
            );
        }
        assert_eq!(top_token(&mut [f32::NAN, f32::NEG_INFINITY]).1, 1.0);
        assert_eq!(top_token(&mut [1.0, 1.0]), (0, 0.5));
        assert_eq!(top_token(&mut [f32::INFINITY, 1.0]).0, 0);
    }
}
