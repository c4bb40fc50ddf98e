//! `perplexity` on tests/data/ppl-text.txt with 256-token chunks, against llama-perplexity
//! (same method, same text): within 0.5%.

mod common;

use std::sync::Arc;

use kolibri::model::{Context, ContextParams, Model};
use kolibri::perplexity::{perplexity, tokenize_for_perplexity};

const N_CTX: usize = 256;

fn check(model_file: &str, reference_ppl: f64) {
    let model = Arc::new(Model::load(common::model_path(model_file)).unwrap());
    let params = ContextParams {
        n_ctx: N_CTX,
        n_threads: common::threads(),
        n_batch: N_CTX,
        n_seq: 1,
        ..Default::default()
    };
    let mut ctx = Context::new(model, &params).unwrap();
    let text = std::fs::read_to_string(common::data_path("ppl-text.txt")).unwrap();
    let tokens = tokenize_for_perplexity(&ctx, &text);
    let report = perplexity(&mut ctx, &tokens, None, |_, _| {}).unwrap();
    let rel = (report.ppl - reference_ppl).abs() / reference_ppl;
    eprintln!(
        "{model_file}: PPL {:.4} +/- {:.4} over {} chunks ({} scored); llama.cpp {reference_ppl}; diff {:.3}%",
        report.ppl,
        report.ppl_stderr,
        report.per_chunk.len(),
        report.n_scored,
        rel * 100.0
    );
    assert_eq!(
        report.per_chunk.len(),
        29,
        "llama-perplexity scored 29 chunks of this text"
    );
    assert!(
        rel < 0.005,
        "PPL {} differs from llama.cpp's {reference_ppl} by {:.3}%",
        report.ppl,
        rel * 100.0
    );
}

#[test]
fn gemma3_270m_perplexity() {
    check("gemma-3-270m-q4_k_m.gguf", 16.4292);
}

#[test]
fn qwen25_coder_05b_perplexity() {
    check("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 5.9706);
}

#[test]
fn qwen25_coder_15b_perplexity() {
    check("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1.9150);
}
