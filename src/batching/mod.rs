//! Continuous batching: many generation requests served by one multi-sequence [`Context`].
//!
//! A [`Scheduler`] owns a context with one sequence per slot and a thread that loops:
//! admit waiting requests into free slots (the slot whose cached tokens share the longest
//! prefix with the prompt, so a follow-up chat turn reuses its KV cache), build one batch from
//! every busy slot (one token per generating slot, then prompt chunks up to `n_batch`), run one
//! forward pass, sample each slot's next token and stream its text. New requests join at the
//! next step and finished or abandoned ones leave, so no request waits for another to end.
//!
//! Results go to the request's [`EventSink`]; a sink that reports itself closed (the client
//! went away) or a passed deadline ends the request at the next step and frees its slot.

mod drafting;
mod logprobs;
mod slot_files;
mod stats;
mod stop;
mod thinking;
mod worker;

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use logprobs::{TokenLogprob, MAX_TOP_LOGPROBS};
pub use slot_files::{SlotAction, SlotError, SlotReport};
pub use stats::Stats;
pub use stop::StopMatcher;
pub use thinking::{BudgetState, ReplyMarkup, ThinkingBudget};

use crate::model::{Assistant, Context, ContextParams, KvType, Model, ModelError};
use crate::sampling::{Sampler, SamplerParams};
use crate::speculative::{MtpSequences, SharedDrafter};
use crate::tokenizer::TokenId;
use drafting::ModelDrafts;

/// One generation request.
pub struct Request {
    /// The prompt, tokenized (special tokens included as the caller wants them).
    pub prompt: Vec<TokenId>,
    /// Most tokens to generate; also limited by the slot's context.
    pub max_tokens: usize,
    pub sampling: SamplerParams,
    /// Generation ends before the first occurrence of any of these strings.
    pub stop: Vec<String>,
    /// The request is cancelled when this passes.
    pub deadline: Option<Instant>,
    pub sink: Box<dyn EventSink>,
    /// Report each generated token's log-probability with this many alternatives (`None`:
    /// off); the entries arrive as [`Event::Logprobs`] just before the text they produced.
    pub logprobs: Option<usize>,
    /// Structured output: what every sampled token must keep the output inside.
    #[cfg(feature = "grammar")]
    pub constraint: Option<crate::grammar::Constraint>,
    /// The reply's thinking markup: tokens to show as text, and a thinking budget.
    pub markup: ReplyMarkup,
}

/// Where a request's results go. Called on the scheduler thread: it must not block.
pub trait EventSink: Send {
    /// Delivers an event; returns `false` when nobody is listening any more (cancels).
    fn send(&mut self, event: Event) -> bool;
    /// Whether the listener is gone (checked every step, also while the prompt is read).
    fn is_closed(&self) -> bool {
        false
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// More generated text (never empty, never part of a stop string).
    Text(String),
    /// The log-probabilities of the tokens whose text the next `Text` brings (requests with
    /// `logprobs` only).
    Logprobs(Vec<TokenLogprob>),
    /// The request finished; nothing follows.
    Done(Completion),
    /// The request failed; nothing follows.
    Failed(Failure),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The request's deadline passed before it finished.
    TimedOut,
    /// The forward pass failed (an engine error, not the request's fault).
    Engine(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::TimedOut => write!(f, "the request's time limit passed"),
            Failure::Engine(m) => write!(f, "generation failed: {m}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens` or the slot's context was reached.
    Length,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub finish: FinishReason,
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were already in the slot (not evaluated again).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// The generated token ids (an end-of-generation token included when it ended the request).
    pub tokens: Vec<TokenId>,
    /// From admission into a slot to the first generated token.
    pub time_to_first_token: Duration,
    /// From submission to the end.
    pub total_time: Duration,
}

#[derive(Debug, Clone)]
pub struct SchedulerParams {
    /// Requests served at once (sequences in the context).
    pub n_slots: usize,
    /// Positions per slot: prompt plus generated tokens.
    pub n_ctx: usize,
    pub n_threads: usize,
    /// Most tokens in one forward pass.
    pub n_batch: usize,
    /// Most requests waiting for a slot; more are refused with [`SubmitError::QueueFull`].
    pub max_queue: usize,
    /// How the KV cache stores keys and values.
    pub type_k: KvType,
    pub type_v: KvType,
    /// Context shift: `Some(n_keep)` lets a request generate past its slot's positions (when
    /// they are full, the older half of what follows the first `n_keep` tokens is forgotten);
    /// `None` ends it there with [`FinishReason::Length`].
    pub context_shift: Option<usize>,
    /// Speculative decoding, each generating slot drafting for itself (off by default).
    pub speculation: Speculation,
}

impl SchedulerParams {
    /// The context: a sequence per slot (the draft model's alike).
    fn context_params(&self) -> ContextParams {
        ContextParams {
            n_ctx: self.n_ctx,
            n_seq: self.n_slots,
            n_threads: self.n_threads,
            n_batch: self.n_batch,
            type_k: self.type_k,
            type_v: self.type_v,
        }
    }
}

/// Speculation in the scheduler: every generating slot drafts a few tokens per step, which
/// the shared forward pass checks beside the other slots' tokens.
#[derive(Clone, Default)]
pub struct Speculation {
    /// Most tokens a slot drafts per step (at most 32; 0 = off): fewer when acceptance or the
    /// measured pass times say more would not pay.
    pub max_draft: usize,
    /// Prompt lookup: draft from the request's own prompt and text, and from what earlier
    /// requests said.
    pub lookup: bool,
    /// A small model of the target's vocabulary (checked at start), drafting for all slots in
    /// shared passes; with `lookup` too, it drafts where lookup finds nothing.
    pub draft_model: Option<Arc<Model>>,
    /// The draft model stops drafting at a token it gives less probability than this.
    pub draft_p_min: f32,
    /// The model's own multi-token-prediction block drafts (the model loaded with it,
    /// [`crate::model::LoadOptions::mtp`]), in shared passes like a draft model; not with one.
    pub mtp: bool,
    /// Gemma 4's assistant drafts (loaded for the target), in shared passes like the block;
    /// instead of a draft model or the block.
    pub assistant: Option<Arc<Assistant>>,
}

impl std::fmt::Debug for Speculation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Speculation")
            .field("max_draft", &self.max_draft)
            .field("lookup", &self.lookup)
            .field(
                "draft_model",
                &self.draft_model.as_ref().map(|m| m.display_name()),
            )
            .field("draft_p_min", &self.draft_p_min)
            .field("mtp", &self.mtp)
            .field("assistant", &self.assistant.is_some())
            .finish()
    }
}

impl Speculation {
    fn is_on(&self) -> bool {
        let model = self.draft_model.is_some() || self.mtp || self.assistant.is_some();
        self.max_draft > 0 && (self.lookup || model)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitError {
    QueueFull {
        max_queue: usize,
    },
    EmptyPrompt,
    PromptTooLong {
        n_prompt: usize,
        n_ctx: usize,
    },
    InvalidToken {
        token: TokenId,
        n_vocab: usize,
    },
    InvalidSampling(String),
    /// A group of choices needs more slots than the server has, or its prompts differ.
    InvalidGroup(String),
    /// The scheduler thread has ended.
    Stopped,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::QueueFull { max_queue } => {
                write!(
                    f,
                    "the server is busy ({max_queue} requests already waiting)"
                )
            }
            SubmitError::EmptyPrompt => write!(f, "the prompt is empty"),
            SubmitError::PromptTooLong { n_prompt, n_ctx } => write!(
                f,
                "the prompt has {n_prompt} tokens; this server's context holds {n_ctx} per \
                 request (prompt plus at least one generated token)"
            ),
            SubmitError::InvalidToken { token, n_vocab } => {
                write!(
                    f,
                    "token id {token} is outside the vocabulary (0..{n_vocab})"
                )
            }
            SubmitError::InvalidSampling(m) | SubmitError::InvalidGroup(m) => write!(f, "{m}"),
            SubmitError::Stopped => write!(f, "the scheduler has stopped"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// What the scheduler thread is sent.
enum Message {
    Request(Box<Queued>),
    Slot(slot_files::SlotTask),
}

/// A request checked and waiting for a slot.
struct Queued {
    req: Request,
    sampler: Sampler,
    submitted: Instant,
    /// Further choices over the same prompt (`n > 1`): each gets a slot of its own and a copy
    /// of the prompt's cache once `req` has evaluated it.
    followers: Vec<(Request, Sampler)>,
}

pub struct Scheduler {
    model: Arc<Model>,
    params: SchedulerParams,
    stats: Arc<Stats>,
    queue: Option<mpsc::Sender<Message>>,
    worker: Option<JoinHandle<()>>,
}

impl Scheduler {
    /// Creates the context (one sequence per slot) and starts the scheduler thread.
    pub fn start(model: Arc<Model>, params: SchedulerParams) -> Result<Scheduler, ModelError> {
        if params.n_slots == 0 || params.max_queue == 0 {
            return Err(ModelError::InvalidArgument(
                "n_slots and max_queue must be > 0".into(),
            ));
        }
        let mut ctx = Context::new(Arc::clone(&model), &params.context_params())?;
        let drafter = Self::drafter(&mut ctx, &params)?;
        let stats = Arc::new(Stats::default());
        let (tx, rx) = mpsc::channel();
        let worker_stats = Arc::clone(&stats);
        let setup = worker::Setup {
            shift: params.context_shift,
            max_draft: if params.speculation.is_on() {
                params.speculation.max_draft.min(32)
            } else {
                0
            },
            lookup: params.speculation.lookup,
        };
        let worker = std::thread::Builder::new()
            .name("kolibri-scheduler".into())
            .spawn(move || worker::run(ctx, drafter, rx, worker_stats, setup))
            .map_err(|e| ModelError::InvalidArgument(format!("cannot start a thread: {e}")))?;
        Ok(Scheduler {
            model,
            params,
            stats,
            queue: Some(tx),
            worker: Some(worker),
        })
    }

    /// The model drafting for the slots: the draft model, with a sequence per slot as long as
    /// the target's, or the target's own block.
    fn drafter(
        target: &mut Context,
        params: &SchedulerParams,
    ) -> Result<Option<ModelDrafts>, ModelError> {
        let spec = &params.speculation;
        if !spec.is_on() {
            return Ok(None);
        }
        if let Some(assistant) = &spec.assistant {
            if spec.draft_model.is_some() || spec.mtp {
                return Err(ModelError::InvalidArgument(
                    "the assistant drafts instead of a draft model or the model's own block, not \
                     beside one"
                        .into(),
                ));
            }
            let sequences = MtpSequences::with_assistant(target, Arc::clone(assistant));
            return sequences.map(|s| Some(ModelDrafts::Mtp(s)));
        }
        if spec.mtp {
            if spec.draft_model.is_some() {
                return Err(ModelError::InvalidArgument(
                    "the multi-token-prediction block drafts instead of a draft model, not \
                     beside one"
                        .into(),
                ));
            }
            return MtpSequences::new(target).map(|b| Some(ModelDrafts::Mtp(b)));
        }
        let Some(draft) = spec.draft_model.as_ref() else {
            return Ok(None);
        };
        let trained = draft.hparams.n_ctx_train;
        if params.n_ctx > trained {
            return Err(ModelError::InvalidArgument(format!(
                "the draft model {} was trained for {trained} positions, a slot holds {}",
                draft.display_name(),
                params.n_ctx
            )));
        }
        let ctx = Context::new(Arc::clone(draft), &params.context_params())?;
        SharedDrafter::new(target, ctx, spec.draft_p_min)
            .map(|d| Some(ModelDrafts::Draft(Box::new(d))))
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    pub fn params(&self) -> &SchedulerParams {
        &self.params
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// Checks a request and queues it; its events then arrive at its sink. With context shift
    /// a prompt too long for a slot is cut to fit (see [`fit_prompt`]); without, it is refused.
    pub fn submit(&self, req: Request) -> Result<(), SubmitError> {
        self.submit_group(vec![req])
    }

    /// Queues several choices over one prompt (`n > 1`): the prompt is evaluated once, then
    /// every choice continues from a copy of its cache in a slot of its own, with its own
    /// sampler and sink. All are admitted together, when that many slots are free.
    pub fn submit_group(&self, reqs: Vec<Request>) -> Result<(), SubmitError> {
        let n_slots = self.params.n_slots;
        if reqs.is_empty() || reqs.len() > n_slots {
            return Err(SubmitError::InvalidGroup(format!(
                "{} choices: this server runs 1 to {n_slots} at once",
                reqs.len()
            )));
        }
        if reqs.iter().any(|r| r.prompt != reqs[0].prompt) {
            return Err(SubmitError::InvalidGroup(
                "the choices of a group share one prompt".into(),
            ));
        }
        let mut checked = Vec::with_capacity(reqs.len());
        for req in reqs {
            checked.push(self.check(req)?);
        }
        if Stats::get(&self.stats.queue_depth) >= self.params.max_queue as u64 {
            Stats::add(&self.stats.requests_rejected, 1);
            return Err(SubmitError::QueueFull {
                max_queue: self.params.max_queue,
            });
        }
        let queue = self.queue.as_ref().ok_or(SubmitError::Stopped)?;
        let n = checked.len() as u64;
        let mut checked = checked.into_iter();
        let (req, sampler) = checked.next().expect("not empty");
        Stats::add(&self.stats.queue_depth, 1);
        let queued = Queued {
            req,
            sampler,
            submitted: Instant::now(),
            followers: checked.collect(),
        };
        if queue.send(Message::Request(Box::new(queued))).is_err() {
            Stats::sub(&self.stats.queue_depth, 1);
            return Err(SubmitError::Stopped);
        }
        Stats::add(&self.stats.requests_submitted, n);
        Ok(())
    }

    /// One request's checks (and its prompt cut to fit, with context shift); its sampler.
    fn check(&self, mut req: Request) -> Result<(Request, Sampler), SubmitError> {
        let n_vocab = self.model.hparams.n_vocab;
        if req.prompt.is_empty() {
            return Err(SubmitError::EmptyPrompt);
        }
        if let Some(n_keep) = self.params.context_shift {
            fit_prompt(&mut req.prompt, n_keep, self.params.n_ctx);
        }
        if req.prompt.len() >= self.params.n_ctx {
            return Err(SubmitError::PromptTooLong {
                n_prompt: req.prompt.len(),
                n_ctx: self.params.n_ctx,
            });
        }
        if let Some(&token) = req.prompt.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(SubmitError::InvalidToken { token, n_vocab });
        }
        let mut sampler = Sampler::new(req.sampling.clone())
            .map_err(|e| SubmitError::InvalidSampling(e.to_string()))?;
        sampler.suppress(self.model.tokenizer.suppressed());
        #[cfg(feature = "grammar")]
        sampler.set_constraint(req.constraint.take());
        Ok((req, sampler))
    }

    /// Saves, restores or erases an idle slot's contents; blocks until the scheduler thread
    /// has done it (between two steps).
    pub fn slot_action(&self, slot: usize, action: SlotAction) -> Result<SlotReport, SlotError> {
        let n_slots = self.params.n_slots;
        if slot >= n_slots {
            return Err(SlotError::NoSuchSlot { slot, n_slots });
        }
        let queue = self.queue.as_ref().ok_or(SlotError::Stopped)?;
        let (reply, answer) = mpsc::channel();
        let task = slot_files::SlotTask {
            slot,
            action,
            reply,
        };
        queue
            .send(Message::Slot(task))
            .map_err(|_| SlotError::Stopped)?;
        answer.recv().map_err(|_| SlotError::Stopped)?
    }
}

/// Cuts a prompt that does not fit `n_ctx` positions as llama-server does with context shift:
/// the first `n_keep` tokens stay (at most half the context), then whole blocks of half the
/// rest are forgotten from the oldest on until it fits with room to generate. Returns the
/// tokens forgotten.
pub fn fit_prompt(prompt: &mut Vec<TokenId>, n_keep: usize, n_ctx: usize) -> usize {
    let keep = n_keep.min(n_ctx / 2);
    let block = (n_ctx - keep) / 2;
    if prompt.len() < n_ctx || block == 0 {
        return 0;
    }
    let n_erased = (prompt.len() - keep - block) / block * block;
    prompt.drain(keep..keep + n_erased);
    n_erased
}

impl Drop for Scheduler {
    /// Closes the queue and waits for the scheduler thread, which first finishes what it holds.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
