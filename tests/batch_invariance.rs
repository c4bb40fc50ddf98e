//! Speculative decoding's exactness rests on this: a token's logits are the same bits whether
//! it is evaluated alone or inside a small batch of its sequence's next tokens (a verify
//! pass), on every kernel path and across attention's kernel boundaries.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, KvType, Logits, Model};
use kolibri::sampling::argmax;

const QWEN_05B: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// Greedy-decodes `steps` tokens one at a time after `prompt`, then evaluates the same tokens
/// in batches of `batch` in a fresh context, and counts the rows whose logits differ.
fn rows_differing(
    model: &Arc<Model>,
    params: &ContextParams,
    prompt: &[u32],
    steps: usize,
    batch: usize,
) -> usize {
    let mut one = Context::new(Arc::clone(model), params).unwrap();
    let mut logits = one.eval(prompt, Logits::Last).unwrap();
    let (mut singles, mut tokens) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        let t = argmax(&logits);
        tokens.push(t);
        logits = one.eval(&[t], Logits::Last).unwrap();
        singles.push(logits.clone());
    }
    let mut many = Context::new(Arc::clone(model), params).unwrap();
    many.eval(prompt, Logits::Last).unwrap();
    let n_vocab = model.hparams.n_vocab;
    let mut batched = Vec::new();
    for chunk in tokens.chunks(batch) {
        let l = many.eval(chunk, Logits::All).unwrap();
        batched.extend(l.chunks(n_vocab).map(<[f32]>::to_vec));
    }
    singles.iter().zip(&batched).filter(|(a, b)| a != b).count()
}

fn params(n_ctx: usize, kv: KvType) -> ContextParams {
    ContextParams {
        n_ctx,
        n_threads: common::threads(),
        type_k: kv,
        type_v: kv,
        ..Default::default()
    }
}

#[test]
fn verify_sized_batches_match_single_tokens() {
    for file in [QWEN_05B, "gemma-3-270m-q4_k_m.gguf"] {
        let model = Arc::new(Model::load(common::model_path(file)).unwrap());
        let prompt = model.tokenizer.encode("def fibonacci(n):", true, true);
        for batch in [2, 5, 16, 17] {
            let n = rows_differing(&model, &params(256, KvType::F16), &prompt, 17, batch);
            assert_eq!(n, 0, "{file}, batches of {batch}: {n} rows differ");
        }
    }
}

/// A batch whose queries fall on both sides of the depth where attention changes kernels,
/// with f16 and with q8_0 keys and values.
#[test]
fn batches_across_the_attention_split_match_single_tokens() {
    let model = Arc::new(Model::load(common::model_path(QWEN_05B)).unwrap());
    let text = std::fs::read_to_string(common::data_path("ppl-text.txt")).unwrap();
    let mut prompt = model.tokenizer.encode(&text, true, false);
    // Positions 1020..1025 see 1021..1026 rows: the split at 1024 falls inside the first batch.
    prompt.truncate(1020);
    for kv in [KvType::F16, KvType::Q8_0] {
        let n = rows_differing(&model, &params(1100, kv), &prompt, 12, 6);
        assert_eq!(n, 0, "{kv:?}: {n} rows differ");
    }
}
