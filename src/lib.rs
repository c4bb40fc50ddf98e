//! Kolibri: a CPU-first inference engine for GGUF language models.
//!
//! Layout (one module per concern):
//! - [`gguf`]: zero-copy reader of the GGUF container (metadata + tensor table).
//! - [`quant`]: ggml block layouts, scalar dequantization, activation quantizers.
//! - [`kernels`]: dot-product / matmul kernels (scalar reference + SIMD), runtime dispatch.
//! - [`model`]: hyperparameters, weights, KV cache and the transformer forward pass.
//! - [`tokenizer`]: GPT-2 byte-level BPE and SentencePiece-style tokenizers.
//! - [`sampling`]: logits processing and token sampling.

pub mod gguf;
pub mod kernels;
pub mod model;
pub mod perplexity;
pub mod quant;
pub mod sampling;
pub mod tokenizer;
