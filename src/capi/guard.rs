//! What every export goes through: panic catching, the thread's last error, and checked
//! conversions of the raw pointers C hands us.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::status::*;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

pub(crate) type FfiResult<T = ()> = Result<T, Failure>;

/// Runs an export's body: `Ok` becomes `KOLIBRI_STATUS_OK`; a failure or a caught panic
/// records its message as the thread's last error and returns its status.
pub(crate) fn guard(body: impl FnOnce() -> FfiResult) -> kolibri_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => KOLIBRI_STATUS_OK,
        Ok(Err(failure)) => {
            set_last_error(failure.message);
            failure.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(format!("internal panic (a Kolibri bug): {what}"));
            KOLIBRI_STATUS_PANIC
        }
    }
}

/// Like [`guard`] for functions without a status (the `*_free` family): a panic is swallowed.
pub(crate) fn guard_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

fn set_last_error(message: String) {
    // Interior NULs would cut the C string short; show them instead.
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
}

/// The message of the most recent failed call on this thread ("" if none failed yet).
///
/// **Ownership:** the string belongs to Kolibri; it stays valid until the next failing
/// Kolibri call on this thread. Copy it to keep it.
/// **Errors:** none; successful calls leave the message unchanged.
/// **Thread safety:** each thread has its own last error.
#[no_mangle]
pub extern "C" fn kolibri_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// A shared reference to a handle, or INVALID_ARGUMENT naming the NULL parameter.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` (the C caller's contract).
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, name: &str) -> FfiResult<&'a T> {
    // SAFETY: per the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::invalid(format!("{name} is NULL")))
}

/// Checks an output pointer up front, so a call never does its work and then finds it cannot
/// report the result.
pub(crate) fn out_ptr<T>(ptr: *mut T, name: &str) -> FfiResult<*mut T> {
    if ptr.is_null() {
        Err(Failure::invalid(format!("{name} is NULL")))
    } else {
        Ok(ptr)
    }
}

/// Writes a result through a checked output pointer.
///
/// # Safety
/// `ptr` came from [`out_ptr`] and points to writable memory for a `T`.
pub(crate) unsafe fn write<T>(ptr: *mut T, value: T) {
    // SAFETY: per the caller's contract; `write` does not drop the uninitialised old value.
    unsafe { ptr.write(value) }
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string that stays valid for the call.
pub(crate) unsafe fn c_str<'a>(ptr: *const c_char, name: &str) -> FfiResult<&'a str> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{name} is NULL")));
    }
    // SAFETY: per the caller's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|e| Failure::invalid(format!("{name} is not valid UTF-8: {e}")))
}

/// A NUL-terminated path argument (bytes on Unix, not necessarily UTF-8).
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string.
pub(crate) unsafe fn c_str_path(ptr: *const c_char, name: &str) -> FfiResult<std::path::PathBuf> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{name} is NULL")));
    }
    // SAFETY: per the caller's contract.
    Ok(unsafe { path_from_c(ptr) })
}

/// A path from a non-NULL, NUL-terminated string.
///
/// # Safety
/// `ptr` is a NUL-terminated string.
pub(crate) unsafe fn path_from_c(ptr: *const c_char) -> std::path::PathBuf {
    // SAFETY: per the caller's contract.
    path_from_cstr(unsafe { std::ffi::CStr::from_ptr(ptr) })
}

#[cfg(unix)]
fn path_from_cstr(s: &std::ffi::CStr) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(s.to_bytes()).into()
}

#[cfg(not(unix))]
fn path_from_cstr(s: &std::ffi::CStr) -> std::path::PathBuf {
    s.to_string_lossy().into_owned().into()
}

/// A `(pointer, length)` array argument; NULL is allowed only when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or points to `len` initialised elements that stay valid for the call.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, name: &str) -> FfiResult<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::invalid(format!(
            "{name} is NULL but its length is {len}"
        )));
    }
    // SAFETY: per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The (buffer, capacity, length-out) convention for text: on success `bytes` and a NUL are
/// copied and `*len` = `bytes.len()`; if `capacity < bytes.len() + 1`, only `*len` is written
/// and BUFFER_TOO_SMALL returned. `buf` may be NULL when `capacity` is 0 (a size query).
///
/// # Safety
/// `buf` is NULL or writable for `capacity` bytes; `len` is NULL or writable.
pub(crate) unsafe fn write_text(
    bytes: &[u8],
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> FfiResult {
    let len = out_ptr(len, "len")?;
    if buf.is_null() && capacity > 0 {
        return Err(Failure::invalid("buf is NULL but capacity is not 0"));
    }
    // SAFETY: `len` checked above.
    unsafe { write(len, bytes.len()) };
    if capacity <= bytes.len() {
        return Err(Failure::new(
            KOLIBRI_STATUS_BUFFER_TOO_SMALL,
            format!(
                "buffer of {capacity} bytes is too small: {} needed (text plus NUL); the length \
                 was written to len",
                bytes.len() + 1
            ),
        ));
    }
    // SAFETY: `buf` holds at least `bytes.len() + 1` bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    Ok(())
}

/// The (array, capacity, count-out) convention: like [`write_text`] without the NUL.
///
/// # Safety
/// `buf` is NULL or writable for `capacity` elements; `count` is NULL or writable.
pub(crate) unsafe fn write_array<T: Copy>(
    items: &[T],
    buf: *mut T,
    capacity: usize,
    count: *mut usize,
) -> FfiResult {
    let count = out_ptr(count, "count")?;
    if buf.is_null() && capacity > 0 {
        return Err(Failure::invalid("buffer is NULL but capacity is not 0"));
    }
    // SAFETY: `count` checked above.
    unsafe { write(count, items.len()) };
    if capacity < items.len() {
        return Err(Failure::new(
            KOLIBRI_STATUS_BUFFER_TOO_SMALL,
            format!(
                "buffer of {capacity} elements is too small: {} needed; the count was written",
                items.len()
            ),
        ));
    }
    // SAFETY: `buf` holds at least `items.len()` elements (checked above).
    unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), buf, items.len()) };
    Ok(())
}

/// Moves a value to the heap for C; [`free_boxed`] takes it back.
pub(crate) fn into_raw<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees what [`into_raw`] made; NULL is a no-op.
///
/// # Safety
/// `ptr` is NULL or came from `into_raw::<T>` and was not freed before.
pub(crate) unsafe fn free_boxed<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: per the caller's contract.
        drop(unsafe { Box::from_raw(ptr) });
    }
}
