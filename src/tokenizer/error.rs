//! Errors raised while building a tokenizer from GGUF metadata.

use std::fmt;

#[derive(Debug)]
pub enum TokenizerError {
    /// A required metadata key is absent.
    MissingKey(&'static str),
    /// A key is present but its value has the wrong type or is out of range.
    BadKey { key: &'static str, reason: String },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    UnsupportedPreTokenizer(String),
    /// A built-in pre-tokenizer regex failed to compile (a bug, reported rather than panicking).
    Regex { pattern: String, reason: String },
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::MissingKey(key) => write!(f, "missing tokenizer metadata key `{key}`"),
            TokenizerError::BadKey { key, reason } => {
                write!(f, "bad tokenizer metadata key `{key}`: {reason}")
            }
            TokenizerError::UnsupportedModel(m) => write!(
                f,
                "unsupported tokenizer model `{m}` (key `tokenizer.ggml.model`; supported: llama, gpt2, bert)"
            ),
            TokenizerError::UnsupportedPreTokenizer(p) => {
                write!(f, "unsupported pre-tokenizer `{p}` (key `tokenizer.ggml.pre`)")
            }
            TokenizerError::Regex { pattern, reason } => {
                write!(f, "pre-tokenizer regex `{pattern}` failed to compile: {reason}")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}
