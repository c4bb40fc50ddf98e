//! `kolibri_assistant`: Gemma 4's assistant drafter (a `gemma4-assistant` file), loaded for
//! one target model; a speculator drafts with it (kolibri_speculator_new_assistant).

use std::ffi::c_char;
use std::sync::Arc;

use super::guard::{c_str_path, free_boxed, guard, guard_void, handle, into_raw, out_ptr, write};
use super::model::kolibri_model;
use super::status::*;
use crate::model::{Assistant, LoadOptions};

/// An assistant drafter, bound to the model it was loaded for. Immutable once loaded.
///
/// Thread safety: a `const kolibri_assistant*` may be used from any number of threads at once.
pub struct kolibri_assistant {
    pub(crate) assistant: Arc<Assistant>,
}

/// Loads the assistant file at `path` for `target`, checking that it belongs to it (a Gemma 4
/// target, the same vocabulary, its input as wide as the target's hidden state, head sizes
/// that match the target's cache). It keeps no KV cache: it reads the target context's.
///
/// **Ownership:** `*out_assistant` is the caller's; free it with kolibri_assistant_free
/// (speculators created from it keep what they need).
/// **Errors:** INVALID_ARGUMENT (a NULL argument, a file that is not an assistant, an
/// assistant for another model), IO, INVALID_MODEL (corrupt file, missing tensors or keys).
/// **Thread safety:** any thread.
///
/// # Safety
/// `target` is NULL or live; `path` is NULL or a NUL-terminated string; `out_assistant` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_assistant_load(
    target: *const kolibri_model,
    path: *const c_char,
    out_assistant: *mut *mut kolibri_assistant,
) -> kolibri_status {
    guard(|| {
        let out = out_ptr(out_assistant, "out_assistant")?;
        // SAFETY: per this function's contract.
        let target = unsafe { handle(target, "target") }?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_str_path(path, "path") }?;
        let assistant = Assistant::load(&path, &target.model, &mut LoadOptions::default())?;
        let handle = kolibri_assistant {
            assistant: Arc::new(assistant),
        };
        // SAFETY: `out` checked above.
        unsafe { write(out, into_raw(handle)) };
        Ok(())
    })
}

/// Frees an assistant. NULL is a no-op. Speculators created from it stay usable.
///
/// **Ownership:** `assistant` is invalid after this call.
/// **Errors:** none; freeing the same handle twice is undefined behaviour.
/// **Thread safety:** no other thread may be using this handle.
///
/// # Safety
/// `assistant` is NULL or a live handle from kolibri_assistant_load, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kolibri_assistant_free(assistant: *mut kolibri_assistant) {
    // SAFETY: per this function's contract.
    guard_void(|| unsafe { free_boxed(assistant) })
}
