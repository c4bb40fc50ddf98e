//! A tiny Llama-architecture model written by the test itself (random Q8_0 weights, a small
//! SentencePiece vocabulary): the forward pass against a naive f64 reference written here from
//! the architecture's definition, batch/one-by-one equivalence, rewinding, and API misuse.
//! Needs no downloaded model, so it also runs under qemu on aarch64.

use std::sync::Arc;

use kolibri::gguf::GgufFile;
use kolibri::model::{BatchToken, Context, ContextParams, Logits, Model, ModelError};
use kolibri::quant::{activation::quantize_row_q8_0, block_bytes, BlockQ8_0, GgmlType};

mod common;
use common::llama_ref::{self, llama_gguf, max_abs_diff, Dims};

const DIMS: Dims = Dims {
    embd: 64,
    head: 4,
    head_kv: 2,
    ff: 128,
    layers: 2,
};

fn q8_0_bytes(values: &[f32]) -> Vec<u8> {
    let mut blocks = vec![
        BlockQ8_0 {
            d: half::f16::ZERO,
            qs: [0; 32]
        };
        values.len() / 32
    ];
    quantize_row_q8_0(values, &mut blocks);
    block_bytes(&blocks).to_vec()
}

/// The tiny model with Q8_0 weights, and its vocabulary size.
fn tiny_model_bytes() -> (Vec<u8>, usize) {
    llama_gguf(&DIMS, |v| (GgmlType::Q8_0, q8_0_bytes(v)))
}

fn load() -> Arc<Model> {
    let (bytes, _) = tiny_model_bytes();
    Arc::new(Model::from_gguf(GgufFile::from_bytes(bytes).unwrap()).unwrap())
}

fn params(n_ctx: usize) -> ContextParams {
    ContextParams {
        n_ctx,
        n_threads: 2,
        n_batch: 512,
        n_seq: 1,
        ..Default::default()
    }
}

/// The naive f64 forward pass over the tiny model's weights.
fn reference_logits(tokens: &[u32]) -> Vec<f64> {
    let (bytes, _) = tiny_model_bytes();
    llama_ref::reference_logits(&GgufFile::from_bytes(bytes).unwrap(), &DIMS, tokens)
}

#[test]
fn forward_matches_naive_reference() {
    let model = load();
    let tokens = model.tokenizer.encode("hello world abc", true, true);
    assert!(tokens.len() >= 4, "{tokens:?}");
    let mut ctx = Context::new(Arc::clone(&model), &params(64)).unwrap();
    let ours = ctx.eval(&tokens, Logits::Last).unwrap();
    let want = reference_logits(&tokens);
    let spread = want.iter().cloned().fold(f64::MIN, f64::max)
        - want.iter().cloned().fold(f64::MAX, f64::min);
    let diff = max_abs_diff(&ours, &want);
    // Activations are quantized to 8 bits before each matmul: a few percent of the spread.
    assert!(
        diff < 0.05 * spread,
        "max |logit diff| {diff} vs spread {spread}"
    );
    // The check has teeth: the wrong RoPE pairing or no RoPE at all is far outside it.
    let shifted = reference_logits(&[tokens[0], tokens[2], tokens[1], tokens[3]]);
    assert!(max_abs_diff(&ours, &shifted) > 0.05 * spread);
}

#[test]
fn batch_and_one_by_one_agree_and_rewind_replays() {
    let model = load();
    let tokens = model.tokenizer.encode("abc hello ab world", true, false);
    let mut batch = Context::new(Arc::clone(&model), &params(64)).unwrap();
    let all = batch.eval(&tokens, Logits::All).unwrap();
    let n_vocab = model.hparams.n_vocab;
    assert_eq!(all.len(), tokens.len() * n_vocab);
    let mut single = Context::new(Arc::clone(&model), &params(64)).unwrap();
    for (i, &t) in tokens.iter().enumerate() {
        let l = single.eval(&[t], Logits::Last).unwrap();
        let row: Vec<f64> = all[i * n_vocab..(i + 1) * n_vocab]
            .iter()
            .map(|&v| v as f64)
            .collect();
        assert!(max_abs_diff(&l, &row) < 1e-2, "position {i}");
    }
    assert_eq!(single.n_past(), tokens.len());
    // Rewind to 2 tokens and replay the rest: same logits as before.
    single.truncate(2);
    let again = single.eval(&tokens[2..], Logits::Last).unwrap();
    let last: Vec<f64> = all[(tokens.len() - 1) * n_vocab..]
        .iter()
        .map(|&v| v as f64)
        .collect();
    assert!(max_abs_diff(&again, &last) < 1e-2);
    // Same input, same output, bit for bit.
    let mut again_ctx = Context::new(Arc::clone(&model), &params(64)).unwrap();
    assert_eq!(again_ctx.eval(&tokens, Logits::All).unwrap(), all);
}

#[test]
fn misuse_gets_errors_and_leaves_the_context_usable() {
    let model = load();
    let n_vocab = model.hparams.n_vocab;
    let mut ctx = Context::new(Arc::clone(&model), &params(8)).unwrap();
    assert!(matches!(
        ctx.eval(&[], Logits::Last),
        Err(ModelError::InvalidArgument(_))
    ));
    let e = ctx.eval(&[1, n_vocab as u32], Logits::Last).unwrap_err();
    assert!(
        matches!(e, ModelError::InvalidToken { .. })
            && e.to_string().contains(&n_vocab.to_string()),
        "{e}"
    );
    assert_eq!(ctx.n_past(), 0);
    ctx.eval(&[1, 5, 6, 7, 8, 9], Logits::Last).unwrap();
    let e = ctx.eval(&[10, 11, 12], Logits::Last).unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::ContextFull {
                n_ctx: 8,
                n_past: 6,
                requested: 3
            }
        ),
        "{e}"
    );
    assert_eq!(ctx.n_past(), 6);
    ctx.eval(&[10, 11], Logits::Last).unwrap();
    assert!(matches!(
        ctx.eval(&[12], Logits::Last),
        Err(ModelError::ContextFull { .. })
    ));
    assert!(
        Context::new(Arc::clone(&model), &params(129)).is_err(),
        "n_ctx above the trained context"
    );
    assert!(Context::new(model, &params(0)).is_err());
}

/// Three sequences decoded in interleaved batches (prompts of different lengths, then one token
/// each per step, one sequence truncated and refilled) give each sequence the logits it gets
/// alone in its own context.
#[test]
fn sequences_in_one_batch_match_separate_contexts() {
    let model = load();
    let n_vocab = model.hparams.n_vocab;
    let prompts: Vec<Vec<u32>> = ["abc hello", "world ab hello abc", "b"]
        .iter()
        .map(|p| model.tokenizer.encode(p, true, false))
        .collect();
    let multi_params = ContextParams {
        n_seq: 3,
        ..params(32)
    };
    let mut multi = Context::new(Arc::clone(&model), &multi_params).unwrap();
    let mut alone: Vec<Context> = (0..3)
        .map(|_| Context::new(Arc::clone(&model), &params(32)).unwrap())
        .collect();
    let compare = |got: &[f32], want: &[f32], what: &str| {
        let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
        assert!(max_abs_diff(got, &want) < 1e-2, "{what}");
    };
    // Step 0: every prompt in one batch, logits of each prompt's last token.
    let mut batch = Vec::new();
    for (seq, p) in prompts.iter().enumerate() {
        for (i, &token) in p.iter().enumerate() {
            batch.push(BatchToken {
                token,
                seq,
                logits: i + 1 == p.len(),
            });
        }
    }
    let out = multi.decode(&batch).unwrap();
    assert_eq!(out.len(), 3 * n_vocab);
    for seq in 0..3 {
        let want = alone[seq].eval(&prompts[seq], Logits::Last).unwrap();
        compare(&out[seq * n_vocab..(seq + 1) * n_vocab], &want, "prompt");
        assert_eq!(multi.seq_len(seq), prompts[seq].len());
    }
    // Steps 1..4: one token per sequence, in a different order each step; sequence 1 is
    // truncated to 2 tokens before step 3.
    for step in 1..5u32 {
        if step == 3 {
            multi.truncate_seq(1, 2);
            alone[1].truncate(2);
        }
        let order: Vec<usize> = if step % 2 == 0 {
            vec![2, 0, 1]
        } else {
            vec![1, 2, 0]
        };
        let batch: Vec<BatchToken> = order
            .iter()
            .map(|&seq| BatchToken {
                token: 3 + step + seq as u32,
                seq,
                logits: true,
            })
            .collect();
        let out = multi.decode(&batch).unwrap();
        for (row, &seq) in order.iter().enumerate() {
            let want = alone[seq].eval(&[batch[row].token], Logits::Last).unwrap();
            compare(&out[row * n_vocab..(row + 1) * n_vocab], &want, "step");
            assert_eq!(multi.seq_len(seq), alone[seq].n_past());
        }
    }
    // A bad sequence id or a full sequence is refused and changes nothing.
    let lens: Vec<usize> = (0..3).map(|s| multi.seq_len(s)).collect();
    let bad = [BatchToken {
        token: 1,
        seq: 3,
        logits: true,
    }];
    assert!(matches!(
        multi.decode(&bad),
        Err(ModelError::InvalidArgument(_))
    ));
    let overflow: Vec<BatchToken> = (0..60)
        .map(|i| BatchToken {
            token: 1,
            seq: i % 2,
            logits: false,
        })
        .collect();
    assert!(matches!(
        multi.decode(&overflow),
        Err(ModelError::ContextFull { .. })
    ));
    assert_eq!((0..3).map(|s| multi.seq_len(s)).collect::<Vec<_>>(), lens);
}

/// The repack cache: the first load writes it, the second maps it (same logits, bit for bit),
/// a corrupted or truncated cache is a miss that repacks and rewrites it, and another model at
/// the same path gets a cache file of its own.
#[test]
fn repack_cache_round_trips_and_rejects_bad_files() {
    use kolibri::model::LoadOptions;
    if !kolibri::kernels::repacks(GgmlType::Q8_0) {
        return; // nothing is repacked on this target
    }
    let dir = std::env::temp_dir().join(format!("kolibri-repack-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model_path = dir.join("tiny.gguf");
    std::fs::write(&model_path, tiny_model_bytes().0).unwrap();
    let load = || {
        let mut opts = LoadOptions {
            repack_cache: Some(dir.join("cache")),
            ..Default::default()
        };
        Arc::new(Model::load_with(&model_path, &mut opts).unwrap())
    };
    let logits = |m: &Arc<Model>| {
        let mut ctx = Context::new(Arc::clone(m), &params(32)).unwrap();
        ctx.eval(&[1, 5, 9, 3, 7], Logits::All).unwrap()
    };
    let cache_file = || {
        let files: Vec<_> = std::fs::read_dir(dir.join("cache"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(files.len() <= 1, "one cache file per model: {files:?}");
        files.into_iter().next()
    };

    let first = load();
    assert!(!first.repacked_from_cache);
    let want = logits(&first);
    let path = cache_file().expect("the first load writes the cache");
    let second = load();
    assert!(second.repacked_from_cache);
    assert_eq!(logits(&second), want);

    // Damage: one flipped byte in the last array, then a truncation. Each is a miss with the
    // same results, and the rewritten cache is used again.
    let damage: [fn(&mut Vec<u8>); 2] = [
        |b| {
            let at = b.len() - 3;
            b[at] ^= 0x10;
        },
        |b| b.truncate(b.len() / 2),
    ];
    for d in damage {
        let mut bytes = std::fs::read(&path).unwrap();
        d(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let m = load();
        assert!(!m.repacked_from_cache);
        assert_eq!(logits(&m), want);
        assert!(load().repacked_from_cache);
    }

    // A different model at the same path is not served the old weights: the cache is keyed
    // by content, so it is another file (the old one stays until `kolibri cache clear`).
    let (mut other, _) = tiny_model_bytes();
    let n = other.len();
    other[n - 40] ^= 0x01; // inside the last tensor (an f32 norm), file length unchanged
    std::fs::write(&model_path, &other).unwrap();
    let m = load();
    assert!(!m.repacked_from_cache);
    assert!(load().repacked_from_cache);
    let files: Vec<_> = std::fs::read_dir(dir.join("cache"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files.contains(&path),
        "the first model's file is still its own"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
