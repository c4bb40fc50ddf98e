//! Drafting with the target's own multi-token-prediction block ([`Context::mtp_batch`]), as
//! llama.cpp's `draft-mtp` does: the block reads the next token and the trunk's hidden state
//! of the token before it, and predicts the token after; chained on its own hidden state it
//! drafts several. Its KV rows sit at the sequences' positions in the target's cache:
//! drafting writes them past a sequence's end, and after each pass of the target they are
//! written again from the tokens kept and the target's hidden states (teacher-forced), so the
//! block always reads what llama.cpp's reads.
//!
//! Gemma 4's assistant drafts the same way from the same hidden states
//! ([`Context::assistant_batch`]), but keeps no rows: it reads the target's own KV cache, so
//! a catch-up only records the last hidden state, and all drafts of one step sit at the
//! position after the sequence's end.
//!
//! [`MtpSequences`] keeps that state for every sequence of a context and drafts for many at
//! once (a server's slots: each draft step is one pass of the block over every sequence still
//! drafting); [`MtpDrafter`] is the one-sequence [`Drafter`] of `kolibri run`.

use std::sync::Arc;
use std::time::Instant;

use super::{DraftRequest, DraftSource, Drafter, LookupDrafter};
use crate::model::{Assistant, Context, ModelError, MtpNeed, MtpOutput, MtpToken};
use crate::sampling::argmax;
use crate::tokenizer::TokenId;

/// Tokens the block catches up on per pass.
const CATCH_UP_CHUNK: usize = 512;

/// Tokens a sequence holds from `first_pos` on (`len` of them) that the target's last decode
/// evaluated, as rows `row..row + len` of [`Context::last_hidden`].
#[derive(Clone, Copy, Debug)]
pub struct MtpRun {
    pub seq: usize,
    pub first_pos: usize,
    pub len: usize,
    pub row: usize,
}

/// Which of the model's own drafters drafts.
#[derive(Clone)]
pub enum OwnDrafter {
    /// The target's multi-token-prediction block, loaded with it.
    Block,
    /// Gemma 4's assistant, loaded beside the target ([`Assistant::load`]).
    Assistant(Arc<Assistant>),
}

/// The own drafter's state for every sequence of a target context: the trunk's hidden
/// state of each sequence's last token, which the next token pairs with.
pub struct MtpSequences {
    drafter: OwnDrafter,
    /// Per sequence; `None` when unknown (its cache was rewound or replaced): the next run's
    /// first token then only provides its hidden state, its block row is left as it was.
    last_hidden: Vec<Option<Vec<f32>>>,
    n_embd: usize,
    /// Passes of the last [`MtpSequences::draft`] and their seconds.
    timed: (usize, f64),
}

impl MtpSequences {
    /// For every sequence of `target`, whose model was loaded with its block
    /// ([`crate::model::LoadOptions::mtp`]); the target keeps its hidden states from now on.
    pub fn new(target: &mut Context) -> Result<MtpSequences, ModelError> {
        let model = target.model();
        if model.weights.mtp.is_none() {
            return Err(ModelError::InvalidArgument(
                "the model was loaded without its multi-token-prediction block".into(),
            ));
        }
        Ok(Self::drafting(target, OwnDrafter::Block))
    }

    /// For every sequence of `target`, drafted by `assistant` (loaded for its model); the
    /// target keeps its hidden states from now on.
    pub fn with_assistant(
        target: &mut Context,
        assistant: Arc<Assistant>,
    ) -> Result<MtpSequences, ModelError> {
        if !assistant.drafts_for(target.model()) {
            return Err(ModelError::InvalidArgument(format!(
                "the assistant was loaded for another model than {}",
                target.model().display_name()
            )));
        }
        Ok(Self::drafting(target, OwnDrafter::Assistant(assistant)))
    }

    fn drafting(target: &mut Context, drafter: OwnDrafter) -> MtpSequences {
        target.keep_hidden(true);
        MtpSequences {
            drafter,
            last_hidden: vec![None; target.n_seq()],
            n_embd: target.model().hparams.n_embd,
            timed: (0, 0.0),
        }
    }

    /// A drafting pass over `tokens`, each paired with its row of `hidden`.
    fn draft_pass(
        &self,
        target: &mut Context,
        tokens: &[MtpToken],
        hidden: &[f32],
    ) -> Result<MtpOutput, ModelError> {
        match &self.drafter {
            OwnDrafter::Block => target.mtp_batch(tokens, hidden, MtpNeed::Drafts),
            OwnDrafter::Assistant(a) => target.assistant_batch(a, tokens, hidden),
        }
    }

    /// Whether the drafter keeps KV rows of its own (the block): it catches up on every token
    /// kept, and each draft of a step sits one position after the one before. The assistant
    /// reads the target's rows: all drafts of a step sit at the position after the sequence.
    fn keeps_rows(&self) -> bool {
        matches!(self.drafter, OwnDrafter::Block)
    }

    /// Sequence `seq`'s cache was rewound or replaced: its last token's hidden state is
    /// unknown until a pass evaluates a token of it again.
    pub fn forget(&mut self, seq: usize) {
        if let Some(h) = self.last_hidden.get_mut(seq) {
            *h = None;
        }
    }

    /// Whether the hidden state of `seq`'s last token is known (it can draft).
    pub fn knows(&self, seq: usize) -> bool {
        self.last_hidden.get(seq).is_some_and(Option::is_some)
    }

    /// Sequence `dst` became a copy of `src`.
    pub fn copy(&mut self, src: usize, dst: usize) {
        if src < self.last_hidden.len() && dst < self.last_hidden.len() {
            self.last_hidden[dst] = self.last_hidden[src].clone();
        }
    }

    /// The passes of the last [`MtpSequences::draft`] and their seconds.
    pub fn last_timing(&self) -> (usize, f64) {
        self.timed
    }

    /// Writes the block's rows of `runs` (tokens the target's last decode evaluated), token t
    /// paired with the hidden state of the token before it; each run's last hidden state
    /// becomes its sequence's (all the assistant, which keeps no rows, needs). A run from
    /// position 0 pairs its first token with zeros. On error the runs' sequences forget their
    /// hidden state.
    pub fn catch_up(&mut self, target: &mut Context, runs: &[MtpRun]) -> Result<(), ModelError> {
        let e = self.n_embd;
        let evaluated = target.last_hidden();
        let (mut places, mut paired) = (Vec::new(), Vec::new());
        let mut last = Vec::with_capacity(runs.len());
        for run in runs.iter().filter(|r| r.len > 0) {
            let (rows, end) = (
                run.row * e..(run.row + run.len) * e,
                run.first_pos + run.len,
            );
            let tokens = target.seq_tokens(run.seq).get(run.first_pos..end);
            let (Some(tokens), Some(hidden)) = (tokens, evaluated.get(rows)) else {
                return Err(ModelError::InvalidArgument(format!(
                    "sequence {} positions {}..{end} are not rows {}.. of the last pass",
                    run.seq, run.first_pos, run.row
                )));
            };
            let before = match (run.first_pos, self.last_hidden[run.seq].take()) {
                (0, _) => Some(vec![0.0; e]),
                (_, known) => known,
            };
            last.push((run.seq, hidden[(run.len - 1) * e..].to_vec()));
            if !self.keeps_rows() {
                continue;
            }
            // Token t reads the hidden state of token t - 1.
            let skip = usize::from(before.is_none());
            if let Some(before) = before {
                paired.extend_from_slice(&before);
            }
            paired.extend_from_slice(&hidden[..(run.len - 1) * e]);
            places.extend((skip..run.len).map(|t| MtpToken {
                token: tokens[t],
                seq: run.seq,
                pos: run.first_pos + t,
            }));
        }
        for (chunk, rows) in places
            .chunks(CATCH_UP_CHUNK)
            .zip(paired.chunks(CATCH_UP_CHUNK * e))
        {
            target.mtp_batch(chunk, rows, MtpNeed::CacheRows)?;
        }
        for (seq, hidden) in last {
            self.last_hidden[seq] = Some(hidden);
        }
        Ok(())
    }

    /// Drafts up to `max` tokens for every request (its history's last token is the one its
    /// sequence does not hold yet), each draft step one pass over the sequences still
    /// drafting. A sequence whose hidden state is unknown drafts nothing.
    pub fn draft(
        &mut self,
        target: &mut Context,
        requests: &mut [DraftRequest],
    ) -> Result<(), ModelError> {
        self.timed = (0, 0.0);
        let started = Instant::now();
        let n_ctx = target.n_ctx();
        // Per drafting request: (request, position after its sequence, token, hidden state it
        // pairs with).
        let mut active: Vec<(usize, usize, TokenId, Vec<f32>)> = Vec::new();
        for (i, r) in requests.iter_mut().enumerate() {
            r.drafts.clear();
            let (Some(&pending), Some(Some(hidden))) =
                (r.history.last(), self.last_hidden.get(r.seq))
            else {
                continue;
            };
            let pos = target.seq_len(r.seq);
            if r.max > 0 && pos < n_ctx {
                active.push((i, pos, pending, hidden.clone()));
            }
        }
        let n_vocab = target.model().hparams.n_vocab;
        let advance = self.keeps_rows();
        while !active.is_empty() {
            let places: Vec<MtpToken> = (active.iter())
                .map(|&(i, end, token, _)| MtpToken {
                    token,
                    seq: requests[i].seq,
                    pos: end + if advance { requests[i].drafts.len() } else { 0 },
                })
                .collect();
            let hidden: Vec<f32> = active.iter().flat_map(|a| a.3.iter().copied()).collect();
            let out = self.draft_pass(target, &places, &hidden);
            let out = out.inspect_err(|_| requests.iter_mut().for_each(|r| r.drafts.clear()))?;
            self.timed.0 += 1;
            let mut next = Vec::with_capacity(active.len());
            let rows = out
                .logits
                .chunks(n_vocab)
                .zip(out.hidden.chunks(self.n_embd));
            for ((logits, h), (i, end, _, _)) in rows.zip(active) {
                let r = &mut requests[i];
                let token = argmax(logits);
                r.drafts.push(token);
                let more = r.drafts.len() < r.max && end + r.drafts.len() < n_ctx;
                if more && !target.model().tokenizer.is_eog(token) {
                    next.push((i, end, token, h.to_vec()));
                }
            }
            active = next;
        }
        self.timed.1 = started.elapsed().as_secs_f64();
        Ok(())
    }
}

/// The one-sequence drafter over [`MtpSequences`], with prompt lookup first when given one
/// (what lookup finds costs nothing to draft).
pub struct MtpDrafter {
    block: MtpSequences,
    lookup: Option<LookupDrafter>,
    passes: usize,
}

impl MtpDrafter {
    /// For `target`, whose model was loaded with its block
    /// ([`crate::model::LoadOptions::mtp`]); keeps its hidden states from now on.
    pub fn new(target: &mut Context) -> Result<MtpDrafter, ModelError> {
        Ok(Self::over(MtpSequences::new(target)?))
    }

    /// For `target`, drafted by `assistant` (loaded for its model).
    pub fn with_assistant(
        target: &mut Context,
        assistant: Arc<Assistant>,
    ) -> Result<MtpDrafter, ModelError> {
        Ok(Self::over(MtpSequences::with_assistant(target, assistant)?))
    }

    fn over(block: MtpSequences) -> MtpDrafter {
        MtpDrafter {
            block,
            lookup: None,
            passes: 0,
        }
    }

    /// Drafts by prompt lookup where it finds a match, by the block elsewhere.
    pub fn with_lookup(mut self, lookup: LookupDrafter) -> MtpDrafter {
        self.lookup = Some(lookup);
        self
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

    fn looks_up(&self) -> bool {
        self.lookup.is_some()
    }

    fn runs_model(&self) -> bool {
        true
    }

    fn last_passes(&self) -> usize {
        self.passes
    }

    /// Reads what the target's last decode evaluated of `seq` (its last tokens; all of them
    /// after a whole prompt's decode).
    fn prepare_on_target(&mut self, target: &mut Context, seq: usize) -> Result<(), ModelError> {
        let held = target.seq_len(seq);
        let len = (target.last_hidden().len() / self.block.n_embd).min(held);
        let run = MtpRun {
            seq,
            first_pos: held - len,
            len,
            row: 0,
        };
        self.block.catch_up(target, &[run])
    }

    fn draft_on_target(
        &mut self,
        target: &mut Context,
        seq: usize,
        history: &[TokenId],
        (lookup_max, model_max): (usize, usize),
    ) -> Result<(Vec<TokenId>, DraftSource), ModelError> {
        self.passes = 0;
        if let Some(lookup) = self.lookup.as_mut().filter(|_| lookup_max > 0) {
            let found = lookup.draft(history, lookup_max)?;
            if !found.is_empty() {
                return Ok((found, DraftSource::Lookup));
            }
        }
        let mut request = [DraftRequest {
            seq,
            history: history.to_vec(),
            max: model_max,
            drafts: Vec::new(),
        }];
        self.block.draft(target, &mut request)?;
        self.passes = self.block.last_timing().0;
        let [request] = request;
        Ok((request.drafts, DraftSource::Model))
    }

    fn verified(
        &mut self,
        target: &mut Context,
        seq: usize,
        first_pos: usize,
        kept: &[TokenId],
    ) -> Result<(), ModelError> {
        let run = MtpRun {
            seq,
            first_pos,
            len: kept.len(),
            row: 0,
        };
        self.block.catch_up(target, &[run])
    }
}
