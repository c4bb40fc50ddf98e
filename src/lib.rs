//! Kolibri: a CPU-first inference engine for GGUF language models.
//!
//! Layout (one module per concern):
//! - [`gguf`]: zero-copy reader of the GGUF container (metadata + tensor table), split models'
//!   parts as one file.
//! - [`hub`]: models by Hugging Face name: the name, the files llama.cpp would pick, the local
//!   Hugging Face cache.
//! - [`quant`]: ggml block layouts, scalar dequantization, activation quantizers.
//! - [`kernels`]: dot-product / matmul kernels (scalar reference + SIMD), runtime dispatch.
//! - [`model`]: hyperparameters, weights, KV cache and the transformer forward pass.
//! - [`parallel`]: the persistent worker pool (spinning between a token's parallel loops).
//! - [`tokenizer`]: GPT-2 byte-level BPE and SentencePiece-style tokenizers.
//! - [`sampling`]: logits processing and token sampling.
//! - [`grammar`]: constrained sampling (JSON schema, GBNF, Lark, regex; feature `grammar`).
//! - [`chat`]: the model's Jinja chat template, rendered like Hugging Face does.
//! - [`speculative`]: speculative decoding (a draft model or prompt lookup, verified in one pass).
//! - [`batching`]: continuous batching of many requests over one multi-sequence context.
//! - [`server`]: the OpenAI- and Ollama-compatible HTTP server (feature `server`).
//! - [`capi`]: the C ABI over all of the above (`include/kolibri.h`).

// Unsafe operations inside an `unsafe fn` need their own block and its SAFETY comment, as
// everywhere else.
#![warn(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod batching;
pub mod capi;
pub mod chat;
pub mod gguf;
#[cfg(feature = "grammar")]
pub mod grammar;
pub mod hub;
pub mod kernels;
pub mod model;
pub mod parallel;
pub mod perplexity;
pub mod quant;
pub mod quantize;
pub mod sampling;
#[cfg(feature = "server")]
pub mod server;
pub mod speculative;
pub mod store;
pub mod tokenizer;
