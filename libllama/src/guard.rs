//! The boundary's rules in one place: no panic unwinds into C, NULL handles are refused, and C
//! strings and buffers are read and written with llama.h's conventions.

use crate::log;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `body`; a panic becomes `failure` and a log line naming `function`.
pub fn guard<T>(function: &'static str, failure: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            log::error(&format!("{function}: internal error: {why}"));
            failure
        }
    }
}

/// `ptr` as a reference, or a logged refusal naming `function`.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` for `'a`.
pub unsafe fn handle<'a, T>(function: &'static str, ptr: *const T) -> Option<&'a T> {
    // SAFETY: the caller's contract.
    let r = unsafe { ptr.as_ref() };
    if r.is_none() {
        log::error(&format!("{function}: NULL handle"));
    }
    r
}

/// Mutable [`handle`].
///
/// # Safety
/// `ptr` is NULL or points to a live `T` for `'a`, used by no one else meanwhile.
pub unsafe fn handle_mut<'a, T>(function: &'static str, ptr: *mut T) -> Option<&'a mut T> {
    // SAFETY: the caller's contract.
    let r = unsafe { ptr.as_mut() };
    if r.is_none() {
        log::error(&format!("{function}: NULL handle"));
    }
    r
}

/// A C string as UTF-8 (invalid bytes replaced); `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or NUL-terminated.
pub unsafe fn c_str<'a>(ptr: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    // SAFETY: the caller's contract.
    (!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }.to_string_lossy())
}

/// llama.h's snprintf convention: writes as much of `text` as fits with a NUL, returns its
/// full length (so a caller can retry with a larger buffer).
///
/// # Safety
/// `buf` is NULL or writable for `size` bytes.
pub unsafe fn write_c_string(buf: *mut c_char, size: usize, text: &[u8]) -> i32 {
    if !buf.is_null() && size > 0 {
        let n = text.len().min(size - 1);
        // SAFETY: `buf` holds `size` > n bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    i32::try_from(text.len()).unwrap_or(i32::MAX)
}

/// `ptr[..n]`, empty for NULL or a non-positive count.
///
/// # Safety
/// `ptr` is NULL or valid for `n` reads.
pub unsafe fn slice<'a, T>(ptr: *const T, n: impl TryInto<usize>) -> &'a [T] {
    let n = n.try_into().unwrap_or(0);
    if ptr.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(ptr, n) }
}
