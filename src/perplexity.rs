//! Perplexity with llama-perplexity's method: the text is cut into consecutive chunks of
//! `n_ctx` tokens, each evaluated from an empty cache (its first token replaced by BOS when the
//! model adds one), and only the second half of each chunk is scored, so every scored token has
//! at least n_ctx/2 tokens of context.

use crate::model::{Context, Logits, ModelError};
use crate::tokenizer::TokenId;

#[derive(Clone, Debug)]
pub struct PerplexityReport {
    /// Running perplexity after each chunk.
    pub per_chunk: Vec<f64>,
    pub ppl: f64,
    /// Standard error of the estimate (as llama-perplexity reports it).
    pub ppl_stderr: f64,
    pub n_scored: usize,
}

/// Tokenize `text` the way llama-perplexity does (special tokens added, not parsed).
pub fn tokenize_for_perplexity(ctx: &Context, text: &str) -> Vec<TokenId> {
    ctx.model().tokenizer.encode(text, true, false)
}

/// Scores `tokens` in chunks of the context's size. `max_chunks` limits the work (None: all).
/// `on_chunk` is told each chunk's running perplexity.
pub fn perplexity(
    ctx: &mut Context,
    tokens: &[TokenId],
    max_chunks: Option<usize>,
    mut on_chunk: impl FnMut(usize, f64),
) -> Result<PerplexityReport, ModelError> {
    let n_ctx = ctx.n_ctx();
    if n_ctx < 4 || tokens.len() < 2 * n_ctx {
        return Err(ModelError::InvalidArgument(format!(
            "need at least 2 * n_ctx = {} tokens, the text has {}",
            2 * n_ctx,
            tokens.len()
        )));
    }
    let model = std::sync::Arc::clone(ctx.model());
    let bos = model
        .tokenizer
        .add_bos()
        .then(|| model.tokenizer.bos())
        .flatten();
    let n_vocab = model.hparams.n_vocab;
    let n_chunks = (tokens.len() / n_ctx).min(max_chunks.unwrap_or(usize::MAX));
    let first = n_ctx / 2;

    let (mut nll, mut nll2, mut count) = (0f64, 0f64, 0usize);
    let mut per_chunk = Vec::with_capacity(n_chunks);
    for c in 0..n_chunks {
        let mut chunk = tokens[c * n_ctx..(c + 1) * n_ctx].to_vec();
        if let Some(b) = bos {
            chunk[0] = b;
        }
        ctx.truncate(0);
        // Only positions first.. are scored: skip the output head for the rest.
        let logits = ctx.eval(&chunk, Logits::Tail(n_ctx - first))?;
        for j in first..n_ctx - 1 {
            let row = &logits[(j - first) * n_vocab..(j - first + 1) * n_vocab];
            let target = tokens[c * n_ctx + j + 1] as usize;
            let v = -log_prob(row, target);
            nll += v;
            nll2 += v * v;
            count += 1;
        }
        let running = (nll / count as f64).exp();
        per_chunk.push(running);
        on_chunk(c, running);
    }
    let mean = nll / count as f64;
    let var = (nll2 / count as f64 - mean * mean).max(0.0);
    let ppl = mean.exp();
    let ppl_stderr = if count > 1 {
        ppl * (var / (count - 1) as f64).sqrt()
    } else {
        0.0
    };
    Ok(PerplexityReport {
        per_chunk,
        ppl,
        ppl_stderr,
        n_scored: count,
    })
}

/// log softmax(row)[target], computed in f64 for a stable sum over large vocabularies.
fn log_prob(row: &[f32], target: usize) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    row[target] as f64 - max - sum.ln()
}
