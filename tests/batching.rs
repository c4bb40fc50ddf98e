//! Continuous batching on a real model (Qwen2.5-Coder 0.5B): several requests served at once
//! by one multi-sequence context, each checked by teacher forcing in a fresh context; stop
//! strings, limits, prefix reuse, cancellation and a full queue.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use kolibri::batching::{
    fit_prompt, Completion, Event, EventSink, FinishReason, Request, Scheduler, SchedulerParams,
    SlotAction, SlotError, Speculation, Stats, SubmitError, TokenLogprob,
};
use kolibri::model::ModelError;
use kolibri::model::{Context, ContextParams, KvType, Logits, Model};
use kolibri::sampling::SamplerParams;
use kolibri::tokenizer::TokenId;

const MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

fn model() -> Arc<Model> {
    Arc::new(Model::load(common::model_path(MODEL)).unwrap())
}

fn scheduler(model: &Arc<Model>, n_slots: usize, max_queue: usize) -> Scheduler {
    scheduler_with(model, n_slots, max_queue, None)
}

fn scheduler_with(
    model: &Arc<Model>,
    n_slots: usize,
    max_queue: usize,
    context_shift: Option<usize>,
) -> Scheduler {
    Scheduler::start(
        Arc::clone(model),
        SchedulerParams {
            n_slots,
            n_ctx: 256,
            n_threads: common::threads(),
            n_batch: 64,
            max_queue,
            type_k: KvType::F16,
            type_v: KvType::F16,
            context_shift,
            speculation: Default::default(),
        },
    )
    .unwrap()
}

/// Forwards events to a channel; reports itself closed once `closed` is set.
struct ChannelSink {
    tx: mpsc::Sender<Event>,
    closed: Arc<AtomicBool>,
}

impl EventSink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        self.tx.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

struct Pending {
    rx: mpsc::Receiver<Event>,
    closed: Arc<AtomicBool>,
}

fn submit(
    s: &Scheduler,
    prompt: Vec<TokenId>,
    max_tokens: usize,
    sampling: SamplerParams,
    stop: &[&str],
) -> Result<Pending, SubmitError> {
    submit_logprobs(s, prompt, max_tokens, sampling, stop, None)
}

fn submit_logprobs(
    s: &Scheduler,
    prompt: Vec<TokenId>,
    max_tokens: usize,
    sampling: SamplerParams,
    stop: &[&str],
    logprobs: Option<usize>,
) -> Result<Pending, SubmitError> {
    let (tx, rx) = mpsc::channel();
    let closed = Arc::new(AtomicBool::new(false));
    s.submit(Request {
        prompt,
        max_tokens,
        sampling,
        stop: stop.iter().map(|s| s.to_string()).collect(),
        deadline: None,
        markup: Default::default(),
        sink: Box::new(ChannelSink {
            tx,
            closed: Arc::clone(&closed),
        }),
        logprobs,
        constraint: None,
    })?;
    Ok(Pending { rx, closed })
}

/// Collects a request's text until it ends.
fn wait(p: &Pending) -> Result<(String, Completion), String> {
    wait_with_logprobs(p).map(|(text, c, _)| (text, c))
}

/// Collects a request's text and log-probabilities until it ends; each batch of entries must
/// come right before the text its tokens made.
fn wait_with_logprobs(p: &Pending) -> Result<(String, Completion, Vec<TokenLogprob>), String> {
    let (mut text, mut entries, mut last_was_logprobs) = (String::new(), Vec::new(), false);
    loop {
        match p.rx.recv_timeout(Duration::from_secs(120)).expect("event") {
            Event::Text(t) => {
                assert!(!t.is_empty());
                text.push_str(&t);
                last_was_logprobs = false;
            }
            Event::Logprobs(e) => {
                assert!(
                    !e.is_empty() && !last_was_logprobs,
                    "entries come before their text"
                );
                entries.extend(e);
                last_was_logprobs = true;
            }
            Event::Done(c) => return Ok((text, c, entries)),
            Event::Failed(m) => return Err(m.to_string()),
        }
    }
}

fn prompt(model: &Model, text: &str) -> Vec<TokenId> {
    model.tokenizer.encode(text, true, true)
}

/// Teacher forcing in a fresh single-sequence context: every generated token must be the
/// argmax there, or within 0.25 of it (batched kernels sum in another order, so close calls may
/// legitimately go the other way). A slot that read another slot's cache would fail this.
fn check_greedy(model: &Arc<Model>, prompt: &[TokenId], c: &Completion) {
    let generated = &c.tokens;
    assert_eq!(generated.len(), c.completion_tokens);
    assert!(!generated.is_empty(), "no text generated");
    let mut ctx = Context::new(
        Arc::clone(model),
        &ContextParams {
            n_ctx: 256,
            n_threads: common::threads(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut all = prompt.to_vec();
    all.extend_from_slice(generated);
    let n_vocab = model.hparams.n_vocab;
    // Row i: the logits after prompt + generated[..i], which chose generated[i].
    let logits = ctx
        .eval(&all[..all.len() - 1], Logits::Tail(generated.len()))
        .unwrap();
    for (i, &tok) in generated.iter().enumerate() {
        let row = &logits[i * n_vocab..(i + 1) * n_vocab];
        let best = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert!(
            best - row[tok as usize] < 0.25,
            "step {i}: token {tok} has logit {} vs best {best} in {generated:?}",
            row[tok as usize]
        );
    }
}

#[test]
fn concurrent_requests_each_follow_their_own_prompt() {
    let model = model();
    let s = scheduler(&model, 4, 16);
    let texts = [
        "def fibonacci(n):",
        "The capital of France is",
        "// A C function that reverses a string\n",
        "Water boils at",
        "import numpy as np\n",
        "1, 2, 3, 4,",
    ];
    let prompts: Vec<Vec<TokenId>> = texts.iter().map(|t| prompt(&model, t)).collect();
    // Six requests, four slots: two wait and join the running batch as slots free up.
    let pending: Vec<Pending> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| submit(&s, p.clone(), 12 + 3 * i, SamplerParams::greedy(), &[]).unwrap())
        .collect();
    for (i, p) in pending.iter().enumerate() {
        let (text, c) = wait(p).unwrap();
        assert_eq!(c.prompt_tokens, prompts[i].len());
        assert!(c.completion_tokens <= 12 + 3 * i);
        if c.finish == FinishReason::Length {
            assert_eq!(c.completion_tokens, 12 + 3 * i);
        }
        assert_eq!(text, model.tokenizer.decode(&c.tokens));
        check_greedy(&model, &prompts[i], &c);
    }
    let stats = s.stats();
    assert_eq!(Stats::get(&stats.requests_finished), 6);
    assert_eq!(Stats::get(&stats.slots_busy), 0);
    assert_eq!(Stats::get(&stats.queue_depth), 0);
    // Tokens of several sequences shared forward passes.
    assert!(Stats::get(&stats.forward_tokens) > Stats::get(&stats.forward_passes) * 2);
}

#[test]
fn stop_strings_limits_prefix_reuse_and_cancellation() {
    let model = model();
    let s = scheduler(&model, 2, 2);
    let counting = prompt(&model, "1, 2, 3, 4, 5, 6,");

    // A stop string ends generation before it; the text never contains it.
    let p = submit(&s, counting.clone(), 40, SamplerParams::greedy(), &[" 9"]).unwrap();
    let (text, c) = wait(&p).unwrap();
    assert_eq!(c.finish, FinishReason::Stop, "{text:?}");
    assert!(!text.contains(" 9") && text.contains('8'), "{text:?}");

    // The same prompt again reuses the slot's cached prefix (all but the last token).
    let p = submit(&s, counting.clone(), 3, SamplerParams::greedy(), &[]).unwrap();
    let (_, c) = wait(&p).unwrap();
    assert_eq!(c.cached_tokens, counting.len() - 1);
    assert_eq!((c.finish, c.completion_tokens), (FinishReason::Length, 3));

    // Sampled generation with a seed is reproducible. (The first run fills the cache; the two
    // compared runs then both reuse it: evaluating a prompt in another split changes logits in
    // the last bits, which a sampled draw may amplify.)
    let sampled = SamplerParams {
        temperature: 0.9,
        seed: 7,
        ..SamplerParams::default()
    };
    let story = prompt(&model, "Once upon a time");
    wait(&submit(&s, story.clone(), 1, sampled.clone(), &[]).unwrap()).unwrap();
    let a = wait(&submit(&s, story.clone(), 16, sampled.clone(), &[]).unwrap()).unwrap();
    let b = wait(&submit(&s, story.clone(), 16, sampled.clone(), &[]).unwrap()).unwrap();
    assert_eq!(a.1.cached_tokens, story.len() - 1);
    assert_eq!(a.0, b.0);
    let other_seed = SamplerParams { seed: 8, ..sampled };
    let c = wait(&submit(&s, story.clone(), 16, other_seed, &[]).unwrap()).unwrap();
    assert_ne!(a.0, c.0);

    // A client that goes away is dropped at the next step and frees its slot.
    let long = submit(&s, story.clone(), 200, SamplerParams::greedy(), &[]).unwrap();
    match long.rx.recv_timeout(Duration::from_secs(60)).unwrap() {
        Event::Text(_) => long.closed.store(true, Ordering::Relaxed),
        e => panic!("{e:?}"),
    }
    let started = Instant::now();
    let next = submit(&s, story.clone(), 2, SamplerParams::greedy(), &[]).unwrap();
    let next2 = submit(&s, counting.clone(), 2, SamplerParams::greedy(), &[]).unwrap();
    wait(&next).unwrap();
    wait(&next2).unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(Stats::get(&s.stats().requests_cancelled), 1);

    // Bad requests are refused at the door.
    assert_eq!(
        submit(&s, vec![], 4, SamplerParams::greedy(), &[]).err(),
        Some(SubmitError::EmptyPrompt)
    );
    assert!(matches!(
        submit(&s, vec![1; 256], 4, SamplerParams::greedy(), &[]).err(),
        Some(SubmitError::PromptTooLong { .. })
    ));
    assert!(matches!(
        submit(&s, vec![u32::MAX], 4, SamplerParams::greedy(), &[]).err(),
        Some(SubmitError::InvalidToken { .. })
    ));
    // max_tokens is capped by the slot's context: a 250-token prompt leaves 6.
    let (_, c) =
        wait(&submit(&s, vec![16; 250], 100, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert_eq!((c.finish, c.completion_tokens), (FinishReason::Length, 6));
}

#[test]
fn a_full_queue_refuses_and_a_deadline_cancels() {
    let model = model();
    let s = scheduler(&model, 1, 1);
    let story = prompt(&model, "Once upon a time");
    // One request runs, one waits; the third finds the queue full.
    let running = submit(&s, story.clone(), 64, SamplerParams::greedy(), &[]).unwrap();
    match running.rx.recv_timeout(Duration::from_secs(60)).unwrap() {
        Event::Text(_) => {}
        e => panic!("{e:?}"),
    }
    let waiting = submit(&s, story.clone(), 2, SamplerParams::greedy(), &[]).unwrap();
    assert!(matches!(
        submit(&s, story.clone(), 2, SamplerParams::greedy(), &[]).err(),
        Some(SubmitError::QueueFull { max_queue: 1 })
    ));
    wait(&running).unwrap();
    wait(&waiting).unwrap();
    // A deadline in the past fails the request with a message instead of generating.
    let (tx, rx) = mpsc::channel();
    s.submit(Request {
        prompt: story,
        max_tokens: 50,
        sampling: SamplerParams::greedy(),
        stop: vec![],
        deadline: Some(Instant::now()),
        markup: Default::default(),
        sink: Box::new(ChannelSink {
            tx,
            closed: Arc::new(AtomicBool::new(false)),
        }),
        logprobs: None,
        constraint: None,
    })
    .unwrap();
    let p = Pending {
        rx,
        closed: Arc::new(AtomicBool::new(false)),
    };
    assert!(wait(&p).unwrap_err().contains("time limit"));
}

/// Panics on its first text, like a buggy host callback.
struct PanickingSink;

impl EventSink for PanickingSink {
    fn send(&mut self, event: Event) -> bool {
        if let Event::Text(_) = event {
            panic!("a sink that panics");
        }
        true
    }
}

#[test]
fn a_panic_in_a_step_fails_the_requests_in_flight_and_the_scheduler_goes_on() {
    let model = model();
    let s = scheduler(&model, 2, 4);
    let story = prompt(&model, "Once upon a time");
    let other = submit(&s, story.clone(), 40, SamplerParams::greedy(), &[]).unwrap();
    s.submit(Request {
        prompt: prompt(&model, "The capital of France is"),
        max_tokens: 8,
        sampling: SamplerParams::greedy(),
        stop: vec![],
        deadline: None,
        markup: Default::default(),
        sink: Box::new(PanickingSink),
        logprobs: None,
        constraint: None,
    })
    .unwrap();
    // The request that shared the step fails with an engine error (or finished before it).
    if let Err(m) = wait(&other) {
        assert!(m.contains("internal error"), "{m}");
    }
    // The scheduler still serves, from a clean cache.
    let (text, c) =
        wait(&submit(&s, story.clone(), 6, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert_eq!((c.completion_tokens, c.cached_tokens), (6, 0));
    check_greedy(&model, &story, &c);
    assert!(!text.is_empty());
    assert_eq!(Stats::get(&s.stats().slots_busy), 0);
}

/// With context shift a request generates past its slot's 256 positions (the slot forgets the
/// older half after its first 4 tokens, twice here), while a short request in the other slot
/// still gives exactly its greedy continuation; with nothing left to forget, the request ends
/// at the context with `Length`.
#[test]
fn context_shift_lets_a_request_outgrow_its_slot() {
    let model = model();
    let s = scheduler_with(&model, 2, 4, Some(4));
    let long = submit(&s, vec![16; 250], 300, SamplerParams::greedy(), &[]).unwrap();
    let story = prompt(&model, "Once upon a time");
    let short = submit(&s, story.clone(), 24, SamplerParams::greedy(), &[]).unwrap();
    let (_, c) = wait(&long).unwrap();
    assert_eq!((c.finish, c.completion_tokens), (FinishReason::Length, 300));
    let (_, c2) = wait(&short).unwrap();
    check_greedy(&model, &story, &c2);
    assert_eq!(Stats::get(&s.stats().context_shifts), 3);

    let keep_all = scheduler_with(&model, 1, 1, Some(1000));
    let (_, c) =
        wait(&submit(&keep_all, vec![16; 250], 100, SamplerParams::greedy(), &[]).unwrap())
            .unwrap();
    // The seventh token fills no position: it was sampled from the last position's logits.
    assert_eq!((c.finish, c.completion_tokens), (FinishReason::Length, 7));
    assert_eq!(Stats::get(&keep_all.stats().context_shifts), 0);
}

/// A slot saved to a file after a request is restored into another server's slot: the same
/// prompt then reuses all of it but its last token and generates the same text. Unknown
/// slots, busy slots, missing and corrupted files are refused; the slot keeps working.
#[test]
fn slots_save_and_restore() {
    let model = model();
    let dir = std::env::temp_dir().join(format!("kolibri-slots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("slot0.state");
    let p = prompt(&model, "fn main() { println!(\"hello\"); }");

    let a = scheduler(&model, 1, 4);
    let (text, c) =
        wait(&submit(&a, p.clone(), 12, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    let saved = a.slot_action(0, SlotAction::Save(file.clone())).unwrap();
    // The last generated token was sampled, never evaluated.
    assert_eq!(saved.n_tokens, p.len() + c.completion_tokens - 1);
    assert_eq!(saved.n_bytes, std::fs::metadata(&file).unwrap().len());

    let b = scheduler(&model, 1, 4);
    let restored = b.slot_action(0, SlotAction::Restore(file.clone())).unwrap();
    assert_eq!(restored.n_tokens, saved.n_tokens);
    let (text2, c2) =
        wait(&submit(&b, p.clone(), 12, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert_eq!(c2.cached_tokens, p.len() - 1);
    assert_eq!((text2, c2.tokens), (text, c.tokens));

    assert!(matches!(
        b.slot_action(3, SlotAction::Erase),
        Err(SlotError::NoSuchSlot {
            slot: 3,
            n_slots: 1
        })
    ));
    let missing = b.slot_action(0, SlotAction::Restore(dir.join("missing")));
    assert!(
        matches!(missing, Err(SlotError::State(ModelError::Io(_)))),
        "{missing:?}"
    );
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 4;
    std::fs::write(dir.join("bad"), &bytes).unwrap();
    let bad = b.slot_action(0, SlotAction::Restore(dir.join("bad")));
    assert!(
        matches!(bad, Err(SlotError::State(ModelError::BadState(_)))),
        "{bad:?}"
    );
    // The refused restore left the slot as it was: the prompt is still cached.
    let (_, c3) = wait(&submit(&b, p.clone(), 2, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert_eq!(c3.cached_tokens, p.len() - 1);

    let long = submit(&b, p.clone(), 200, SamplerParams::greedy(), &[]).unwrap();
    let busy = b.slot_action(0, SlotAction::Erase);
    assert!(matches!(busy, Err(SlotError::Busy { slot: 0 })), "{busy:?}");
    wait(&long).unwrap();
    let erased = b.slot_action(0, SlotAction::Erase).unwrap();
    assert!(erased.n_tokens > p.len());
    let (_, c4) = wait(&submit(&b, p.clone(), 2, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert_eq!(c4.cached_tokens, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With context shift a prompt longer than the slot is cut to fit (its first tokens and its
/// most recent ones stay) and answered; without it, it is refused.
#[test]
fn context_shift_fits_a_long_prompt() {
    for n_ctx in [16, 64, 256] {
        for len in [n_ctx - 1, n_ctx, n_ctx + 1, 3 * n_ctx + 7, 10 * n_ctx] {
            for n_keep in [0, 4, n_ctx] {
                let original: Vec<TokenId> = (0..len as u32).collect();
                let mut p = original.clone();
                let dropped = fit_prompt(&mut p, n_keep, n_ctx);
                assert_eq!(p.len() + dropped, len);
                let keep = n_keep.min(n_ctx / 2);
                if len < n_ctx {
                    assert_eq!(dropped, 0);
                    continue;
                }
                // Fits with room for at least a quarter of the context to generate into.
                assert!(
                    p.len() < n_ctx && p.len() >= keep + (n_ctx - keep) / 2,
                    "{n_ctx} {len}"
                );
                assert_eq!(&p[..keep], &original[..keep]);
                assert_eq!(&p[keep..], &original[len - (p.len() - keep)..]);
            }
        }
    }
    let model = model();
    let long: Vec<TokenId> = prompt(&model, &"The sea was calm that night. ".repeat(60));
    assert!(long.len() > 256, "{}", long.len());
    let s = scheduler_with(&model, 1, 1, Some(4));
    let (_, c) = wait(&submit(&s, long.clone(), 8, SamplerParams::greedy(), &[]).unwrap()).unwrap();
    assert!(c.prompt_tokens < 256 && c.completion_tokens == 8, "{c:?}");
    let refused = submit(
        &scheduler(&model, 1, 1),
        long,
        8,
        SamplerParams::greedy(),
        &[],
    );
    assert!(matches!(refused, Err(SubmitError::PromptTooLong { .. })));
}

/// Prompt lookup in the scheduler: two requests served at once, each slot drafting from its
/// own text; greedy output (text and tokens) is what the scheduler gives without lookup, in
/// fewer forward passes, and the metrics count the drafts.
#[test]
fn prompt_lookup_drafts_per_slot_and_keeps_greedy_output() {
    let model = model();
    let code = "Repeat this code exactly:\ndef add(a, b):\n    return a + b\n\n\
                def sub(a, b):\n    return a - b\n\ndef mul(a, b):\n";
    let prompts = [
        prompt(&model, code),
        prompt(&model, "The capital of France is"),
    ];
    let run = |lookup: bool| {
        let s = Scheduler::start(Arc::clone(&model), spec_params(2, None, lookup)).unwrap();
        serve_all(&s, &prompts, 48)
    };
    let (plain, [plain_passes, plain_drafted, _]) = run(false);
    let (fast, [passes, drafted, accepted]) = run(true);
    assert_eq!(plain_drafted, 0);
    for ((pt, pc), (ft, fc)) in plain.iter().zip(&fast) {
        assert_eq!(fc.tokens, pc.tokens);
        assert_eq!(ft, pt);
        assert_eq!(fc.finish, pc.finish);
    }
    assert!(
        accepted > 0 && accepted <= drafted,
        "{accepted} of {drafted}"
    );
    assert!(
        passes < plain_passes,
        "{passes} passes, {plain_passes} without lookup"
    );
}

/// A draft model in the scheduler (Qwen2.5-Coder 0.5B drafting for the 1.5B): three requests
/// at once, one prompt longer than a batch (the draft catches it up over several steps);
/// greedy output is what the scheduler gives without speculation, in fewer forward passes.
#[test]
fn a_shared_draft_model_keeps_greedy_output() {
    let target = Arc::new(Model::load(common::model_path(TARGET_15B)).unwrap());
    let draft = model();
    let long = "Explain what this does, then write it in Rust:\n".to_string()
        + &"def add(a, b):\n    return a + b\n\n".repeat(8);
    let prompts = [
        prompt(&target, &long),
        prompt(&target, "fn fibonacci(n: u64) -> u64 {"),
        prompt(&target, "The capital of France is"),
    ];
    assert!(
        prompts[0].len() > 64,
        "the first prompt fills more than a batch"
    );
    let run = |draft_model: Option<Arc<Model>>| {
        let s = Scheduler::start(Arc::clone(&target), spec_params(3, draft_model, false)).unwrap();
        serve_all(&s, &prompts, 40)
    };
    let (plain, [plain_passes, ..]) = run(None);
    let (fast, [passes, drafted, accepted]) = run(Some(draft));
    for ((pt, pc), (ft, fc)) in plain.iter().zip(&fast) {
        assert_eq!(fc.tokens, pc.tokens);
        assert_eq!(ft, pt);
    }
    assert!(
        accepted > 0 && accepted <= drafted,
        "{accepted} of {drafted}"
    );
    assert!(
        passes < plain_passes,
        "{passes} passes, {plain_passes} without a draft"
    );
}

/// A draft model that cannot draft for the target is refused when the scheduler starts.
#[test]
fn an_unusable_draft_model_is_refused_at_start() {
    let small = model();
    let other_vocab = Arc::new(Model::load(common::model_path(GEMMA)).unwrap());
    let refusal = |target: &Arc<Model>, draft: &Arc<Model>| {
        let params = spec_params(2, Some(Arc::clone(draft)), true);
        match Scheduler::start(Arc::clone(target), params) {
            Err(e) => e.to_string(),
            Ok(_) => panic!(
                "{} drafting for {}",
                draft.display_name(),
                target.display_name()
            ),
        }
    };
    let e = refusal(&small, &other_vocab);
    assert!(e.contains("vocabulary"), "{e}");
    let e = refusal(&small, &small);
    assert!(e.contains("a draft must be smaller"), "{e}");
}

/// The model's own multi-token-prediction block drafting for four slots at once. On the
/// random Qwen3.5 file its drafts are mostly rejected, so the hybrid model's recurrent states
/// are rewound at almost every step; on the agreeing file (each draft right with probability
/// 0.9) most are accepted. Greedy output is what the scheduler gives without speculation, in a
/// first round and in a second that reuses the slots' cached prompts as far as without the
/// block (a recurrent state rewinds only to checkpoints: the block must not ask for one token
/// more); with lookup too.
#[test]
fn the_models_own_block_drafts_for_every_slot() {
    let texts = [
        "Once upon a time",
        "The capital of France is",
        "fn main() {",
        "One, two, three, four, five",
    ];
    for (name, agrees) in [("qwen35-mtp-tiny", false), ("qwen35-mtp-agree-tiny", true)] {
        let path = common::synthetic::synthetic_path(name);
        let options = kolibri::model::LoadOptions {
            mtp: true,
            ..Default::default()
        };
        let model = Arc::new(Model::load_with(&path, &mut { options }).unwrap());
        let prompts: Vec<Vec<TokenId>> = texts.iter().map(|t| prompt(&model, t)).collect();
        let run = |mtp: bool, lookup: bool| {
            let mut params = spec_params(4, None, lookup);
            params.speculation.mtp = mtp;
            let s = Scheduler::start(Arc::clone(&model), params).unwrap();
            let first = serve_all(&s, &prompts, 32);
            let second = serve_all(&s, &prompts, 32);
            (first.0, second)
        };
        let (plain, (plain_again, [plain_passes, ..])) = run(false, false);
        for (mtp, lookup) in [(true, false), (true, true)] {
            let (fast, (fast_again, [passes, drafted, accepted])) = run(mtp, lookup);
            for (want, got) in plain
                .iter()
                .chain(&plain_again)
                .zip(fast.iter().chain(&fast_again))
            {
                assert_eq!(got.1.tokens, want.1.tokens, "{name}, lookup {lookup}");
                assert_eq!(got.0, want.0);
                assert_eq!(
                    got.1.cached_tokens, want.1.cached_tokens,
                    "{name}: prefix reuse"
                );
            }
            assert!(drafted > 0, "{name}: nothing drafted");
            if agrees {
                let rate = accepted as f64 / drafted as f64;
                assert!(rate > 0.5, "{name}: {accepted} of {drafted} accepted");
                assert!(
                    passes < plain_passes,
                    "{name}: {passes} passes, {plain_passes} without drafting"
                );
            }
        }
    }
}

const TARGET_15B: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// Greedy completions of `prompts`, submitted at once, and the scheduler's forward passes,
/// drafted and accepted tokens.
fn serve_all(
    s: &Scheduler,
    prompts: &[Vec<TokenId>],
    max_tokens: usize,
) -> (Vec<(String, Completion)>, [u64; 3]) {
    let pending: Vec<Pending> = (prompts.iter())
        .map(|p| submit(s, p.clone(), max_tokens, SamplerParams::greedy(), &[]).unwrap())
        .collect();
    let done = pending.iter().map(|p| wait(p).unwrap()).collect();
    let stats = s.stats();
    let counts = [
        Stats::get(&stats.forward_passes),
        Stats::get(&stats.drafted_tokens),
        Stats::get(&stats.accepted_tokens),
    ];
    (done, counts)
}

fn spec_params(n_slots: usize, draft_model: Option<Arc<Model>>, lookup: bool) -> SchedulerParams {
    SchedulerParams {
        n_slots,
        n_ctx: 256,
        n_threads: common::threads(),
        n_batch: 64,
        max_queue: 4,
        type_k: KvType::F16,
        type_v: KvType::F16,
        context_shift: None,
        speculation: Speculation {
            max_draft: 16,
            lookup,
            draft_model,
            draft_p_min: 0.3,
            ..Speculation::default()
        },
    }
}

#[test]
fn logprobs_travel_with_their_text_and_follow_the_model() {
    let model = model();
    let s = scheduler(&model, 2, 1);
    let story = prompt(&model, "Once upon a time");
    let p = submit_logprobs(&s, story.clone(), 24, SamplerParams::greedy(), &[], Some(3)).unwrap();
    let (text, c, entries) = wait_with_logprobs(&p).unwrap();
    let generated: Vec<TokenId> = c
        .tokens
        .iter()
        .copied()
        .filter(|&t| !model.tokenizer.is_eog(t))
        .collect();
    assert_eq!(
        entries.iter().map(|e| e.token).collect::<Vec<_>>(),
        generated
    );
    assert_eq!(model.tokenizer.decode(&generated), text);
    for e in &entries {
        assert_eq!(e.top.len(), 3);
        assert!(e.top.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        // Greedy without penalties picks the model's most likely token.
        assert_eq!(e.top[0].0, e.token);
        assert!((e.top[0].1 - e.logprob).abs() < 1e-6 && e.logprob <= 0.0);
    }
    // A stop string's tokens are not reported: the entries cover the text released.
    let cut = &text[..text.len() / 2];
    let stop = text[cut.len()..].chars().take(3).collect::<String>();
    let p = submit_logprobs(&s, story, 24, SamplerParams::greedy(), &[&stop], Some(0)).unwrap();
    let (short, _, entries) = wait_with_logprobs(&p).unwrap();
    let reported: Vec<TokenId> = entries.iter().map(|e| e.token).collect();
    assert!(model.tokenizer.decode(&reported).len() <= short.len());
    assert!(entries.iter().all(|e| e.top.is_empty()));
    assert!(!entries.is_empty());
}

/// A request with its own channel, for a group.
fn request(prompt: Vec<TokenId>, max_tokens: usize, sampling: SamplerParams) -> (Request, Pending) {
    let (tx, rx) = mpsc::channel();
    let closed = Arc::new(AtomicBool::new(false));
    let req = Request {
        prompt,
        max_tokens,
        sampling,
        stop: Vec::new(),
        deadline: None,
        markup: Default::default(),
        sink: Box::new(ChannelSink {
            tx,
            closed: Arc::clone(&closed),
        }),
        logprobs: None,
        constraint: None,
    };
    (req, Pending { rx, closed })
}

#[test]
fn a_group_of_choices_reads_its_prompt_once_and_each_choice_matches_a_lone_run() {
    let model = model();
    let s = scheduler(&model, 3, 4);
    let story = prompt(&model, "Once upon a time, in a village by the sea,");
    let sampling = |seed| SamplerParams {
        temperature: 0.9,
        seed,
        ..SamplerParams::default()
    };
    let (reqs, pending): (Vec<_>, Vec<_>) = (1..=3)
        .map(|seed| request(story.clone(), 12, sampling(seed)))
        .unzip();
    let read_before = Stats::get(&s.stats().prompt_tokens);
    s.submit_group(reqs).unwrap();
    let choices: Vec<(String, Completion)> = pending.iter().map(|p| wait(p).unwrap()).collect();
    let read = Stats::get(&s.stats().prompt_tokens) - read_before;
    assert_eq!(
        read,
        story.len() as u64,
        "the prompt is evaluated once for the group"
    );
    for (c, _) in &choices {
        assert!(!c.is_empty());
    }
    assert!(
        choices[0].0 != choices[1].0 || choices[1].0 != choices[2].0,
        "different seeds, different choices: {choices:?}"
    );
    for (i, (text, done)) in choices.iter().enumerate() {
        assert_eq!(done.prompt_tokens, story.len());
        // The same seed alone (the cache from scratch) gives the same choice.
        let alone = scheduler(&model, 1, 1);
        let p = submit(&alone, story.clone(), 12, sampling(i as u64 + 1), &[]).unwrap();
        assert_eq!(&wait(&p).unwrap().0, text, "choice {i}");
    }
    let too_many = (0..4)
        .map(|_| request(story.clone(), 4, sampling(1)).0)
        .collect();
    assert!(matches!(
        s.submit_group(too_many),
        Err(SubmitError::InvalidGroup(_))
    ));
    let other = vec![
        request(story.clone(), 4, sampling(1)).0,
        request(prompt(&model, "Hello"), 4, sampling(1)).0,
    ];
    assert!(matches!(
        s.submit_group(other),
        Err(SubmitError::InvalidGroup(_))
    ));
}
