//! Errors from loading a model or running a context.

use std::fmt;

use crate::gguf::GgufError;
use crate::quant::GgmlType;

#[derive(Debug)]
pub enum ModelError {
    Gguf(GgufError),
    /// `general.architecture` names an architecture Kolibri does not implement.
    UnknownArchitecture(String),
    /// A required metadata key is absent or has the wrong type.
    MissingKey(String),
    /// A metadata value is present but unusable (zero heads, head count not dividing, ...).
    BadHyperparameter {
        key: String,
        reason: String,
    },
    MissingTensor(String),
    BadTensorShape {
        tensor: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    UnsupportedTensorType {
        tensor: String,
        ty: GgmlType,
    },
    Tokenizer(String),
    /// The context cannot hold `requested` more tokens after the `n_past` it holds.
    ContextFull {
        n_ctx: usize,
        n_past: usize,
        requested: usize,
    },
    InvalidToken {
        token: u32,
        n_vocab: usize,
    },
    /// A kernel rejected a computation (a bug if it happens after a successful load).
    Compute(String),
    /// Bad argument to an API call (empty batch, n_ctx above the trained context, ...).
    InvalidArgument(String),
    /// Reading, mapping or locking the model file failed.
    Io(String),
    /// A progress or abort callback asked to stop.
    Cancelled,
    /// An allocation failed (the KV cache of a very long context).
    OutOfMemory(String),
    /// Saved state that cannot be loaded here: truncated, corrupted, saved from another model
    /// or cache layout, or in another format version.
    BadState(String),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ModelError::*;
        match self {
            Gguf(e) => write!(f, "{e}"),
            UnknownArchitecture(a) => write!(
                f,
                "unknown architecture {a:?} (supported: {})",
                super::Architecture::supported().join(", ")
            ),
            MissingKey(k) => write!(f, "missing or mistyped metadata key {k:?}"),
            BadHyperparameter { key, reason } => write!(f, "metadata {key:?}: {reason}"),
            MissingTensor(t) => write!(f, "missing tensor {t:?}"),
            BadTensorShape {
                tensor,
                expected,
                found,
            } => {
                write!(
                    f,
                    "tensor {tensor:?} has shape {found:?}, expected {expected:?}"
                )
            }
            UnsupportedTensorType { tensor, ty } => {
                write!(
                    f,
                    "tensor {tensor:?} has type {ty}, which Kolibri cannot compute with"
                )
            }
            Tokenizer(e) => write!(f, "tokenizer: {e}"),
            ContextFull {
                n_ctx,
                n_past,
                requested,
            } => write!(
                f,
                "context full: {n_past} of {n_ctx} positions used, {requested} more requested"
            ),
            InvalidToken { token, n_vocab } => {
                write!(
                    f,
                    "token id {token} is out of range (vocabulary has {n_vocab})"
                )
            }
            Compute(s) => write!(f, "computation failed: {s}"),
            InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Io(s) => write!(f, "{s}"),
            Cancelled => write!(f, "cancelled by the caller's callback"),
            OutOfMemory(s) => write!(f, "out of memory: {s}"),
            BadState(s) => write!(f, "saved state: {s}"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Gguf(e) => Some(e),
            _ => None,
        }
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        ModelError::Gguf(e)
    }
}
