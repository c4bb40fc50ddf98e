//! The status every fallible function returns, and how engine errors map onto it.

use std::ffi::c_char;

use crate::chat::ChatTemplateError;
use crate::gguf::GgufError;
use crate::model::ModelError;

// The C API names statuses with constants, not a Rust enum: any int32_t a caller passes
// back is then a valid value, and C/Swift/Go see one plain type.

/// Result of a Kolibri call: a fixed-width integer, one of the `KOLIBRI_STATUS_*` values. The
/// values are fixed: new statuses get new numbers, old numbers are never reused.
/// `KOLIBRI_STATUS_OK` is 0; every other value is a failure whose details are in
/// `kolibri_last_error()`.
pub type kolibri_status = i32;

/// The call succeeded.
pub const KOLIBRI_STATUS_OK: kolibri_status = 0;
/// A required pointer was NULL, a value was out of range, a string was not UTF-8, or a
/// params struct had a `struct_size` this library does not know.
pub const KOLIBRI_STATUS_INVALID_ARGUMENT: kolibri_status = 1;
/// The output buffer is too small; the size needed was written to the length output.
pub const KOLIBRI_STATUS_BUFFER_TOO_SMALL: kolibri_status = 2;
/// The model file could not be opened, read, mapped or locked in memory.
pub const KOLIBRI_STATUS_IO: kolibri_status = 3;
/// The file is not a valid GGUF model (corrupt, truncated, missing tensors or keys).
pub const KOLIBRI_STATUS_INVALID_MODEL: kolibri_status = 4;
/// Valid GGUF, but an architecture or tensor type Kolibri does not implement.
pub const KOLIBRI_STATUS_UNSUPPORTED: kolibri_status = 5;
/// A token id outside `[0, n_vocab)`.
pub const KOLIBRI_STATUS_INVALID_TOKEN: kolibri_status = 6;
/// The context cannot hold the tokens given; rewind it or create a larger one.
pub const KOLIBRI_STATUS_CONTEXT_FULL: kolibri_status = 7;
/// A progress or abort callback asked to stop; nothing was changed.
pub const KOLIBRI_STATUS_CANCELLED: kolibri_status = 8;
/// The metadata key, special token or chat template asked for does not exist.
pub const KOLIBRI_STATUS_NOT_FOUND: kolibri_status = 9;
/// The chat template does not parse, or failed (or refused) to render these messages.
pub const KOLIBRI_STATUS_TEMPLATE_ERROR: kolibri_status = 10;
/// The call is not valid now: no logits yet, a handle used from two threads at once, or a
/// handle disabled by an earlier internal panic.
pub const KOLIBRI_STATUS_INVALID_STATE: kolibri_status = 11;
/// An allocation the call needed failed.
pub const KOLIBRI_STATUS_OUT_OF_MEMORY: kolibri_status = 12;
/// An internal error (a bug); the message says what.
pub const KOLIBRI_STATUS_INTERNAL: kolibri_status = 13;
/// An internal panic was caught at the API boundary (a bug); the handle involved is
/// disabled, the process is unaffected.
pub const KOLIBRI_STATUS_PANIC: kolibri_status = 14;
/// Saved state that cannot be loaded into this context: truncated, corrupted, saved from
/// another model or KV cache type, or in another format version. The context is unchanged.
pub const KOLIBRI_STATUS_BAD_STATE: kolibri_status = 15;

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
        Failure::new(KOLIBRI_STATUS_INVALID_ARGUMENT, message)
    }
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Failure {
        let status = match &e {
            ModelError::Gguf(g) => match g.root() {
                GgufError::Io { .. } => KOLIBRI_STATUS_IO,
                GgufError::UnsupportedVersion(_) | GgufError::UnknownTensorType { .. } => {
                    KOLIBRI_STATUS_UNSUPPORTED
                }
                _ => KOLIBRI_STATUS_INVALID_MODEL,
            },
            ModelError::Io(_) => KOLIBRI_STATUS_IO,
            ModelError::UnknownArchitecture(_) | ModelError::UnsupportedTensorType { .. } => {
                KOLIBRI_STATUS_UNSUPPORTED
            }
            ModelError::MissingKey(_)
            | ModelError::BadHyperparameter { .. }
            | ModelError::MissingTensor(_)
            | ModelError::BadTensorShape { .. }
            | ModelError::Tokenizer(_) => KOLIBRI_STATUS_INVALID_MODEL,
            ModelError::ContextFull { .. } => KOLIBRI_STATUS_CONTEXT_FULL,
            ModelError::InvalidToken { .. } => KOLIBRI_STATUS_INVALID_TOKEN,
            ModelError::Compute(_) => KOLIBRI_STATUS_INTERNAL,
            ModelError::InvalidArgument(_) => KOLIBRI_STATUS_INVALID_ARGUMENT,
            ModelError::Cancelled => KOLIBRI_STATUS_CANCELLED,
            ModelError::OutOfMemory(_) => KOLIBRI_STATUS_OUT_OF_MEMORY,
            ModelError::BadState(_) => KOLIBRI_STATUS_BAD_STATE,
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
            ChatTemplateError::NoTemplate => KOLIBRI_STATUS_NOT_FOUND,
            _ => KOLIBRI_STATUS_TEMPLATE_ERROR,
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
pub extern "C" fn kolibri_status_string(status: kolibri_status) -> *const c_char {
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
        15 => b"bad saved state\0",
        _ => b"unknown status\0",
    };
    s.as_ptr().cast()
}
