//! Speculative decoding: greedy output token for token that of plain decoding (prompt lookup
//! and a draft model), the target's sampling distribution kept exactly, bad drafts refused,
//! and a cancelled step leaving both caches usable.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kolibri::model::{Context, ContextParams, KvType, Logits, Model, ModelError};
use kolibri::quant::GgmlType;
use kolibri::sampling::{Sampler, SamplerParams};
use kolibri::speculative::{
    DraftRequest, Drafter, LookupDrafter, LookupThenModel, ModelDrafter, SharedDrafter, SpecStats,
    Speculator,
};
use serde_json::Value;

const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";
const QWEN_05B: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const QWEN_15B: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const N_NEW: usize = 48;
const EDIT_PROMPT: &str = "Rewrite this function to use a loop instead of recursion, keep the \
                           names:\ndef fibonacci(n):\n    if n <= 1:\n        return n\n    \
                           return fibonacci(n - 1) + fibonacci(n - 2)\n";

fn load(file: &str) -> Arc<Model> {
    Arc::new(Model::load(common::model_path(file)).unwrap())
}

fn context(model: &Arc<Model>) -> Context {
    context_with_keys(model, KvType::F16)
}

fn context_with_keys(model: &Arc<Model>, type_k: KvType) -> Context {
    let params = ContextParams {
        n_ctx: 512,
        n_threads: common::threads(),
        type_k,
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

/// The prompts of the model's llama.cpp reference cases, and the edit prompt.
fn prompts(reference: &str) -> Vec<String> {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(common::data_path(reference)).unwrap())
            .unwrap();
    let mut p: Vec<String> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["prompt"].as_str().unwrap().to_owned())
        .collect();
    p.push(EDIT_PROMPT.into());
    p
}

/// `n` tokens after `prompt` (stopping at end of generation), plainly or speculating with
/// `drafter`, and what speculation achieved.
fn generate(
    ctx: &mut Context,
    prompt: &str,
    n: usize,
    params: SamplerParams,
    mut drafter: Option<&mut dyn Drafter>,
) -> (Vec<u32>, SpecStats) {
    let model = Arc::clone(ctx.model());
    let mut sampler = Sampler::new(params).unwrap();
    let tokens = model.tokenizer.encode(prompt, true, true);
    let logits = ctx.eval(&tokens, Logits::Last).unwrap();
    let mut out = vec![sampler.sample(&logits)];
    sampler.accept(out[0]);
    let mut speculator = drafter.as_deref().map(|d| Speculator::new(d, 16));
    while out.len() < n && !model.tokenizer.is_eog(*out.last().unwrap()) {
        let last = *out.last().unwrap();
        let new = match (drafter.as_deref_mut(), &mut speculator) {
            (Some(d), Some(s)) => s.step(d, ctx, 0, last, &mut sampler).unwrap(),
            _ => {
                let l = ctx.eval(&[last], Logits::Last).unwrap();
                let t = sampler.sample(&l);
                sampler.accept(t);
                vec![t]
            }
        };
        out.extend(new);
    }
    out.truncate(n);
    (out, speculator.map(|s| s.stats()).unwrap_or_default())
}

fn greedy(ctx: &mut Context, prompt: &str, drafter: Option<&mut dyn Drafter>) -> Vec<u32> {
    greedy_stats(ctx, prompt, drafter).0
}

fn greedy_stats(
    ctx: &mut Context,
    prompt: &str,
    drafter: Option<&mut dyn Drafter>,
) -> (Vec<u32>, SpecStats) {
    generate(ctx, prompt, N_NEW, SamplerParams::greedy(), drafter)
}

#[test]
fn greedy_with_prompt_lookup_is_plain_greedy() {
    for (file, reference) in [
        (GEMMA, "greedy-gemma-3-270m.json"),
        (QWEN_05B, "greedy-qwen2.5-coder-0.5b.json"),
        (QWEN_15B, "greedy-qwen2.5-coder-1.5b.json"),
    ] {
        let model = load(file);
        let mut drafted = 0;
        for prompt in prompts(reference) {
            let plain = greedy(&mut context(&model), &prompt, None);
            let mut lookup = LookupDrafter::new(1, 4);
            let (fast, stats) = greedy_stats(&mut context(&model), &prompt, Some(&mut lookup));
            assert_eq!(fast, plain, "{file}, prompt {prompt:?}");
            drafted += stats.drafted;
        }
        assert!(drafted > 0, "{file}: lookup never drafted");
    }
}

/// Over quantized keys a query reads its own group of keys in f16 (`kv_cache::recent`):
/// verify batches, rewinds and single tokens must all see the same keys.
#[test]
fn greedy_with_prompt_lookup_over_4_bit_keys_is_plain_greedy() {
    let model = load(QWEN_05B);
    let mut drafted = 0;
    for prompt in prompts("greedy-qwen2.5-coder-0.5b.json") {
        let plain = greedy(&mut context_with_keys(&model, KvType::Q4_0), &prompt, None);
        let mut lookup = LookupDrafter::new(1, 4);
        let mut ctx = context_with_keys(&model, KvType::Q4_0);
        let (fast, stats) = greedy_stats(&mut ctx, &prompt, Some(&mut lookup));
        assert_eq!(fast, plain, "prompt {prompt:?}");
        drafted += stats.drafted;
    }
    assert!(drafted > 0, "lookup never drafted");
}

#[test]
fn greedy_with_a_draft_model_is_plain_greedy() {
    let (target, draft) = (load(QWEN_15B), load(QWEN_05B));
    for prompt in prompts("greedy-qwen2.5-coder-1.5b.json") {
        let plain = greedy(&mut context(&target), &prompt, None);
        let mut ctx = context(&target);
        let mut drafter = ModelDrafter::new(&ctx, context(&draft), 0, 0.3).unwrap();
        let (fast, s) = greedy_stats(&mut ctx, &prompt, Some(&mut drafter));
        assert_eq!(fast, plain, "prompt {prompt:?}");
        assert!(s.accepted > 0 && s.tokens_per_pass() > 1.0, "{s:?}");
        // Lookup first, the draft model when lookup has nothing.
        let mut ctx = context(&target);
        let model = ModelDrafter::new(&ctx, context(&draft), 0, 0.3).unwrap();
        let mut both = LookupThenModel::new(LookupDrafter::new(1, 4), model);
        let (fast, s) = greedy_stats(&mut ctx, &prompt, Some(&mut both));
        assert_eq!(fast, plain, "lookup then draft, prompt {prompt:?}");
        assert!(s.accepted > 0, "{s:?}");
    }
}

/// A draft whose output head is requantized to 4 bits ranks tokens as the original does almost
/// everywhere, streams less, and drafting with it still gives plain greedy output.
#[test]
fn a_draft_head_in_4_bits_ranks_as_the_original_and_stays_exact() {
    let original = load(QWEN_05B);
    let mut requantized = Model::load(common::model_path(QWEN_05B)).unwrap();
    let head_bytes = |m: &Model| -> usize {
        let out = &m.weights.output;
        out.resident_bytes(&m.gguf).iter().map(|a| a.len()).sum()
    };
    let before = head_bytes(&requantized);
    if !requantized.requantize_head_for_drafting() {
        // Only where Q4_0 is repacked (x86-64, repacking on).
        assert!(!kolibri::kernels::MatmulPlan::would_repack(
            GgmlType::Q4_0,
            requantized.hparams.n_embd
        ));
        return;
    }
    let requantized = Arc::new(requantized);
    let out = &requantized.weights.output;
    assert_eq!(out.ty, GgmlType::Q4_0);
    let after = head_bytes(&requantized);
    assert!(after * 10 < before * 6, "head {before} -> {after} bytes");

    let tokens = original.tokenizer.encode(EDIT_PROMPT, true, true);
    let top = |m: &Arc<Model>| -> Vec<u32> {
        let logits = context(m).eval(&tokens, Logits::All).unwrap();
        let v = m.hparams.n_vocab;
        logits.chunks(v).map(kolibri::sampling::argmax).collect()
    };
    let (a, b) = (top(&original), top(&requantized));
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(
        same * 10 >= a.len() * 9,
        "{same} of {} top tokens agree",
        a.len()
    );

    let target = load(QWEN_15B);
    let plain = greedy(&mut context(&target), EDIT_PROMPT, None);
    let mut ctx = context(&target);
    let mut drafter = ModelDrafter::new(&ctx, context(&requantized), 0, 0.3).unwrap();
    let (fast, s) = greedy_stats(&mut ctx, EDIT_PROMPT, Some(&mut drafter));
    assert_eq!(fast, plain);
    assert!(s.accepted > 0 && s.tokens_per_pass() > 1.0, "{s:?}");
}

/// Pearson's chi-square of `counts` against probabilities `p` (bins expecting fewer than 5
/// pooled), and its degrees of freedom.
fn chi_square(counts: &[u64], p: &[f64]) -> (f64, usize) {
    let n: u64 = counts.iter().sum();
    let (mut stat, mut bins) = (0.0, 0);
    let (mut pooled_obs, mut pooled_exp) = (0.0, 0.0);
    for (&c, &pi) in counts.iter().zip(p) {
        let e = pi * n as f64;
        if e < 5.0 {
            (pooled_obs, pooled_exp) = (pooled_obs + c as f64, pooled_exp + e);
        } else {
            stat += (c as f64 - e).powi(2) / e;
            bins += 1;
        }
    }
    if pooled_exp > 0.0 {
        stat += (pooled_obs - pooled_exp).powi(2) / pooled_exp.max(1e-9);
        bins += 1;
    }
    (stat, bins - 1)
}

/// The chi-square value a correct sampler exceeds with probability 0.001 (Wilson-Hilferty).
fn critical(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.09;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// At temperature 0.8 the token verified against a draft follows the target's distribution,
/// whether the draft is its likeliest token or a less likely one, as plain sampling does;
/// a verifier that trusted the draft would fail the same test.
#[test]
fn verified_tokens_keep_the_target_distribution() {
    let model = load(QWEN_05B);
    let logits = context(&model)
        .eval(&model.tokenizer.encode("def", true, true), Logits::Last)
        .unwrap();
    let params = |seed| SamplerParams {
        temperature: 0.8,
        seed,
        ..SamplerParams::default()
    };
    let mut cands = Sampler::new(params(0))
        .unwrap()
        .candidates(&logits)
        .to_vec();
    cands.sort_by(|a, b| b.p.total_cmp(&a.p));
    assert!(
        cands.len() >= 3,
        "too few candidates to test: {}",
        cands.len()
    );
    let ids: Vec<u32> = cands.iter().map(|c| c.id).collect();
    let p: Vec<f64> = cands.iter().map(|c| c.p as f64).collect();
    let bin = |t: u32| ids.iter().position(|&i| i == t).unwrap();
    let n_seeds = 4000u64;
    let tally = |f: &dyn Fn(&mut Sampler) -> u32| {
        let mut counts = vec![0u64; ids.len()];
        for seed in 0..n_seeds {
            counts[bin(f(&mut Sampler::new(params(seed)).unwrap()))] += 1;
        }
        counts
    };
    let plain = tally(&|s| s.sample(&logits));
    let (stat, df) = chi_square(&plain, &p);
    assert!(stat < critical(df), "plain sampling: chi2 {stat} df {df}");
    for draft in [ids[0], ids[1], ids[ids.len() - 1]] {
        let verified = tally(&|s| s.sample_given_draft(&logits, draft));
        let (stat, df) = chi_square(&verified, &p);
        assert!(stat < critical(df), "draft {draft}: chi2 {stat} df {df}");
    }
    // Power: always keeping a middling draft is caught.
    let trusting = tally(&|_| ids[1]);
    let (stat, df) = chi_square(&trusting, &p);
    assert!(
        stat > critical(df),
        "a trusting verifier passed: chi2 {stat}"
    );
}

/// The model's own multi-token-prediction block at temperature 0.8, on a Qwen3.5 file whose
/// block drafts the target's likeliest token, which has about 0.7 of its probability: the
/// first token a step returns, checked against the block's draft, follows the target's
/// distribution, as plain sampling does; over the seeds the draft is kept and rejected alike.
#[test]
fn verified_tokens_keep_the_target_distribution_with_the_models_own_block() {
    use kolibri::model::LoadOptions;
    use kolibri::speculative::MtpDrafter;

    let path = common::synthetic::synthetic_path("qwen35-mtp-agree-warm-tiny");
    let mut options = LoadOptions {
        mtp: true,
        ..Default::default()
    };
    let model = Arc::new(Model::load_with(&path, &mut options).unwrap());
    own_drafter_keeps_the_distribution(&model, |ctx| MtpDrafter::new(ctx).unwrap());
}

/// The same with Gemma 4's assistant, on a pair built the same way.
#[test]
fn verified_tokens_keep_the_target_distribution_with_the_assistant() {
    use kolibri::model::{Assistant, LoadOptions};
    use kolibri::speculative::MtpDrafter;

    let target = common::synthetic::synthetic_path("gemma4-agree-warm-tiny");
    let model = Arc::new(Model::load(&target).unwrap());
    let path = common::synthetic::synthetic_path("gemma4-assistant-agree-warm-tiny");
    let assistant = Assistant::load(&path, &model, &mut LoadOptions::default()).unwrap();
    let assistant = Arc::new(assistant);
    own_drafter_keeps_the_distribution(&model, |ctx| {
        MtpDrafter::with_assistant(ctx, Arc::clone(&assistant)).unwrap()
    });
}

/// The chi-square check of a model's own drafter (made by `drafter` on a fresh context),
/// after a prompt whose next token it drafts right.
fn own_drafter_keeps_the_distribution(
    model: &Arc<Model>,
    drafter: impl Fn(&mut Context) -> kolibri::speculative::MtpDrafter,
) {
    // The 40 likeliest tokens, none cut by top-p or min-p: the draft has about 0.7 of it.
    let params = |seed| SamplerParams {
        temperature: 0.8,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        ..SamplerParams::default()
    };
    // A prompt whose next token is one the drafter drafts right (9 in 10 are): its draft is
    // then the target's likeliest token.
    let first_draft = |prompt: &[u32], pending: u32| {
        let mut ctx = context(model);
        let mut drafter = drafter(&mut ctx);
        ctx.eval(prompt, Logits::Last).unwrap();
        drafter.prepare_on_target(&mut ctx, 0).unwrap();
        let history: Vec<u32> = prompt.iter().copied().chain([pending]).collect();
        let (drafts, _) = drafter
            .draft_on_target(&mut ctx, 0, &history, (0, 1))
            .unwrap();
        drafts[0]
    };
    let words = [
        "time", "village", "river", "king", "story", "night", "garden", "road",
    ];
    let (prompt, pending, logits) = (words.iter())
        .find_map(|word| {
            let text = format!("Once upon a {word}");
            let prompt = model.tokenizer.encode(&text, true, true);
            let mut ctx = context(model);
            let first = ctx.eval(&prompt, Logits::Last).unwrap();
            let pending = kolibri::sampling::argmax(&first);
            let logits = ctx.eval(&[pending], Logits::Last).unwrap();
            let top = kolibri::sampling::argmax(&logits);
            (first_draft(&prompt, pending) == top).then_some((prompt, pending, logits))
        })
        .expect("a prompt whose next token the drafter drafts right");
    let cands = Sampler::new(params(0))
        .unwrap()
        .candidates(&logits)
        .to_vec();
    let ids: Vec<u32> = cands.iter().map(|c| c.id).collect();
    let p: Vec<f64> = cands.iter().map(|c| c.p as f64).collect();
    assert!(ids.len() >= 3, "too few candidates to test: {}", ids.len());

    let n_seeds = 3000u64;
    let (mut counts, mut drafted, mut accepted) = (vec![0u64; ids.len()], 0, 0);
    for seed in 0..n_seeds {
        let mut ctx = context(model);
        let mut drafter = drafter(&mut ctx);
        ctx.eval(&prompt, Logits::Last).unwrap();
        drafter.prepare_on_target(&mut ctx, 0).unwrap();
        let mut speculator = Speculator::new(&drafter, 4);
        let mut sampler = Sampler::new(params(seed)).unwrap();
        let out = (speculator.step(&mut drafter, &mut ctx, 0, pending, &mut sampler)).unwrap();
        let bin = ids.iter().position(|&i| i == out[0]).expect("a candidate");
        counts[bin] += 1;
        let st = speculator.stats();
        (drafted, accepted) = (drafted + st.drafted, accepted + st.accepted);
    }
    let (stat, df) = chi_square(&counts, &p);
    assert!(stat < critical(df), "chi2 {stat} df {df}");
    assert!(
        drafted >= n_seeds && accepted > 0 && accepted < drafted,
        "{accepted} of {drafted} drafts kept"
    );
}

/// A context of `n_seq` sequences evaluating at most 32 tokens per pass.
fn small_batch_context(model: &Arc<Model>, n_seq: usize) -> Context {
    let params = ContextParams {
        n_ctx: 512,
        n_seq,
        n_batch: 32,
        n_threads: common::threads(),
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

/// What a lone drafter, in a fresh context, drafts after `history`.
fn lone_draft(target: &Context, draft: &Arc<Model>, history: &[u32], max: usize) -> Vec<u32> {
    let ctx = small_batch_context(draft, 1);
    let mut lone = ModelDrafter::new(target, ctx, 0, 0.0).unwrap();
    lone.draft(history, max).unwrap()
}

/// The shared drafter drafts for three sequences at once what a lone drafter drafts for each:
/// first after a prompt longer than its batch (caught up over several calls, drafting
/// nothing until then), then after the target kept two drafts and chose its own third.
#[test]
fn a_shared_drafter_drafts_what_a_lone_one_does() {
    let (target, draft) = (load(QWEN_15B), load(QWEN_05B));
    let target_ctx = small_batch_context(&target, 3);
    let mut shared = SharedDrafter::new(&target_ctx, small_batch_context(&draft, 3), 0.0).unwrap();
    let tokenize = |text: &str| target.tokenizer.encode(text, true, false);
    let mut asks: Vec<DraftRequest> = [EDIT_PROMPT.repeat(2).as_str(), "fn main() {", "1, 2, 3,"]
        .iter()
        .enumerate()
        .map(|(seq, text)| DraftRequest {
            seq,
            history: tokenize(text),
            max: 6,
            drafts: Vec::new(),
        })
        .collect();
    assert!(asks[0].history.len() > 2 * 32);
    let mut calls = 0;
    while asks.iter().any(|a| a.drafts.is_empty()) {
        shared.draft(&mut asks).unwrap();
        calls += 1;
        assert!(calls <= 8, "the prompts are never caught up");
    }
    assert!(
        calls >= 3,
        "a {}-token prompt caught up in {calls} calls",
        asks[0].history.len()
    );
    for round in 0..2 {
        for ask in &asks {
            let lone = lone_draft(&target_ctx, &draft, &ask.history, 6);
            assert_eq!(ask.drafts, lone, "round {round}, sequence {}", ask.seq);
        }
        for ask in asks.iter_mut() {
            let kept = ask.drafts[..2].to_vec();
            ask.history.extend(kept);
            ask.history.push(ask.drafts[2] ^ 1);
        }
        shared.draft(&mut asks).unwrap();
        assert!(asks.iter().all(|a| a.drafts.len() == 6));
    }
}

/// `prepare` evaluates the prompt in the draft's context before the first step (as prompt
/// processing, not drafting time): the context then holds the prompt, replacing what it held
/// from where the two part, and the drafts are those of a drafter that caught up on its own.
#[test]
fn a_prepared_draft_model_drafts_what_an_unprepared_one_does() {
    let (target, draft) = (load(QWEN_15B), load(QWEN_05B));
    let target_ctx = context(&target);
    let prompt = target.tokenizer.encode(EDIT_PROMPT, true, false);
    let other = target.tokenizer.encode("fn main() {", true, false);
    assert_ne!(prompt[1], other[1], "the prompts part after BOS");
    let mut history = prompt.clone();
    history.push(prompt[1]);

    let mut draft_ctx = context(&draft);
    let mut prepared = ModelDrafter::new(&target_ctx, &mut draft_ctx, 0, 0.0).unwrap();
    prepared.prepare(&other).unwrap();
    prepared.prepare(&prompt).unwrap();
    assert_eq!(draft_ctx.seq_tokens(0), prompt);

    let mut prepared = ModelDrafter::new(&target_ctx, &mut draft_ctx, 0, 0.0).unwrap();
    let drafts = prepared.draft(&history, 6).unwrap();
    let mut fresh = ModelDrafter::new(&target_ctx, context(&draft), 0, 0.0).unwrap();
    assert_eq!(drafts.len(), 6);
    assert_eq!(drafts, fresh.draft(&history, 6).unwrap());
    // The history and the drafts but the last (the target checks that one).
    assert_eq!(
        draft_ctx.seq_tokens(0),
        [&history[..], &drafts[..5]].concat()
    );
}

#[test]
fn unusable_drafts_are_refused_with_the_reason() {
    let (small, large, gemma) = (load(QWEN_05B), load(QWEN_15B), load(GEMMA));
    let err = |target: &Arc<Model>, draft: Context| match ModelDrafter::new(
        &context(target),
        draft,
        0,
        0.5,
    ) {
        Ok(_) => panic!("accepted"),
        Err(ModelError::InvalidArgument(m)) => m,
        Err(e) => panic!("{e}"),
    };
    let m = err(&small, context(&gemma));
    assert!(m.contains("vocabulary"), "{m}");
    let m = err(&small, context(&large));
    assert!(m.contains("must be smaller"), "{m}");
    let short = ContextParams {
        n_ctx: 256,
        ..Default::default()
    };
    let m = err(&large, Context::new(Arc::clone(&small), &short).unwrap());
    assert!(m.contains("256 positions"), "{m}");
}

/// An abort callback that stops the `at`-th layer it is asked about, once.
fn abort_once(at: usize) -> kolibri::model::AbortCallback {
    let asked = AtomicUsize::new(0);
    Box::new(move || asked.fetch_add(1, Ordering::Relaxed) + 1 == at)
}

/// A step cancelled in the draft or in the verify pass returns `Cancelled`; generation then
/// continues to exactly the plain greedy text.
#[test]
fn a_cancelled_step_leaves_both_caches_consistent() {
    let (target, draft) = (load(QWEN_15B), load(QWEN_05B));
    let plain = greedy(&mut context(&target), EDIT_PROMPT, None);
    let n_layer = target.hparams.n_layer;
    for cancel_draft in [true, false] {
        let mut ctx = context(&target);
        let mut draft_ctx = context(&draft);
        let mut sampler = Sampler::new(SamplerParams::greedy()).unwrap();
        let prompt = target.tokenizer.encode(EDIT_PROMPT, true, true);
        let mut out = vec![sampler.sample(&ctx.eval(&prompt, Logits::Last).unwrap())];
        sampler.accept(out[0]);
        // Stops the third pass (the draft's, or the target's) half way through its layers.
        let abort = abort_once(2 * draft.hparams.n_layer.max(n_layer) + n_layer / 2);
        if cancel_draft {
            draft_ctx.set_abort(Some(abort));
        } else {
            ctx.set_abort(Some(abort));
        }
        let mut drafter = ModelDrafter::new(&ctx, draft_ctx, 0, 0.3).unwrap();
        let mut spec = Speculator::new(&drafter, 8);
        let mut cancelled = 0;
        while out.len() < N_NEW {
            match spec.step(
                &mut drafter,
                &mut ctx,
                0,
                *out.last().unwrap(),
                &mut sampler,
            ) {
                Ok(new) => out.extend(new),
                Err(ModelError::Cancelled) => cancelled += 1,
                Err(e) => panic!("{e}"),
            }
        }
        out.truncate(N_NEW);
        assert_eq!(cancelled, 1, "cancel_draft {cancel_draft}");
        assert_eq!(out, plain, "cancel_draft {cancel_draft}");
    }
}
