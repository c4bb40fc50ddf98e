//! A hybrid model's memory (LFM2: short-convolution layers with a recurrent state beside
//! attention layers with KV rows) behaves as a transformer's does everywhere sequences are
//! handled: the state matters, prompts in any batch size agree, a sequence in a multi-sequence
//! batch computes what it does alone, rewinds (speculation's rejected tails, cancelled passes)
//! are exact, checkpoints let a shared prefix be kept, and saved states round-trip.

mod common;

use common::synthetic::synthetic_path;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kolibri::model::{BatchToken, Context, ContextParams, Logits, Model, ModelError};
use kolibri::quantize::{quantize_file, FileType, Options};
use kolibri::sampling::{argmax, Sampler, SamplerParams};
use kolibri::speculative::{Drafter, LookupDrafter, ModelDrafter, Speculator};

const PROMPT: &str = "The committee met on Tuesday to review the budget for the coming year. \
                      After a long debate about roads, schools and the new library, the chair \
                      asked each member to write down three priorities. Most of them named the \
                      bridge over the river first, since it had been closed twice during the \
                      spring floods, and the treasurer warned that repairs would cost more.";

/// The hybrid test models: short convolutions (LFM2) and Gated DeltaNet (Qwen3.5).
const HYBRIDS: [&str; 2] = ["lfm2-tiny", "qwen35-tiny"];

fn load(name: &str) -> Arc<Model> {
    Arc::new(Model::load(synthetic_path(name)).unwrap())
}

/// The model in the Q4_K_M mix users run (made once per test process): its matrix kernels
/// give a token the same bits alone and in a verify-sized batch, as the exactness tests need
/// (the synthetic files' f16 matrices take another path for single tokens).
fn load_quantized(name: &str) -> Arc<Model> {
    static DONE: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap();
    let path = match done.iter().find(|(n, _)| n == name) {
        Some((_, p)) => p.clone(),
        None => {
            let out = std::env::temp_dir()
                .join(format!("kolibri-hybrid-{name}-{}.gguf", std::process::id()));
            let opts = Options {
                file_type: FileType::parse("Q4_K_M"),
                allow_requantize: false,
                pure: false,
                split: Default::default(),
            };
            quantize_file(&synthetic_path(name), &out, &opts, |_, _| {}).unwrap();
            done.push((name.to_owned(), out.clone()));
            out
        }
    };
    Arc::new(Model::load(&path).unwrap())
}

fn context_with(model: &Arc<Model>, n_batch: usize, n_seq: usize) -> Context {
    let params = ContextParams {
        n_ctx: 512,
        n_seq,
        n_batch,
        n_threads: common::threads(),
        ..Default::default()
    };
    Context::new(Arc::clone(model), &params).unwrap()
}

fn context(model: &Arc<Model>) -> Context {
    context_with(model, 512, 1)
}

fn prompt(model: &Model) -> Vec<u32> {
    let tokens = model.tokenizer.encode(PROMPT, true, true);
    assert!(tokens.len() > 60, "{} prompt tokens", tokens.len());
    tokens
}

/// How far the top logit leads the second.
fn top_gap(logits: &[f32]) -> f32 {
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &l in logits {
        if l > first {
            (first, second) = (l, first);
        } else if l > second {
            second = l;
        }
    }
    first - second
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn the_model_is_hybrid_and_its_recurrent_state_matters() {
    for name in HYBRIDS {
        let model = load(name);
        let hp = &model.hparams;
        assert!(hp.attention_layers.len() < hp.n_layer && !hp.attention_layers.is_empty());
        let tokens = prompt(&model);
        let mut ctx = context(&model);
        ctx.eval(&tokens, Logits::Last).unwrap();
        let next = ctx.eval(&[42], Logits::Last).unwrap();
        let mut zeroed = context(&model);
        zeroed.eval(&tokens, Logits::Last).unwrap();
        zeroed.zero_recurrent_state(0);
        let after_zero = zeroed.eval(&[42], Logits::Last).unwrap();
        let d = max_diff(&next, &after_zero);
        assert!(
            d > 0.5,
            "{name}: zeroing the state moved the logits by only {d}"
        );
    }
}

/// The same prompt evaluated in passes of 1, 7, 64 and 512 tokens. The convolution's
/// recurrence is the same in every pass size (`short_conv`'s unit test shows it against the
/// convolution written out); what differs is the matrix products' activation rounding, which
/// moves a transformer's logits as much (about 0.002 nat on average on these models).
#[test]
fn prompts_in_any_batch_size_give_the_same_logits() {
    for name in HYBRIDS {
        let model = load(name);
        let n_vocab = model.hparams.n_vocab;
        let tokens = prompt(&model);
        let whole = context_with(&model, 512, 1)
            .eval(&tokens, Logits::All)
            .unwrap();
        for n_batch in [1, 7, 64] {
            let split = context_with(&model, n_batch, 1)
                .eval(&tokens, Logits::All)
                .unwrap();
            let mean = whole
                .iter()
                .zip(&split)
                .map(|(a, b)| (a - b).abs())
                .sum::<f32>()
                / whole.len() as f32;
            assert!(
                mean <= 5e-3,
                "{name}, n_batch {n_batch}: logits differ by {mean} on average"
            );
            for (t, (a, b)) in whole.chunks(n_vocab).zip(split.chunks(n_vocab)).enumerate() {
                // The same top token wherever it leads by more than rounding could move.
                if top_gap(a) > 0.05 {
                    assert_eq!(argmax(a), argmax(b), "{name}, n_batch {n_batch}, token {t}");
                }
            }
        }
    }
}

/// Two sequences decoded together: each token's logits are the bits it has alone.
#[test]
fn a_sequence_in_a_shared_batch_computes_what_it_does_alone() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let tokens = prompt(&model);
        let (a, b) = (&tokens[..40], &tokens[20..70]);
        let n_vocab = model.hparams.n_vocab;
        let mut both = context_with(&model, 512, 2);
        for (seq, p) in [(0, a), (1, b)] {
            let batch: Vec<BatchToken> = (p[..p.len() - 3].iter())
                .map(|&token| BatchToken {
                    token,
                    seq,
                    logits: false,
                })
                .collect();
            both.decode(&batch).unwrap();
        }
        // The tails interleaved token by token in one pass.
        let tail: Vec<BatchToken> = (0..3)
            .flat_map(|i| {
                [(a, 0), (b, 1)].map(|(p, seq)| BatchToken {
                    token: p[p.len() - 3 + i],
                    seq,
                    logits: true,
                })
            })
            .collect();
        let tails = both.decode(&tail).unwrap();
        for (seq, p) in [(0, a), (1, b)] {
            let mut alone = context_with(&model, 512, 2);
            alone.eval(&p[..p.len() - 3], Logits::Last).unwrap();
            let rest = alone.eval(&p[p.len() - 3..], Logits::All).unwrap();
            for i in 0..3 {
                let row = (2 * i + seq) * n_vocab;
                assert!(
                    tails[row..row + n_vocab] == rest[i * n_vocab..(i + 1) * n_vocab],
                    "{name}: seq {seq} tail token {i}"
                );
            }
        }
    }
}

/// Rewinding into the last pass and evaluating the same tokens again gives the same bits, and
/// the context continues as one that never evaluated the rewound tokens.
#[test]
fn rewinds_into_recent_tokens_are_exact() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let tokens = prompt(&model);
        let (p, tail) = tokens.split_at(50);
        let mut ctx = context(&model);
        ctx.eval(p, Logits::Last).unwrap();
        let first = ctx.eval(tail, Logits::All).unwrap();
        let n_vocab = model.hparams.n_vocab;
        for back in [1, 5, 8] {
            let keep = tokens.len() - back;
            assert_eq!(ctx.truncate(keep), keep);
            let again = ctx.eval(&tokens[keep..], Logits::All).unwrap();
            let from = (keep - 50) * n_vocab;
            assert!(again[..] == first[from..], "{name}: rewound {back} tokens");
        }
        // A rewound tail replaced by other tokens: as a context that never saw the tail.
        assert_eq!(ctx.truncate(55), 55);
        let other = ctx.eval(&[7, 8, 9], Logits::All).unwrap();
        let mut fresh = context(&model);
        fresh.eval(&tokens[..50], Logits::Last).unwrap();
        fresh.eval(&tokens[50..55], Logits::Last).unwrap();
        assert!(fresh.eval(&[7, 8, 9], Logits::All).unwrap() == other);
    }
}

/// A rewind further back than the kept states keeps a shorter prefix (and says how long);
/// a checkpoint keeps its position.
#[test]
fn older_positions_come_back_from_checkpoints_or_are_evaluated_again() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let tokens = prompt(&model);
        let mut reference = context(&model);
        reference.eval(&tokens[..20], Logits::Last).unwrap();
        let want = reference.eval(&tokens[20..24], Logits::All).unwrap();

        let mut ctx = context(&model);
        ctx.eval(&tokens, Logits::Last).unwrap();
        let kept = ctx.truncate(20);
        assert!(kept < 20, "a state 40+ tokens back was still known");
        ctx.eval(&tokens[kept..20], Logits::Last).unwrap();
        assert!(ctx.eval(&tokens[20..24], Logits::All).unwrap() == want);

        // A long input keeps checkpoints every 64 tokens and one before its end.
        let long = model.tokenizer.encode(&PROMPT.repeat(6), true, true);
        assert!(long.len() > 300);
        let mut ctx = context(&model);
        ctx.eval(&long, Logits::Last).unwrap();
        assert_eq!(ctx.truncate(long.len() - 1), long.len() - 1);
        assert_eq!(ctx.truncate(290), 256);
        let mut fresh = context(&model);
        fresh.eval(&long[..256], Logits::Last).unwrap();
        assert!(
            ctx.eval(&long[256..260], Logits::All).unwrap()
                == fresh.eval(&long[256..260], Logits::All).unwrap()
        );

        let mut ctx = context(&model);
        ctx.eval(&tokens[..20], Logits::Last).unwrap();
        ctx.checkpoint_seq(0);
        ctx.eval(&tokens[20..], Logits::Last).unwrap();
        assert_eq!(ctx.truncate(20), 20);
        assert!(ctx.eval(&tokens[20..24], Logits::All).unwrap() == want);
    }
}

/// A context shift drops old tokens' KV rows and keeps the recurrent state (it holds what they
/// contributed); generation goes on.
#[test]
fn a_context_shift_keeps_the_state_and_goes_on() {
    for name in HYBRIDS {
        let model = load(name);
        let tokens = prompt(&model);
        let mut ctx = context(&model);
        ctx.eval(&tokens, Logits::Last).unwrap();
        let before = ctx.n_past();
        ctx.shift_seq(0, 4, 30).unwrap();
        assert_eq!(ctx.n_past(), before - 30, "{name}");
        let logits = ctx.eval(&[42, 43], Logits::All).unwrap();
        assert!(logits.iter().all(|l| l.is_finite()), "{name}");
        // Rewinds into the moved tokens still work.
        assert_eq!(ctx.truncate(before - 30), before - 30, "{name}");
    }
}

fn abort_at(at: usize) -> kolibri::model::AbortCallback {
    let asked = AtomicUsize::new(0);
    Box::new(move || asked.fetch_add(1, Ordering::Relaxed) + 1 == at)
}

/// A pass cancelled half way (within one pass, and in the second pass of a long input) leaves
/// every state as before it.
#[test]
fn cancelled_passes_leave_the_state_as_before() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let n_layer = model.hparams.n_layer;
        let tokens = prompt(&model);
        let mut plain = context(&model);
        plain.eval(&tokens[..30], Logits::Last).unwrap();
        let want = plain.eval(&tokens[30..], Logits::All).unwrap();
        for (n_batch, abort_layer) in [(512, n_layer / 2 + 1), (16, n_layer + 3)] {
            let mut ctx = context_with(&model, n_batch, 1);
            ctx.eval(&tokens[..30], Logits::Last).unwrap();
            ctx.set_abort(Some(abort_at(abort_layer)));
            let err = ctx.eval(&tokens[30..], Logits::All).unwrap_err();
            assert!(matches!(err, ModelError::Cancelled), "{err}");
            assert_eq!(ctx.n_past(), 30);
            ctx.set_abort(None);
            let got = ctx.eval(&tokens[30..], Logits::All).unwrap();
            let d = max_diff(&got, &want);
            assert!(d <= 1e-3, "{name}, n_batch {n_batch}: {d}");
            if n_batch == 512 {
                assert!(got == want, "{name}, n_batch {n_batch}: not the same bits");
            }
        }
    }
}

#[test]
fn saved_states_round_trip_and_others_are_refused() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let tokens = prompt(&model);
        let mut ctx = context(&model);
        let logits = ctx.eval(&tokens, Logits::Last).unwrap();
        let mut saved = Vec::new();
        ctx.save_seq(0, &logits, &mut saved).unwrap();
        assert_eq!(
            saved.len() as u64,
            ctx.seq_state_size(0, logits.len()).unwrap()
        );
        let want = ctx.eval(&[5, 6, 7], Logits::All).unwrap();

        let mut loaded = context(&model);
        let back = loaded
            .load_seq(0, &mut std::io::Cursor::new(&saved))
            .unwrap();
        assert!(back == logits);
        assert!(loaded.eval(&[5, 6, 7], Logits::All).unwrap() == want);
        // The file carries the checkpoints too: the same prompt sent again (its last token
        // evaluated for its logits) resumes from the one before the prompt's end.
        let mut again = context(&model);
        again
            .load_seq(0, &mut std::io::Cursor::new(&saved))
            .unwrap();
        let n = tokens.len();
        assert_eq!(again.truncate(n - 1), n - 1, "{name}");
        // As a context that evaluated the prompt but its last token, then that token.
        let last = again.eval(&tokens[n - 1..], Logits::Last).unwrap();
        let mut fresh = context(&model);
        fresh.eval(&tokens[..n - 1], Logits::Last).unwrap();
        let want_last = fresh.eval(&tokens[n - 1..], Logits::Last).unwrap();
        assert!(last == want_last, "{name}: not the same bits");

        // Truncated, corrupted, and another model's states: refused, the context unchanged.
        let mut other = context(&model);
        other.eval(&tokens[..10], Logits::Last).unwrap();
        let mut corrupt = saved.clone();
        let mid = corrupt.len() - 100;
        corrupt[mid] ^= 1;
        let transformer = load("llama3-tiny");
        let mut t_ctx = context(&transformer);
        let t_logits = t_ctx.eval(&tokens[..10], Logits::Last).unwrap();
        let mut foreign = Vec::new();
        t_ctx.save_seq(0, &t_logits, &mut foreign).unwrap();
        for (what, bytes) in [
            ("truncated", &saved[..saved.len() - 9]),
            ("corrupted", &corrupt[..]),
            ("another model's", &foreign[..]),
        ] {
            let err = other.load_seq(0, &mut std::io::Cursor::new(bytes));
            assert!(err.is_err(), "{name}: {what} state loaded");
            assert_eq!(other.n_past(), 10, "{what}");
        }
        let mut fresh = context(&model);
        fresh.eval(&tokens[..10], Logits::Last).unwrap();
        assert!(other.eval(&[5], Logits::Last).unwrap() == fresh.eval(&[5], Logits::Last).unwrap());
    }
}

/// Drafts plain greedy's own continuation with every fifth token wrong: verify passes accept
/// a few tokens and reject the rest, at every offset.
struct ScriptedDrafter {
    prompt_len: usize,
    plain: Vec<u32>,
}

impl Drafter for ScriptedDrafter {
    fn draft(&mut self, history: &[u32], max: usize) -> Result<Vec<u32>, ModelError> {
        // `history` ends with the token the target has not evaluated: plain[at - 1].
        let at = history.len() - self.prompt_len;
        Ok((at..(at + max).min(self.plain.len()))
            .map(|i| {
                if i % 5 == 4 {
                    self.plain[i] ^ 1
                } else {
                    self.plain[i]
                }
            })
            .collect())
    }

    fn is_free(&self) -> bool {
        true
    }
}

/// Greedy text with drafts (scripted, from prompt lookup, from a hybrid draft model) is plain
/// greedy text: every rejected tail rewinds the recurrent states exactly.
#[test]
fn speculation_on_a_hybrid_target_is_plain_greedy() {
    for name in HYBRIDS {
        let model = load_quantized(name);
        let transformer = load_quantized("llama3-tiny");
        let n_new = 40;
        let greedy = |ctx: &mut Context, prompt: &[u32], drafter: Option<&mut dyn Drafter>| {
            let mut sampler = Sampler::new(SamplerParams::greedy()).unwrap();
            let mut out = vec![argmax(&ctx.eval(prompt, Logits::Last).unwrap())];
            sampler.accept(out[0]);
            let mut stats = Default::default();
            match drafter {
                None => {
                    while out.len() < n_new {
                        let l = ctx.eval(&[*out.last().unwrap()], Logits::Last).unwrap();
                        out.push(argmax(&l));
                    }
                }
                Some(d) => {
                    let mut spec = Speculator::new(d, 8);
                    while out.len() < n_new {
                        let last = *out.last().unwrap();
                        out.extend(spec.step(d, ctx, 0, last, &mut sampler).unwrap());
                    }
                    stats = spec.stats();
                }
            }
            out.truncate(n_new);
            (out, stats)
        };
        let prompt = prompt(&model);
        let (plain, _) = greedy(&mut context(&model), &prompt, None);
        let mut scripted = ScriptedDrafter {
            prompt_len: prompt.len(),
            plain: plain.clone(),
        };
        let (fast, s) = greedy(&mut context(&model), &prompt, Some(&mut scripted));
        assert_eq!(fast, plain, "{name}: scripted drafts");
        assert!(
            s.accepted > 0 && s.drafted > s.accepted,
            "accepted and rejected: {s:?}"
        );
        let mut lookup = LookupDrafter::new(1, 4);
        let (fast, _) = greedy(&mut context(&model), &prompt, Some(&mut lookup));
        assert_eq!(fast, plain, "{name}: prompt lookup");
        if name != "lfm2-tiny" {
            continue;
        }
        // A hybrid draft model (the files here with its vocabulary are larger than it, so it
        // drafts for a transformer): its context rewinds each rejected draft.
        let (plain, _) = greedy(&mut context(&transformer), &prompt, None);
        let mut ctx = context(&transformer);
        let mut drafter = ModelDrafter::new(&ctx, context(&model), 0, 0.0).unwrap();
        let (fast, s) = greedy(&mut ctx, &prompt, Some(&mut drafter));
        assert_eq!(fast, plain, "hybrid draft model");
        assert!(s.drafted > s.accepted, "{s:?}");
    }
}
