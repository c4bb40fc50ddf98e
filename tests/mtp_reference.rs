//! The multi-token-prediction block against llama.cpp's, on the synthetic models that carry one
//! (tests/data/mtp, recorded by scripts/record-mtp-reference.py): each prompt through the
//! trunk, then through the block teacher-forced (token p with the trunk's hidden state of token
//! p - 1, zeros for the first, as llama.cpp's MTP context catches up on a prompt). The block's
//! log-probabilities of llama.cpp's top 5 differ on average by at most 1.5x llama.cpp's own
//! flash-attention on/off spread, or 0.015 nat; its top-1 is llama.cpp's where llama.cpp's
//! lead is clear. Loaded without MTP, the same file costs no block and no KV cache layer.

mod common;

use std::sync::Arc;

use kolibri::model::{Assistant, Context, ContextParams, LoadOptions, Model, MtpToken};
use kolibri::sampling::log_softmax;
use serde_json::Value;

const SPREAD_FACTOR: f64 = 1.5;
const MEAN_LOGPROB_FLOOR: f64 = 0.015;
const CLOSE_CALL_GAP: f64 = 0.1;

fn ids(v: &Value) -> Vec<u32> {
    (v.as_array().unwrap().iter())
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

fn load(path: &std::path::Path, mtp: bool) -> Result<Model, kolibri::model::ModelError> {
    Model::load_with(
        path,
        &mut LoadOptions {
            mtp,
            ..Default::default()
        },
    )
}

/// The recorded references: MTP blocks', and assistants' (with a "target").
fn references() -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(common::data_path("mtp"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let read = |f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
    files.iter().map(read).collect()
}

/// Adds up |Δ log-prob| over llama.cpp's top 5 of each step (`logits`: one row per step), and
/// notes a different top-1 where llama.cpp's lead is clear. Returns the sum and the count.
fn compare(
    logits: &[f32],
    steps: &[Value],
    name: &str,
    failures: &mut Vec<String>,
) -> (f64, usize) {
    let n_vocab = logits.len() / steps.len();
    let (mut sum, mut count) = (0f64, 0usize);
    for (p, (row, step)) in logits.chunks(n_vocab).zip(steps).enumerate() {
        let lp = log_softmax(row);
        let top = step.as_array().unwrap();
        for t in top {
            let id = t["id"].as_u64().unwrap() as usize;
            sum += (lp[id] as f64 - t["logprob"].as_f64().unwrap()).abs();
            count += 1;
        }
        let gap = top[0]["logprob"].as_f64().unwrap() - top[1]["logprob"].as_f64().unwrap();
        let ours = (0..n_vocab)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        if gap >= CLOSE_CALL_GAP && ours as u64 != top[0]["id"].as_u64().unwrap() {
            failures.push(format!(
                "{name} step {p}: top-1 {ours}, llama.cpp {}",
                top[0]["id"]
            ));
        }
    }
    (sum, count)
}

/// The mean |Δ log-prob| against what `doc`'s spread allows.
fn check_mean(doc: &Value, name: &str, (sum, count): (f64, usize), failures: &mut Vec<String>) {
    let mean = sum / count.max(1) as f64;
    let spread = doc["flash_attention_off_mean_abs_diff"].as_f64().unwrap();
    let allowed = (SPREAD_FACTOR * spread).max(MEAN_LOGPROB_FLOOR);
    eprintln!(
        "{name}: mean |dlogprob| {mean:.4} over {count} values; llama.cpp's flash attention \
         on/off spread {spread:.4}; allowed {allowed:.4}"
    );
    if mean > allowed {
        failures.push(format!("{name}: mean |dlogprob| {mean:.4} > {allowed:.4}"));
    }
}

#[test]
fn the_mtp_block_matches_llama_cpp() {
    let mut failures = Vec::new();
    for doc in references().iter().filter(|d| d.get("target").is_none()) {
        let name = doc["model"].as_str().unwrap();
        let path = common::synthetic::synthetic_path(name);
        let model = Arc::new(load(&path, true).unwrap());
        let e = model.hparams.n_embd;
        let params = ContextParams {
            n_ctx: 512,
            n_threads: common::threads(),
            ..Default::default()
        };
        let (mut sum, mut count) = (0f64, 0usize);
        for case in doc["cases"].as_array().unwrap() {
            let prompt = ids(&case["prompt_ids"]);
            let mut ctx = Context::new(Arc::clone(&model), &params).unwrap();
            let trunk = ctx.embed(0, &prompt).unwrap();
            // Token p pairs with the hidden state of token p - 1.
            let mut hidden = vec![0f32; prompt.len() * e];
            hidden[e..].copy_from_slice(&trunk[..(prompt.len() - 1) * e]);
            let out = ctx.mtp_pass(0, 0, &prompt, &hidden).unwrap();
            let steps = case["top_logprobs"].as_array().unwrap();
            assert_eq!(steps.len(), prompt.len());
            let tally = compare(&out.logits, steps, name, &mut failures);
            (sum, count) = (sum + tally.0, count + tally.1);
        }
        check_mean(doc, name, (sum, count), &mut failures);

        // Without MTP: no block, no KV cache layer for it, the trunk's logits unchanged.
        let plain = Arc::new(load(&path, false).unwrap());
        assert!(plain.weights.mtp.is_none());
        let bytes = |m: &Arc<Model>| Context::new(Arc::clone(m), &params).unwrap().kv_bytes();
        assert!(
            bytes(&plain) < bytes(&model),
            "the block's KV layer is not counted"
        );
        let prompt = ids(&doc["cases"][0]["prompt_ids"]);
        let logits = |m: &Arc<Model>| {
            let mut ctx = Context::new(Arc::clone(m), &params).unwrap();
            ctx.eval(&prompt, kolibri::model::Logits::Last).unwrap()
        };
        assert_eq!(
            logits(&plain),
            logits(&model),
            "loading the block changed the trunk"
        );
        // A memory budget counts the block's weights and KV rows only where it is loaded.
        use kolibri::model::budget::{fit, BudgetRequest};
        let req = BudgetRequest {
            budget: 1 << 30,
            n_seq: 1,
            n_batch: 64,
            n_ctx: Some(256),
            types: None,
        };
        let (with, without) = (fit(&model, &req).unwrap(), fit(&plain, &req).unwrap());
        let block = kolibri::model::mtp_block_bytes(&model.gguf);
        assert!(block > 0);
        assert_eq!(with.fixed_bytes - without.fixed_bytes, block);
        assert!(with.kv_bytes > without.kv_bytes, "{with:?} {without:?}");
        let mut ctx = Context::new(Arc::clone(&plain), &params).unwrap();
        let err = ctx.mtp_pass(0, 0, &prompt, &vec![0.0; prompt.len() * e]);
        assert!(err.is_err_and(|e| e.to_string().contains("without its multi-token")));
    }
    // A model without a block refuses it by name.
    let err = load(&common::synthetic::synthetic_path("qwen35-tiny"), true)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("no multi-token-prediction block"),
        "{err}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Gemma 4's assistant against llama.cpp's (an assistant context sharing the target's KV
/// cache): token p at position p with the target's hidden state of token p - 1, over the
/// target's cache of the positions before p. Then what it refuses: another target, another
/// model's context, a position with nothing before it, its file loaded as a model.
#[test]
fn the_assistant_matches_llama_cpp() {
    let mut failures = Vec::new();
    let docs = references();
    let docs: Vec<&Value> = docs.iter().filter(|d| d.get("target").is_some()).collect();
    assert!(!docs.is_empty());
    let params = ContextParams {
        n_ctx: 512,
        n_threads: common::threads(),
        ..Default::default()
    };
    for doc in docs {
        let name = doc["model"].as_str().unwrap();
        let path = common::synthetic::synthetic_path(name);
        let target_path = common::synthetic::synthetic_path(doc["target"].as_str().unwrap());
        let target = Arc::new(Model::load(&target_path).unwrap());
        let assistant = Assistant::load(&path, &target, &mut LoadOptions::default()).unwrap();
        let b = target.hparams.n_embd;
        let (mut sum, mut count) = (0f64, 0usize);
        for case in doc["cases"].as_array().unwrap() {
            let prompt = ids(&case["prompt_ids"]);
            let n = prompt.len();
            let mut ctx = Context::new(Arc::clone(&target), &params).unwrap();
            let trunk = ctx.embed(0, &prompt).unwrap();
            let tokens: Vec<MtpToken> = (1..n)
                .map(|pos| MtpToken {
                    token: prompt[pos],
                    seq: 0,
                    pos,
                })
                .collect();
            let out = (ctx.assistant_batch(&assistant, &tokens, &trunk[..(n - 1) * b])).unwrap();
            assert_eq!(out.hidden.len(), (n - 1) * b);
            let steps = case["top_logprobs"].as_array().unwrap();
            assert_eq!(steps.len(), n - 1);
            let tally = compare(&out.logits, steps, name, &mut failures);
            (sum, count) = (sum + tally.0, count + tally.1);
        }
        check_mean(doc, name, (sum, count), &mut failures);

        let mut ctx = Context::new(Arc::clone(&target), &params).unwrap();
        let prompt = ids(&doc["cases"][0]["prompt_ids"]);
        let trunk = ctx.embed(0, &prompt).unwrap();
        let at = |pos| {
            [MtpToken {
                token: prompt[1],
                seq: 0,
                pos,
            }]
        };
        let err = ctx
            .assistant_batch(&assistant, &at(0), &trunk[..b])
            .err()
            .unwrap();
        assert!(err.to_string().contains("positions before 0"), "{err}");
        let err = (ctx.assistant_batch(&assistant, &at(prompt.len() + 1), &trunk[..b]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("not all of them"), "{err}");
        let err = Model::load(&path).err().unwrap();
        assert!(err.to_string().contains("Gemma 4's drafter"), "{err}");
        let err = (Assistant::load(&target_path, &target, &mut LoadOptions::default()))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("not an assistant drafter"),
            "{err}"
        );
        for other in ["gemma4moe-tiny", "qwen3-tiny"] {
            let other = Arc::new(Model::load(common::synthetic::synthetic_path(other)).unwrap());
            let err = (Assistant::load(&path, &other, &mut LoadOptions::default()))
                .err()
                .unwrap();
            assert!(
                err.to_string().contains("cannot draft for")
                    || err.to_string().contains("drafts for a Gemma 4 model"),
                "{err}"
            );
            let mut ctx = Context::new(Arc::clone(&other), &params).unwrap();
            let held = ctx.embed(0, &[1, 2]).unwrap();
            let token = [MtpToken {
                token: 1,
                seq: 0,
                pos: 1,
            }];
            let err = ctx.assistant_batch(&assistant, &token, &held[..other.hparams.n_embd]);
            assert!(err.is_err_and(|e| e.to_string().contains("another model")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Drafting with the block (`--spec mtp`): greedy output identical to plain decoding, and at
/// every step the block reads what a fresh teacher-forced pass over the kept tokens reads (its
/// KV rows rewritten from the target's hidden states after each verification), so its first
/// draft is the fresh pass's top token.
#[test]
fn drafting_keeps_the_block_teacher_forced() {
    drafting_keeps_the_block_teacher_forced_on("qwen35-mtp-tiny");
    drafting_keeps_the_block_teacher_forced_on("qwen35moe-mtp-tiny");
}

fn drafting_keeps_the_block_teacher_forced_on(name: &str) {
    use kolibri::model::Logits;
    use kolibri::sampling::{Sampler, SamplerParams};
    use kolibri::speculative::{Drafter, MtpDrafter, Speculator};

    let path = common::synthetic::synthetic_path(name);
    let model = Arc::new(load(&path, true).unwrap());
    let e = model.hparams.n_embd;
    let params = ContextParams {
        n_ctx: 256,
        n_threads: common::threads(),
        ..Default::default()
    };
    let prompt = model
        .tokenizer
        .encode("Once upon a time, in a small village", true, true);
    let argmax = |row: &[f32]| {
        (0..row.len())
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap()
    };

    // Plain greedy decoding.
    let mut plain = Context::new(Arc::clone(&model), &params).unwrap();
    let mut logits = plain.eval(&prompt, Logits::Last).unwrap();
    let mut want = Vec::new();
    for _ in 0..40 {
        let t = argmax(&logits) as u32;
        want.push(t);
        logits = plain.eval(&[t], Logits::Last).unwrap();
    }

    let mut ctx = Context::new(Arc::clone(&model), &params).unwrap();
    let mut drafter = MtpDrafter::new(&mut ctx).unwrap();
    let logits = ctx.eval(&prompt, Logits::Last).unwrap();
    drafter.prepare_on_target(&mut ctx, 0).unwrap();
    let mut sampler = Sampler::new(SamplerParams::greedy()).unwrap();
    let mut speculator = Speculator::new(&drafter, 4);
    let mut got = vec![argmax(&logits) as u32];
    while got.len() < want.len() {
        let pending = *got.last().unwrap();
        // The fresh pass: the kept tokens through the trunk, then the block teacher-forced.
        let held = ctx.seq_tokens(0).to_vec();
        let mut fresh = Context::new(Arc::clone(&model), &params).unwrap();
        let trunk = fresh.embed(0, &held).unwrap();
        let mut rows = vec![0f32; e];
        rows.extend_from_slice(&trunk);
        let tokens: Vec<u32> = held.iter().copied().chain([pending]).collect();
        let out = fresh.mtp_pass(0, 0, &tokens, &rows).unwrap();
        let n_vocab = out.logits.len() / tokens.len();
        let first = argmax(&out.logits[(tokens.len() - 1) * n_vocab..]) as u32;
        let history = tokens;
        let (live, _) = (drafter.draft_on_target(&mut ctx, 0, &history, (0, 1))).unwrap();
        assert_eq!(
            live,
            [first],
            "{name}: the block's state after {} tokens",
            held.len()
        );
        got.extend(
            speculator
                .step(&mut drafter, &mut ctx, 0, pending, &mut sampler)
                .unwrap(),
        );
    }
    got.truncate(want.len());
    assert_eq!(
        got, want,
        "{name}: greedy with the block is not plain greedy"
    );
    assert!(speculator.stats().drafted > 0);
}

/// How far the largest logit leads the second.
fn top_gap(logits: &[f32]) -> f32 {
    let (mut a, mut b) = (f32::MIN, f32::MIN);
    for &l in logits {
        if l > a {
            (a, b) = (l, a);
        } else if l > b {
            b = l;
        }
    }
    a - b
}

/// Drafting with Gemma 4's assistant: greedy output identical to plain decoding, and at every
/// step its two drafts are what fresh passes over the kept tokens give (the target's hidden
/// state of the last kept token, then the assistant's own, both at the position after them).
#[test]
fn drafting_with_the_assistant_reads_the_target_as_a_fresh_pass() {
    use kolibri::model::Logits;
    use kolibri::sampling::{argmax, Sampler, SamplerParams};
    use kolibri::speculative::{Drafter, MtpDrafter, Speculator};

    let target = Arc::new(Model::load(common::synthetic::synthetic_path("gemma4-tiny")).unwrap());
    let path = common::synthetic::synthetic_path("gemma4-assistant-tiny");
    let assistant = Arc::new(Assistant::load(&path, &target, &mut LoadOptions::default()).unwrap());
    let b = target.hparams.n_embd;
    let params = ContextParams {
        n_ctx: 256,
        n_threads: common::threads(),
        ..Default::default()
    };
    let prompt = (target.tokenizer).encode("Once upon a time, in a small village", true, true);
    let mut plain = Context::new(Arc::clone(&target), &params).unwrap();
    let mut logits = plain.eval(&prompt, Logits::Last).unwrap();
    let mut want = Vec::new();
    for _ in 0..40 {
        let t = argmax(&logits);
        want.push(t);
        logits = plain.eval(&[t], Logits::Last).unwrap();
    }

    let mut ctx = Context::new(Arc::clone(&target), &params).unwrap();
    let mut drafter = MtpDrafter::with_assistant(&mut ctx, Arc::clone(&assistant)).unwrap();
    let logits = ctx.eval(&prompt, Logits::Last).unwrap();
    drafter.prepare_on_target(&mut ctx, 0).unwrap();
    let mut sampler = Sampler::new(SamplerParams::greedy()).unwrap();
    let mut speculator = Speculator::new(&drafter, 4);
    let mut got = vec![argmax(&logits)];
    while got.len() < want.len() {
        let pending = *got.last().unwrap();
        let held = ctx.seq_tokens(0).to_vec();
        let mut fresh = Context::new(Arc::clone(&target), &params).unwrap();
        let trunk = fresh.embed(0, &held).unwrap();
        let at = |token| {
            [MtpToken {
                token,
                seq: 0,
                pos: held.len(),
            }]
        };
        let first = fresh.assistant_batch(&assistant, &at(pending), &trunk[trunk.len() - b..]);
        let first = first.unwrap();
        let second = fresh.assistant_batch(&assistant, &at(argmax(&first.logits)), &first.hidden);
        let second = second.unwrap().logits;
        let expected = [argmax(&first.logits), argmax(&second)];
        let history: Vec<u32> = held.iter().copied().chain([pending]).collect();
        let (live, _) = (drafter.draft_on_target(&mut ctx, 0, &history, (0, 2))).unwrap();
        let eog = target.tokenizer.is_eog(expected[0]);
        // Compared where the top two are not a near-tie (random weights make a few).
        let rows = [&first.logits, &second];
        let clear = rows.iter().take_while(|l| top_gap(l) > 1e-3);
        let n = clear.count().min(if eog { 1 } else { 2 });
        assert_eq!(live[..n], expected[..n], "after {} tokens", held.len());
        got.extend(
            speculator
                .step(&mut drafter, &mut ctx, 0, pending, &mut sampler)
                .unwrap(),
        );
    }
    got.truncate(want.len());
    assert_eq!(got, want, "greedy with the assistant is not plain greedy");
    assert!(speculator.stats().drafted > 0);
}

/// [`MtpSequences`] drafting for three sequences of one context at once (one pass of the block
/// per draft step over all of them, prompts caught up in one batch) drafts what each sequence
/// drafts alone in a context of its own.
#[test]
fn sequences_draft_together_as_each_alone() {
    use kolibri::model::{BatchToken, Logits};
    use kolibri::speculative::{DraftRequest, MtpRun, MtpSequences};

    let path = common::synthetic::synthetic_path("qwen35-mtp-tiny");
    let model = Arc::new(load(&path, true).unwrap());
    let texts = [
        "Once upon a time",
        "The capital of France is",
        "fn main() {",
    ];
    let prompts: Vec<Vec<u32>> = (texts.iter())
        .map(|t| model.tokenizer.encode(t, true, true))
        .collect();
    let params = |n_seq| ContextParams {
        n_ctx: 128,
        n_seq,
        n_threads: common::threads(),
        ..Default::default()
    };
    let argmax = |row: &[f32]| kolibri::sampling::argmax(row);
    let request = |seq: usize, pending: u32| DraftRequest {
        seq,
        history: vec![pending],
        max: 5,
        drafts: Vec::new(),
    };

    let mut alone = Vec::new();
    for prompt in &prompts {
        let mut ctx = Context::new(Arc::clone(&model), &params(1)).unwrap();
        let mut block = MtpSequences::new(&mut ctx).unwrap();
        let logits = ctx.eval(prompt, Logits::Last).unwrap();
        let run = MtpRun {
            seq: 0,
            first_pos: 0,
            len: prompt.len(),
            row: 0,
        };
        block.catch_up(&mut ctx, &[run]).unwrap();
        let mut asks = [request(0, argmax(&logits))];
        block.draft(&mut ctx, &mut asks).unwrap();
        assert_eq!(asks[0].drafts.len(), 5);
        alone.push(asks[0].drafts.clone());
    }

    let mut ctx = Context::new(Arc::clone(&model), &params(3)).unwrap();
    let mut block = MtpSequences::new(&mut ctx).unwrap();
    let (mut batch, mut runs) = (Vec::new(), Vec::new());
    for (seq, prompt) in prompts.iter().enumerate() {
        runs.push(MtpRun {
            seq,
            first_pos: 0,
            len: prompt.len(),
            row: batch.len(),
        });
        batch.extend(prompt.iter().enumerate().map(|(i, &token)| BatchToken {
            token,
            seq,
            logits: i + 1 == prompt.len(),
        }));
    }
    let logits = ctx.decode(&batch).unwrap();
    block.catch_up(&mut ctx, &runs).unwrap();
    let n_vocab = model.hparams.n_vocab;
    let mut asks: Vec<DraftRequest> = (logits.chunks(n_vocab).enumerate())
        .map(|(seq, row)| request(seq, argmax(row)))
        .collect();
    asks[1].max = 3;
    block.draft(&mut ctx, &mut asks).unwrap();
    for (seq, ask) in asks.iter().enumerate() {
        let want = &alone[seq][..ask.max];
        assert_eq!(ask.drafts, want, "sequence {seq}");
        assert_eq!(
            ctx.seq_len(seq),
            prompts[seq].len(),
            "drafting adds no tokens"
        );
    }
    // A sequence whose cache was rewound drafts nothing until a pass gives its hidden state.
    block.forget(2);
    block.draft(&mut ctx, &mut asks).unwrap();
    assert!(asks[2].drafts.is_empty() && !asks[0].drafts.is_empty());
}
