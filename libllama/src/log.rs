//! llama.h's log: one process-wide callback (`llama_log_set`), stderr by default, and the
//! "said once" log of functions Kolibri does not support.

use crate::types::{ggml_log_callback, GGML_LOG_LEVEL_WARN};
use std::collections::HashSet;
use std::ffi::{c_void, CString};
use std::sync::Mutex;

struct Sink {
    callback: ggml_log_callback,
    user: *mut c_void,
}

// SAFETY: the user data pointer is only handed back to the callback the user registered with
// it; llama.h makes the caller responsible for its thread safety.
unsafe impl Send for Sink {}

static SINK: Mutex<Sink> = Mutex::new(Sink {
    callback: None,
    user: std::ptr::null_mut(),
});
static SAID_ONCE: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// Sends one line to the registered callback, or to stderr when none is set.
pub fn log(level: i32, text: &str) {
    let line = CString::new(format!("{}\n", text.replace('\0', " "))).expect("no NUL left");
    let sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    match sink.callback {
        // SAFETY: a callback registered through llama_log_set, called with a valid C string.
        Some(cb) => unsafe { cb(level, line.as_ptr(), sink.user) },
        None => eprint!("{}", line.to_string_lossy()),
    }
}

pub fn error(text: &str) {
    log(crate::types::GGML_LOG_LEVEL_ERROR, text);
}

pub fn warn(text: &str) {
    log(GGML_LOG_LEVEL_WARN, text);
}

/// Logs `why` for `function` the first time only: tools call unsupported functions in loops.
pub fn once(function: &'static str, why: &str) {
    let mut said = SAID_ONCE.lock().unwrap_or_else(|p| p.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(function) {
        drop(said);
        warn(&format!("{function}: {why}"));
    }
}

pub fn set(callback: ggml_log_callback, user: *mut c_void) {
    *SINK.lock().unwrap_or_else(|p| p.into_inner()) = Sink { callback, user };
}

pub fn get() -> (ggml_log_callback, *mut c_void) {
    let sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    (sink.callback, sink.user)
}

/// `llama_log_set(cb, user)`: NULL restores the default (stderr).
///
/// # Safety
/// `callback` must stay callable with `user` until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn llama_log_set(callback: ggml_log_callback, user: *mut c_void) {
    set(callback, user);
}

/// # Safety
/// Each out pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn llama_log_get(callback: *mut ggml_log_callback, user: *mut *mut c_void) {
    let (cb, ud) = get();
    // SAFETY: the caller passes NULL or writable pointers.
    unsafe {
        if let Some(out) = callback.as_mut() {
            *out = cb;
        }
        if let Some(out) = user.as_mut() {
            *out = ud;
        }
    }
}
