//! Saving and loading a context: its tokens, KV cache and last logits, to a buffer or a file
//! and back, so a long prompt is evaluated once (in this process or a later one).
//!
//! The saved bytes name their model (another model's state is refused), carry a format
//! version and a checksum; a state that does not fit is refused with BAD_STATE and the
//! context is left as it was.

use std::ffi::c_char;
use std::io::Cursor;

use super::context::kolibri_context;
use super::guard::{c_str_path, guard, handle, out_ptr, slice, write, write_array};
use super::status::*;

/// The size in bytes of the context's saved state (what kolibri_context_state_save writes).
///
/// **Ownership:** writes the caller's output; nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `out_size` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_state_size(
    context: *const kolibri_context,
    out_size: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let out = out_ptr(out_size, "out_size")?;
        let state = c.inner.lock("context")?;
        let size = state.ctx.seq_state_size(0, state.logits.len())?;
        // SAFETY: checked above.
        unsafe { write(out, size as usize) };
        Ok(())
    })
}

/// Saves the context's state (tokens, KV cache rows as stored, logits of the last position)
/// into `buf`. `*out_size` receives its size; if `capacity` is smaller, only the size is
/// written and BUFFER_TOO_SMALL returned (`buf` may be NULL when `capacity` is 0).
///
/// **Ownership:** writes the caller's buffer; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `context` or `out_size`, NULL `buf` with a capacity),
/// BUFFER_TOO_SMALL, INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `buf` is NULL or writable for `capacity` bytes; `out_size` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_state_save(
    context: *const kolibri_context,
    buf: *mut u8,
    capacity: usize,
    out_size: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let state = c.inner.lock("context")?;
        let size = state.ctx.seq_state_size(0, state.logits.len())? as usize;
        let out = out_ptr(out_size, "out_size")?;
        if buf.is_null() && capacity > 0 {
            return Err(Failure::invalid("buf is NULL but capacity is not 0"));
        }
        if capacity < size {
            // SAFETY: checked above.
            unsafe { write(out, size) };
            return Err(Failure::new(
                KOLIBRI_STATUS_BUFFER_TOO_SMALL,
                format!("buffer of {capacity} bytes is too small: the state takes {size}"),
            ));
        }
        // SAFETY: per this function's contract `buf` is writable for `capacity >= size`
        // bytes (and not NULL: `size` is never 0).
        let dest = unsafe { std::slice::from_raw_parts_mut(buf, size) };
        let n = state
            .ctx
            .save_seq(0, &state.logits, &mut Cursor::new(dest))?;
        // SAFETY: checked above.
        unsafe { write(out, n as usize) };
        Ok(())
    })
}

/// Loads a state saved by kolibri_context_state_save (from a context on the same model with
/// the same KV cache types) into `context`, replacing what it held: its tokens, cache and
/// logits are the saved context's, and evaluation continues bit-identically.
///
/// **Ownership:** `buf` is only read during the call; logits pointers from this context
/// become invalid.
/// **Errors:** INVALID_ARGUMENT (NULL `context`, NULL `buf` with a size), BAD_STATE
/// (truncated, corrupted, another model's or cache layout's, another format version, more
/// tokens than the context holds: the context is unchanged), INVALID_STATE (in use by
/// another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `buf` is NULL or readable for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_state_load(
    context: *mut kolibri_context,
    buf: *const u8,
    size: usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context.cast_const(), "context") }?;
        // SAFETY: per this function's contract.
        let bytes = unsafe { slice(buf, size, "buf") }?;
        let mut state = c.inner.lock("context")?;
        let logits = state.ctx.load_seq(0, &mut Cursor::new(bytes))?;
        state.logits = logits;
        Ok(())
    })
}

/// kolibri_context_state_save to the file at `path`, written beside it and renamed into
/// place (a failure never leaves a partial file where a good one was).
///
/// **Ownership:** nothing to free.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), IO (cannot write the file),
/// INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_state_save_file(
    context: *const kolibri_context,
    path: *const c_char,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_str_path(path, "path") }?;
        let state = c.inner.lock("context")?;
        state.ctx.save_seq_file(0, &state.logits, &path)?;
        Ok(())
    })
}

/// kolibri_context_state_load from the file at `path`.
///
/// **Ownership:** nothing to free; logits pointers from this context become invalid.
/// **Errors:** INVALID_ARGUMENT (a NULL argument), IO (cannot open or read the file),
/// BAD_STATE (as kolibri_context_state_load; the context is unchanged), INVALID_STATE (in use
/// by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_state_load_file(
    context: *mut kolibri_context,
    path: *const c_char,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context.cast_const(), "context") }?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_str_path(path, "path") }?;
        let mut state = c.inner.lock("context")?;
        let logits = state.ctx.load_seq_file(0, &path)?;
        state.logits = logits;
        Ok(())
    })
}

/// The tokens the context holds, in position order (after a load: the saved ones), into
/// `buf`. `*out_count` receives their number; if `capacity` is smaller, only the count is
/// written and BUFFER_TOO_SMALL returned (`buf` may be NULL when `capacity` is 0).
///
/// **Ownership:** writes the caller's buffer; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `context` or `out_count`, NULL `buf` with a capacity),
/// BUFFER_TOO_SMALL, INVALID_STATE (in use by another thread).
/// **Thread safety:** one thread at a time per context.
///
/// # Safety
/// `context` is NULL or live; `buf` is NULL or writable for `capacity` ids; `out_count` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_context_tokens(
    context: *const kolibri_context,
    buf: *mut i32,
    capacity: usize,
    out_count: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let c = unsafe { handle(context, "context") }?;
        let state = c.inner.lock("context")?;
        let ids: Vec<i32> = state.ctx.seq_tokens(0).iter().map(|&t| t as i32).collect();
        // SAFETY: per this function's contract.
        unsafe { write_array(&ids, buf, capacity, out_count) }
    })
}
