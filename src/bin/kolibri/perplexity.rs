//! `kolibri perplexity`: llama-perplexity's chunked perplexity over a text file.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use kolibri::model::{Context, ContextParams};
use kolibri::perplexity::{perplexity, tokenize_for_perplexity};

use crate::args::Args;

pub fn main(raw: &[String]) -> Result<(), String> {
    let a = Args::parse(
        "perplexity",
        raw,
        &[
            "-m",
            "--model",
            "-hf",
            "--hf-repo",
            "-f",
            "--file",
            "-c",
            "--ctx-size",
            "-t",
            "--threads",
            "--chunks",
        ]
        .into_iter()
        .chain(crate::KV_TYPE_FLAGS)
        .collect::<Vec<_>>(),
        &crate::LOAD_SWITCHES,
    )?;
    let path = &crate::model_path(&a)?;
    let file = a.require(&["-f", "--file"])?;
    let n_ctx: usize = a.parse_or(&["-c", "--ctx-size"], 512)?;
    let n_threads: usize = a.parse_or(&["-t", "--threads"], crate::default_threads())?;
    let max_chunks: Option<usize> = a
        .get(&["--chunks"])
        .map(str::parse)
        .transpose()
        .map_err(|_| "bad --chunks")?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;

    let model = Arc::new(crate::load_model(path, &a)?);
    let (type_k, type_v) = crate::kv_types(&a)?;
    let params = ContextParams {
        n_ctx,
        n_threads,
        n_batch: n_ctx,
        n_seq: 1,
        type_k,
        type_v,
    };
    let mut ctx = Context::new(model, &params).map_err(|e| e.to_string())?;
    let tokens = tokenize_for_perplexity(&ctx, &text);
    eprintln!(
        "{} tokens, {} chunks of {n_ctx}",
        tokens.len(),
        tokens.len() / n_ctx
    );
    let t0 = Instant::now();
    let report = perplexity(&mut ctx, &tokens, max_chunks, |i, p| {
        eprint!("[{}]{p:.4},", i + 1);
        let _ = std::io::stderr().flush();
    })
    .map_err(|e| e.to_string())?;
    eprintln!();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "Final estimate: PPL = {:.4} +/- {:.5}",
        report.ppl, report.ppl_stderr
    );
    eprintln!(
        "{} chunks in {secs:.1} s ({:.1} tokens/s)",
        report.per_chunk.len(),
        (report.per_chunk.len() * n_ctx) as f64 / secs
    );
    Ok(())
}
