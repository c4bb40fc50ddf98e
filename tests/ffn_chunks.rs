//! A prompt pass longer than the dense FFN's token chunk (the 1.5B's 8960-wide FFN goes in
//! chunks of 256 tokens) gives every token the logits it gets in passes of at most 256 tokens,
//! which never chunk: a chunk that read or wrote the wrong rows would be far off.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, Logits, Model};

#[test]
fn chunked_ffn_matches_unchunked_passes() {
    let path = common::model_path("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    let model = Arc::new(Model::load(path).unwrap());
    let text = std::fs::read_to_string(common::data_path("ppl-text.txt")).unwrap();
    let tokens: Vec<u32> = model.tokenizer.encode(&text, true, false)[..600].to_vec();
    let logits = |n_batch: usize| {
        let params = ContextParams {
            n_ctx: 640,
            n_batch,
            n_threads: common::threads(),
            ..Default::default()
        };
        let mut ctx = Context::new(Arc::clone(&model), &params).unwrap();
        ctx.eval(&tokens, Logits::All).unwrap()
    };
    let (one_pass, small_passes) = (logits(600), logits(200));
    let n_vocab = model.hparams.n_vocab;
    for (t, (a, b)) in one_pass
        .chunks(n_vocab)
        .zip(small_passes.chunks(n_vocab))
        .enumerate()
    {
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        let argmax = |v: &[f32]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
        assert!(worst < 0.05, "token {t}: logits differ by {worst}");
        let close = (a[argmax(a)] - a[argmax(b)]).abs() < 0.05;
        assert!(argmax(a) == argmax(b) || close, "token {t}");
    }
}
