//! The status every fallible function returns, and how engine errors map onto it.

use std::ffi::c_char;

use crate::chat::ChatTemplateError;
use crate::gguf::GgufError;
use crate::model::ModelError;

/// Result of a Kolibri call. The values are fixed: new statuses get new numbers, old numbers
/// are never reused. `KOLIBRI_STATUS_OK` is 0; every other value is a failure whose details
/// are in `kolibri_last_error()`.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kolibri_status {
    Ok = 0,
    /// A required pointer was NULL, a value was out of range, a string was not UTF-8, or a
    /// params struct had a `struct_size` this library does not know.
    InvalidArgument = 1,
    /// The output buffer is too small; the size needed was written to the length output.
    BufferTooSmall = 2,
    /// The model file could not be opened, read, mapped or locked in memory.
    Io = 3,
    /// The file is not a valid GGUF model (corrupt, truncated, missing tensors or keys).
    InvalidModel = 4,
    /// Valid GGUF, but an architecture or tensor type Kolibri does not implement.
    Unsupported = 5,
    /// A token id outside `[0, n_vocab)`.
    InvalidToken = 6,
    /// The context cannot hold the tokens given; rewind it or create a larger one.
    ContextFull = 7,
    /// A progress or abort callback asked to stop; nothing was changed.
    Cancelled = 8,
    /// The metadata key, special token or chat template asked for does not exist.
    NotFound = 9,
    /// The chat template does not parse, or failed (or refused) to render these messages.
    TemplateError = 10,
    /// The call is not valid now: no logits yet, a handle used from two threads at once, or a
    /// handle disabled by an earlier internal panic.
    InvalidState = 11,
    /// An allocation the call needed failed.
    OutOfMemory = 12,
    /// An internal error (a bug); the message says what.
    Internal = 13,
    /// An internal panic was caught at the API boundary (a bug); the handle involved is
    /// disabled, the process is unaffected.
    Panic = 14,
}

/// A failure on its way to the caller: the status returned and the message stored as the
/// thread's last error.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub status: kolibri_status,
    pub message: String,
}

impl Failure {
    pub fn new(status: kolibri_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(kolibri_status::InvalidArgument, message)
    }
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Failure {
        use kolibri_status as S;
        let status = match &e {
            ModelError::Gguf(GgufError::Io { .. }) | ModelError::Io(_) => S::Io,
            ModelError::Gguf(GgufError::UnsupportedVersion(_))
            | ModelError::Gguf(GgufError::UnknownTensorType { .. })
            | ModelError::UnknownArchitecture(_)
            | ModelError::UnsupportedTensorType { .. } => S::Unsupported,
            ModelError::Gguf(_)
            | ModelError::MissingKey(_)
            | ModelError::BadHyperparameter { .. }
            | ModelError::MissingTensor(_)
            | ModelError::BadTensorShape { .. }
            | ModelError::Tokenizer(_) => S::InvalidModel,
            ModelError::ContextFull { .. } => S::ContextFull,
            ModelError::InvalidToken { .. } => S::InvalidToken,
            ModelError::Compute(_) => S::Internal,
            ModelError::InvalidArgument(_) => S::InvalidArgument,
            ModelError::Cancelled => S::Cancelled,
        };
        let message = match e {
            // The status already says "invalid argument".
            ModelError::InvalidArgument(detail) => detail,
            other => other.to_string(),
        };
        Failure::new(status, message)
    }
}

impl From<ChatTemplateError> for Failure {
    fn from(e: ChatTemplateError) -> Failure {
        let status = match e {
            ChatTemplateError::NoTemplate => kolibri_status::NotFound,
            _ => kolibri_status::TemplateError,
        };
        Failure::new(status, e.to_string())
    }
}

/// A static, NUL-terminated English name for `status` ("ok", "invalid argument", ...);
/// unknown values give "unknown status".
///
/// **Ownership:** the string is static; never free it.
/// **Errors:** none.
/// **Thread safety:** callable from any thread.
#[no_mangle]
pub extern "C" fn kolibri_status_string(status: i32) -> *const c_char {
    let s: &'static [u8] = match status {
        0 => b"ok\0",
        1 => b"invalid argument\0",
        2 => b"buffer too small\0",
        3 => b"i/o error\0",
        4 => b"invalid model\0",
        5 => b"unsupported\0",
        6 => b"invalid token\0",
        7 => b"context full\0",
        8 => b"cancelled\0",
        9 => b"not found\0",
        10 => b"chat template error\0",
        11 => b"invalid state\0",
        12 => b"out of memory\0",
        13 => b"internal error\0",
        14 => b"internal panic\0",
        _ => b"unknown status\0",
    };
    s.as_ptr().cast()
}
