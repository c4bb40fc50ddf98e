//! The scheduler thread: admit, batch, forward, sample, stream; one step per forward pass.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use super::drafting::{draft_all, BatchPlaces, ModelDrafts};
use super::logprobs::{LogprobQueue, TokenLogprob};
use super::slot_files;
use super::stats::Stats;
use super::stop::StopMatcher;
use super::thinking::BudgetState;
use super::{Completion, Event, Failure, FinishReason, Message, Queued, Request};
use crate::model::{BatchToken, Context};
use crate::sampling::Sampler;
use crate::speculative::{DraftPolicy, DraftSource, LookupDrafter, NgramPool};
use crate::tokenizer::{StreamDecoder, TokenId, Tokenizer};

/// One sequence of the context (whose tokens `ctx.seq_tokens(slot)` holds) and the request
/// it serves, if any.
pub(super) struct Slot<'t> {
    /// When it last served a request: among equal prefixes the least recently used is reused.
    last_used: Option<Instant>,
    pub job: Option<Job<'t>>,
}

/// A request being served.
pub(super) struct Job<'t> {
    req: Request,
    submitted: Instant,
    sampler: Sampler,
    /// Prompt tokens still to evaluate.
    pending: Vec<TokenId>,
    /// The sampled token to evaluate next (generation phase).
    pub next: Option<TokenId>,
    /// Most tokens to generate (the request's, limited by the context).
    pub max_tokens: usize,
    pub generated: Vec<TokenId>,
    cached_tokens: usize,
    admitted: Instant,
    first_token: Option<Instant>,
    decoder: StreamDecoder<'t>,
    stop: StopMatcher,
    /// With a thinking budget: how much the reply has thought, and the close being forced.
    budget: Option<BudgetState>,
    /// How this request speculates, when the scheduler does.
    pub spec: Option<JobSpec>,
    /// Tokens drafted to follow `next` in the current step.
    pub drafts: Vec<TokenId>,
    /// Log-probabilities waiting for their text (requests with `logprobs`).
    logprobs: LogprobQueue,
    /// A further choice of a group: the slot whose prompt it waits to copy.
    leader: Option<usize>,
    /// A group's first choice: the slots waiting for its prompt.
    followers: Vec<usize>,
}

/// A request's speculation: its prompt-lookup drafter (with lookup on) and how many tokens
/// drafting pays for it.
pub(super) struct JobSpec {
    pub lookup: Option<LookupDrafter>,
    pub policy: DraftPolicy,
    /// Where the drafts being verified came from.
    pub source: DraftSource,
}

/// The scheduler's settings, as the thread runs them.
pub(super) struct Setup {
    /// Context shift's `n_keep`, when on.
    pub shift: Option<usize>,
    /// Most tokens a slot drafts per step (0: no speculation).
    pub max_draft: usize,
    /// Prompt lookup on.
    pub lookup: bool,
}

/// What every job's speculation is made from.
struct SpecSetup {
    max_draft: usize,
    /// What finished requests said, for every slot's prompt lookup to draft from.
    pool: Option<Arc<NgramPool>>,
    /// Whether a draft model drafts too.
    model: bool,
}

impl SpecSetup {
    fn for_job(&self) -> Option<JobSpec> {
        // Beside a draft model only lookup matches of 3+ tokens beat it.
        let ngram_min = if self.model { 3 } else { 1 };
        (self.max_draft > 0).then(|| JobSpec {
            lookup: (self.pool.as_ref())
                .map(|pool| LookupDrafter::new(ngram_min, 4).with_pool(Arc::clone(pool))),
            policy: DraftPolicy::new(self.max_draft, !self.model),
            source: DraftSource::Lookup,
        })
    }
}

enum Outcome {
    Continue,
    Finished(FinishReason),
    /// The listener is gone (`None`) or the request failed.
    Abandoned(Option<Failure>),
}

pub(super) fn run(
    mut ctx: Context,
    mut drafter: Option<ModelDrafts>,
    queue: mpsc::Receiver<Message>,
    stats: Arc<Stats>,
    setup: Setup,
) {
    let shift = setup.shift;
    let model = Arc::clone(ctx.model());
    let tokenizer = &model.tokenizer;
    let n_ctx = ctx.n_ctx();
    let mut slots: Vec<Slot> = (0..ctx.n_seq())
        .map(|_| Slot {
            last_used: None,
            job: None,
        })
        .collect();
    let spec = SpecSetup {
        max_draft: setup.max_draft,
        pool: (setup.lookup && setup.max_draft > 0).then(|| Arc::new(NgramPool::new(3, 1 << 20))),
        model: drafter.is_some(),
    };
    let mut waiting: VecDeque<Queued> = VecDeque::new();
    let mut slot_tasks: Vec<slot_files::SlotTask> = Vec::new();
    let mut open = true;
    loop {
        // Wait for work when idle; otherwise take whatever arrived since the last step.
        let idle =
            waiting.is_empty() && slot_tasks.is_empty() && slots.iter().all(|s| s.job.is_none());
        if idle {
            if !open {
                return;
            }
            match queue.recv() {
                Ok(m) => take(m, &mut waiting, &mut slot_tasks),
                Err(_) => return,
            }
        }
        loop {
            match queue.try_recv() {
                Ok(m) => take(m, &mut waiting, &mut slot_tasks),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        drop_abandoned_waiting(&mut waiting, &stats);
        // With context shift a request may generate past its slot's positions.
        let room = if shift.is_some() { usize::MAX } else { n_ctx };
        admit(
            (&mut ctx, &mut drafter),
            &mut slots,
            &mut waiting,
            tokenizer,
            (room, &spec),
            &stats,
        );
        if let Some(n_keep) = shift {
            shift_full_slots(&mut ctx, &mut slots, n_keep, &stats);
        }
        // After admission: a slot action sees every request sent before it in its slot.
        for task in slot_tasks.drain(..) {
            ModelDrafts::replaced(&mut drafter, task.slot);
            run_slot_task(&mut ctx, &slots, task);
        }
        for slot in slots.iter_mut() {
            if let Some(job) = &slot.job {
                if let Some(why) = abandoned(&job.req) {
                    end_job(slot, Outcome::Abandoned(why), &stats);
                }
            }
        }
        end_orphans(&mut slots, &stats);
        let stepped = std::panic::catch_unwind(AssertUnwindSafe(|| {
            step(&mut ctx, &mut drafter, &mut slots, tokenizer, &stats)
        }));
        if stepped.is_err() {
            ModelDrafts::reset(&mut drafter, ctx.n_seq());
            recover_from_panic(&mut ctx, &mut slots, &stats);
        }
    }
}

fn take(m: Message, waiting: &mut VecDeque<Queued>, tasks: &mut Vec<slot_files::SlotTask>) {
    match m {
        Message::Request(q) => waiting.push_back(*q),
        Message::Slot(task) => tasks.push(task),
    }
}

/// Runs a slot action on an idle slot (a busy one is refused).
fn run_slot_task(ctx: &mut Context, slots: &[Slot], task: slot_files::SlotTask) {
    let (seq, busy) = (
        task.slot,
        slots.get(task.slot).is_some_and(|s| s.job.is_some()),
    );
    let done = std::panic::catch_unwind(AssertUnwindSafe(|| slot_files::perform(ctx, busy, task)));
    if done.is_err() {
        // A bug; the sequence may be half-written (the asker's reply channel is gone).
        ctx.truncate_seq(seq, 0);
    }
}

/// A panic inside a step (a bug, or a sink that panicked) must not end the server: every
/// request in flight fails, every sequence is emptied (its cache may be half-written), and the
/// scheduler goes on with the next requests.
fn recover_from_panic(ctx: &mut Context, slots: &mut [Slot], stats: &Stats) {
    for (seq, slot) in slots.iter_mut().enumerate() {
        ctx.truncate_seq(seq, 0);
        if slot.job.is_some() {
            let failure = Failure::Engine("internal error (a panic in the scheduler step)".into());
            // The sink itself may be what panicked: a second panic here is contained too.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                end_job(slot, Outcome::Abandoned(Some(failure)), stats)
            }));
        }
    }
}

/// Why a request should stop now, if it should: `Some(None)` when nobody listens any more,
/// `Some(Some(TimedOut))` when its deadline passed.
fn abandoned(req: &Request) -> Option<Option<Failure>> {
    if req.sink.is_closed() {
        return Some(None);
    }
    match req.deadline {
        Some(d) if Instant::now() >= d => Some(Some(Failure::TimedOut)),
        _ => None,
    }
}

fn drop_abandoned_waiting(waiting: &mut VecDeque<Queued>, stats: &Stats) {
    waiting.retain_mut(|q| match abandoned(&q.req) {
        None => true,
        Some(why) => {
            if let Some(failure) = why {
                q.req.sink.send(Event::Failed(failure));
            }
            Stats::sub(&stats.queue_depth, 1);
            Stats::add(&stats.requests_cancelled, 1);
            false
        }
    });
}

/// Moves waiting requests into free slots, in arrival order, each into the free slot whose
/// cache shares the longest prefix with its prompt.
fn admit<'t>(
    (ctx, drafter): (&mut Context, &mut Option<ModelDrafts>),
    slots: &mut [Slot<'t>],
    waiting: &mut VecDeque<Queued>,
    tokenizer: &'t Tokenizer,
    (room, spec): (usize, &SpecSetup),
    stats: &Stats,
) {
    while !waiting.is_empty() {
        let prompt = &waiting[0].req.prompt;
        let free = slots.iter().filter(|s| s.job.is_none()).count();
        // A group of choices waits until it can start whole.
        if free < 1 + waiting[0].followers.len() {
            return;
        }
        let best = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.job.is_none())
            .map(|(i, s)| (i, common_prefix(ctx.seq_tokens(i), prompt), s.last_used))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)));
        let Some((seq, shared, _)) = best else {
            return;
        };
        let Queued {
            req,
            sampler,
            submitted,
            followers,
        } = waiting.pop_front().expect("not empty");
        Stats::sub(&stats.queue_depth, 1);
        // At least one prompt token is evaluated: its logits give the first generated token.
        let held = ctx.seq_len(seq);
        let keep = ctx.truncate_seq(seq, shared.min(req.prompt.len() - 1));
        let keep = ModelDrafts::rewound(drafter, ctx, seq, (held, keep));
        Stats::add(&stats.prompt_tokens_cached, keep as u64);
        let mut leader = new_job(req, sampler, submitted, keep, (tokenizer, room, spec));
        for (req, sampler) in followers {
            let f = (0..slots.len())
                .find(|&i| i != seq && slots[i].job.is_none())
                .expect("enough free slots were counted");
            let n = req.prompt.len();
            let mut job = new_job(req, sampler, submitted, n, (tokenizer, room, spec));
            // It waits, with nothing to evaluate, until the leader's prompt is in the cache.
            job.pending.clear();
            job.leader = Some(seq);
            leader.followers.push(f);
            ctx.truncate_seq(f, 0);
            ModelDrafts::replaced(drafter, f);
            occupy(&mut slots[f], job, stats);
        }
        occupy(&mut slots[seq], leader, stats);
    }
}

fn occupy<'t>(slot: &mut Slot<'t>, job: Job<'t>, stats: &Stats) {
    Stats::add(&stats.slots_busy, 1);
    slot.job = Some(job);
    slot.last_used = Some(Instant::now());
}

/// A request's job with the first `keep` prompt tokens already in its slot's cache.
fn new_job<'t>(
    req: Request,
    sampler: Sampler,
    submitted: Instant,
    keep: usize,
    (tokenizer, room, spec): (&'t Tokenizer, usize, &SpecSetup),
) -> Job<'t> {
    Job {
        pending: req.prompt[keep..].to_vec(),
        next: None,
        max_tokens: req.max_tokens.min(room.saturating_sub(req.prompt.len())),
        generated: Vec::new(),
        cached_tokens: keep,
        admitted: Instant::now(),
        first_token: None,
        decoder: StreamDecoder::after_prompt(tokenizer).showing(&req.markup.shown_tokens),
        stop: StopMatcher::new(&req.stop),
        budget: req.markup.budget.as_ref().map(BudgetState::new),
        spec: spec.for_job(),
        drafts: Vec::new(),
        logprobs: LogprobQueue::default(),
        leader: None,
        followers: Vec::new(),
        req,
        submitted,
        sampler,
    }
}

/// Makes room in every generating slot whose positions are full: forgets the older half of
/// what follows its first `n_keep` tokens (the context's token record follows, so prefix
/// reuse stays exact); a slot with nothing to forget finishes with `Length`.
fn shift_full_slots(ctx: &mut Context, slots: &mut [Slot], n_keep: usize, stats: &Stats) {
    let n_ctx = ctx.n_ctx();
    for (seq, slot) in slots.iter_mut().enumerate() {
        let generating = slot.job.as_ref().is_some_and(|j| j.next.is_some());
        let len = ctx.seq_len(seq);
        if !generating || len < n_ctx {
            continue;
        }
        let keep = n_keep.min(len);
        let n_discard = (len - keep) / 2;
        let shifted = n_discard > 0 && ctx.shift_seq(seq, keep, n_discard).is_ok();
        if shifted {
            Stats::add(&stats.context_shifts, 1);
        } else if let Some(job) = &mut slot.job {
            let outcome = flush(job, FinishReason::Length);
            end_job(slot, outcome, stats);
        }
    }
}

fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// One forward pass over every busy slot, then one sampled token for each slot that finished
/// its prompt or is generating.
fn step(
    ctx: &mut Context,
    drafter: &mut Option<ModelDrafts>,
    slots: &mut [Slot],
    tokenizer: &Tokenizer,
    stats: &Stats,
) {
    let n_batch = ctx.n_batch();
    let mut batch: Vec<BatchToken> = Vec::new();
    // Generating slots first: one token each keeps every stream moving; then their drafts
    // while the batch has room.
    draft_all(ctx, drafter.as_mut(), slots);
    let mut places = BatchPlaces {
        first_row: vec![None; slots.len()],
        held_before: (0..slots.len()).map(|s| ctx.seq_len(s)).collect(),
    };
    for (seq, slot) in slots.iter_mut().enumerate() {
        let Some(job) = slot.job.as_mut() else {
            continue;
        };
        let Some(token) = job.next else { continue };
        places.first_row[seq] = Some(batch.len());
        let row = std::iter::once(token).chain(job.drafts.iter().copied());
        batch.extend(row.map(|token| BatchToken {
            token,
            seq,
            logits: true,
        }));
    }
    // Then prompt chunks, in slot order, while the batch has room.
    let mut prompt_taken = vec![0usize; slots.len()];
    for (seq, slot) in slots.iter().enumerate() {
        let Some(job) = &slot.job else { continue };
        let room = n_batch.saturating_sub(batch.len());
        let take = job.pending.len().min(room);
        if take > 0 {
            places.first_row[seq] = Some(batch.len());
        }
        for (i, &token) in job.pending[..take].iter().enumerate() {
            batch.push(BatchToken {
                token,
                seq,
                logits: i + 1 == job.pending.len(),
            });
        }
        prompt_taken[seq] = take;
    }
    if batch.is_empty() {
        return;
    }
    let started = Instant::now();
    let result = ctx.decode(&batch);
    let secs = started.elapsed().as_secs_f64();
    Stats::add(&stats.busy_micros, (secs * 1e6) as u64);
    for job in slots.iter_mut().filter_map(|s| s.job.as_mut()) {
        if let Some(spec) = &mut job.spec {
            spec.policy.verified(batch.len(), secs);
        }
    }
    Stats::add(&stats.forward_passes, 1);
    Stats::add(&stats.forward_tokens, batch.len() as u64);
    let logits = match result {
        Ok(l) => l,
        Err(e) => {
            // Admission keeps every slot within its context, so this is an engine failure:
            // the requests in this batch fail and their slots are freed.
            let mut in_batch = vec![false; slots.len()];
            batch.iter().for_each(|b| in_batch[b.seq] = true);
            for (seq, slot) in slots.iter_mut().enumerate() {
                if in_batch[seq] {
                    let failure = Failure::Engine(e.to_string());
                    end_job(slot, Outcome::Abandoned(Some(failure)), stats);
                }
            }
            return;
        }
    };
    for (seq, slot) in slots.iter_mut().enumerate() {
        if let Some(job) = &mut slot.job {
            job.pending.drain(..prompt_taken[seq]);
            Stats::add(&stats.prompt_tokens, prompt_taken[seq] as u64);
            job.next = None;
        }
    }
    // Prompt chunks are kept whole: the block reads them now, before a group's followers
    // copy a finished prompt.
    let (prompt_runs, generated): (Vec<usize>, Vec<usize>) =
        (0..slots.len()).partition(|&seq| prompt_taken[seq] > 0);
    let runs = |seqs: &[usize], ctx: &Context| -> Vec<_> {
        (seqs.iter())
            .filter_map(|&seq| places.run(ctx, seq))
            .collect()
    };
    let prompt_runs = runs(&prompt_runs, ctx);
    ModelDrafts::caught_up(drafter, ctx, &prompt_runs);
    let n_vocab = ctx.model().hparams.n_vocab;
    let rows: Vec<&[f32]> = logits.chunks(n_vocab).collect();
    let mut first_row = 0;
    let mut seqs: Vec<usize> = batch.iter().filter(|b| b.logits).map(|b| b.seq).collect();
    seqs.dedup();
    for seq in seqs {
        start_followers(
            (ctx, drafter),
            slots,
            seq,
            rows[first_row],
            tokenizer,
            stats,
        );
        let slot = &mut slots[seq];
        let Some(job) = &mut slot.job else { continue };
        let n_rows = 1 + job.drafts.len();
        let outcome = verify(
            ctx,
            seq,
            job,
            &rows[first_row..first_row + n_rows],
            tokenizer,
            stats,
        );
        first_row += n_rows;
        if !matches!(outcome, Outcome::Continue) {
            end_job(slot, outcome, stats);
        }
    }
    // The generating slots' pending tokens and accepted drafts, as verification kept them.
    let generated = runs(&generated, ctx);
    ModelDrafts::caught_up(drafter, ctx, &generated);
}

/// When a group's leader has just evaluated its prompt (`row` is its last prompt token's
/// logits), each waiting follower copies the prompt's cache and samples its first token from
/// the same row with its own sampler.
fn start_followers(
    (ctx, drafter): (&mut Context, &mut Option<ModelDrafts>),
    slots: &mut [Slot],
    leader: usize,
    row: &[f32],
    tokenizer: &Tokenizer,
    stats: &Stats,
) {
    let Some(job) = slots[leader].job.as_mut() else {
        return;
    };
    if job.followers.is_empty() || !job.pending.is_empty() || !job.generated.is_empty() {
        return;
    }
    for f in std::mem::take(&mut job.followers) {
        let slot = &mut slots[f];
        let Some(follower) = slot.job.as_mut().filter(|j| j.leader == Some(leader)) else {
            continue;
        };
        follower.leader = None;
        ctx.copy_seq(leader, f);
        ModelDrafts::copied(drafter, leader, f);
        let outcome = sample_next(follower, row, None, tokenizer);
        if !matches!(outcome, Outcome::Continue) {
            end_job(slot, outcome, stats);
        }
    }
}

/// Followers whose leader is gone before their prompt was ready end the same way: its
/// listener left, or it failed.
fn end_orphans(slots: &mut [Slot], stats: &Stats) {
    for f in 0..slots.len() {
        let Some(leader) = slots[f].job.as_ref().and_then(|j| j.leader) else {
            continue;
        };
        let waiting = slots[leader]
            .job
            .as_ref()
            .is_some_and(|j| j.followers.contains(&f));
        if !waiting {
            let why = Failure::Engine("the prompt shared by this choice failed".into());
            let closed = slots[f]
                .job
                .as_ref()
                .is_some_and(|j| j.req.sink.is_closed());
            let outcome = Outcome::Abandoned((!closed).then_some(why));
            end_job(&mut slots[f], outcome, stats);
        }
    }
}

/// Samples a generating slot's tokens from its rows (the row of its next token, then one per
/// draft): each draft the sampled token agrees with is kept, and the first disagreement (or
/// the end of the request) ends the step; the cache forgets the drafts not kept.
fn verify(
    ctx: &mut Context,
    seq: usize,
    job: &mut Job,
    rows: &[&[f32]],
    tokenizer: &Tokenizer,
    stats: &Stats,
) -> Outcome {
    let drafts = std::mem::take(&mut job.drafts);
    let held_before = ctx.seq_len(seq) - drafts.len();
    let mut accepted = 0;
    let mut outcome = Outcome::Continue;
    for (i, logits) in rows.iter().enumerate() {
        let draft = drafts.get(i).copied();
        outcome = sample_next(job, logits, draft, tokenizer);
        Stats::add(&stats.completion_tokens, 1);
        if !matches!(outcome, Outcome::Continue) || job.next != draft {
            break;
        }
        accepted += 1;
    }
    if !drafts.is_empty() {
        ctx.truncate_seq(seq, held_before + accepted);
        Stats::add(&stats.drafted_tokens, drafts.len() as u64);
        Stats::add(&stats.accepted_tokens, accepted as u64);
        if let Some(spec) = &mut job.spec {
            spec.policy
                .accepted_from(spec.source, drafts.len(), accepted);
        }
    }
    outcome
}

/// Samples a slot's next token (checking `draft` when one was drafted) and streams its text;
/// says whether the request goes on.
fn sample_next(
    job: &mut Job,
    logits: &[f32],
    draft: Option<TokenId>,
    tokenizer: &Tokenizer,
) -> Outcome {
    let forced = job.budget.as_mut().and_then(BudgetState::forced);
    let token = match (forced, draft) {
        (Some(f), _) => {
            job.sampler.take_forced(f);
            f
        }
        (None, Some(d)) => job.sampler.sample_given_draft(logits, d),
        (None, None) => job.sampler.sample(logits),
    };
    job.sampler.accept(token);
    job.generated.push(token);
    job.first_token.get_or_insert_with(Instant::now);
    if tokenizer.is_eog(token) {
        return flush(job, FinishReason::Stop);
    }
    let piece = job.decoder.push(token);
    if let Some(budget) = &mut job.budget {
        budget.advance(&piece);
    }
    if let Some(top_n) = job.req.logprobs {
        let entry = TokenLogprob::from_logits(logits, token, top_n);
        job.logprobs.push(entry, piece.len());
    }
    let (text, stopped) = job.stop.push(&piece);
    if !send_text(job, text) {
        return Outcome::Abandoned(None);
    }
    if stopped {
        return Outcome::Finished(FinishReason::Stop);
    }
    if job.generated.len() >= job.max_tokens {
        return flush(job, FinishReason::Length);
    }
    job.next = Some(token);
    Outcome::Continue
}

/// Releases text held back by the UTF-8 decoder and the stop matcher, then finishes.
fn flush(job: &mut Job, reason: FinishReason) -> Outcome {
    let (mut text, stopped) = job.stop.push(&job.decoder.finish());
    if !stopped {
        text.push_str(&job.stop.finish());
    }
    if !send_text(job, text) {
        return Outcome::Abandoned(None);
    }
    Outcome::Finished(reason)
}

/// Sends released text, preceded by the log-probabilities of the tokens that made it; says
/// whether anyone is still listening.
fn send_text(job: &mut Job, text: String) -> bool {
    if text.is_empty() {
        return true;
    }
    let entries = job.logprobs.release(text.len());
    if !entries.is_empty() && !job.req.sink.send(Event::Logprobs(entries)) {
        return false;
    }
    job.req.sink.send(Event::Text(text))
}

/// Frees a slot; its cached tokens stay for the next request with the same prefix.
fn end_job(slot: &mut Slot, outcome: Outcome, stats: &Stats) {
    let Some(mut job) = slot.job.take() else {
        return;
    };
    if let Some(lookup) = job.spec.as_ref().and_then(|s| s.lookup.as_ref()) {
        lookup.share();
    }
    Stats::sub(&stats.slots_busy, 1);
    slot.last_used = Some(Instant::now());
    let sink = &mut job.req.sink;
    match outcome {
        Outcome::Continue => unreachable!("end_job is called only for an ending request"),
        Outcome::Finished(finish) => {
            Stats::add(&stats.requests_finished, 1);
            let now = Instant::now();
            sink.send(Event::Done(Completion {
                finish,
                prompt_tokens: job.req.prompt.len(),
                cached_tokens: job.cached_tokens,
                completion_tokens: job.generated.len(),
                tokens: job.generated,
                time_to_first_token: job.first_token.unwrap_or(now) - job.admitted,
                total_time: now - job.submitted,
            }));
        }
        Outcome::Abandoned(why) => {
            Stats::add(&stats.requests_cancelled, 1);
            if let Some(failure) = why {
                sink.send(Event::Failed(failure));
            }
        }
    }
}
