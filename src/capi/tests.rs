//! Unit tests of the boundary machinery; tests/capi_threads.rs and c-examples/misuse.c test
//! the API through a real model.

use std::ffi::{c_char, CStr};
use std::mem::size_of;

use super::exclusive::Exclusive;
use super::guard::{guard, kolibri_last_error, write_text};
use super::model::kolibri_model_params;
use super::params::{read_params, VersionedParams};
use super::sampler::{kolibri_sampler_new, kolibri_sampler_params};
use super::status::*;

fn last_error() -> String {
    // SAFETY: the last error is a NUL-terminated string valid until this thread's next call.
    unsafe { CStr::from_ptr(kolibri_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn panics_become_a_status_and_a_message() {
    let status = guard(|| panic!("boom {}", 42));
    assert_eq!(status, KOLIBRI_STATUS_PANIC);
    assert!(last_error().contains("boom 42"), "{}", last_error());
    // Success leaves the last error as it was.
    assert_eq!(guard(|| Ok(())), KOLIBRI_STATUS_OK);
    assert!(last_error().contains("boom 42"));
    let status = guard(|| Err(Failure::invalid("bad thing")));
    assert_eq!(status, KOLIBRI_STATUS_INVALID_ARGUMENT);
    assert_eq!(last_error(), "bad thing");
}

#[test]
fn last_error_is_per_thread() {
    guard(|| Err(Failure::invalid("main thread error")));
    std::thread::spawn(|| {
        assert_eq!(last_error(), "");
        guard(|| Err(Failure::invalid("other thread error")));
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), "main thread error");
}

#[test]
fn text_output_follows_the_buffer_convention() {
    let mut buf = [b'#' as c_char; 6];
    let mut len = 0usize;
    // SAFETY: each buffer passed to write_text is null or holds the length passed.
    let too_small = guard(|| unsafe { write_text(b"hello", buf.as_mut_ptr(), 5, &mut len) });
    assert_eq!(too_small, KOLIBRI_STATUS_BUFFER_TOO_SMALL);
    assert_eq!(len, 5);
    assert!(
        buf.iter().all(|&b| b == b'#' as c_char),
        "buffer written on failure"
    );
    // SAFETY: as above.
    let query = guard(|| unsafe { write_text(b"hello", std::ptr::null_mut(), 0, &mut len) });
    assert_eq!(query, KOLIBRI_STATUS_BUFFER_TOO_SMALL);
    // SAFETY: as above.
    let fits = guard(|| unsafe { write_text(b"hello", buf.as_mut_ptr(), 6, &mut len) });
    assert_eq!(fits, KOLIBRI_STATUS_OK);
    // SAFETY: write_text wrote "hello" and its NUL.
    assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_bytes(), b"hello");
    // SAFETY: as above.
    let null_buf = guard(|| unsafe { write_text(b"x", std::ptr::null_mut(), 4, &mut len) });
    assert_eq!(null_buf, KOLIBRI_STATUS_INVALID_ARGUMENT);
}

/// A caller compiled against a future header: our struct plus fields we do not know.
#[repr(C)]
#[derive(Clone, Copy)]
struct FutureParams {
    current: kolibri_model_params,
    added_later: u64,
}

#[test]
fn params_versions_are_checked() {
    let ours = kolibri_model_params::defaults();
    // SAFETY: `p` points at a whole FutureParams, at least `struct_size` bytes.
    let read = |p: &FutureParams| unsafe {
        read_params::<kolibri_model_params>((p as *const FutureParams).cast())
    };
    let mut future = FutureParams {
        current: ours,
        added_later: 0,
    };
    future.current.struct_size = size_of::<FutureParams>();
    future.current.use_mlock = true;
    // Unknown trailing fields left at zero: accepted, known fields read.
    let p = read(&future).unwrap_or_else(|e| panic!("zero tail refused: {}", e.message));
    assert!(p.use_mlock);
    // A non-zero field this version cannot honour: refused.
    future.added_later = 7;
    let err = read(&future).err().expect("non-zero tail refused");
    assert!(err.message.contains("does not know"), "{}", err.message);
    // Too small.
    future.added_later = 0;
    future.current.struct_size = 8;
    assert!(read(&future).is_err());
    // A bool holding 2 (a binding writing a wrong byte) is refused, not read as UB.
    future.current.struct_size = size_of::<kolibri_model_params>();
    // SAFETY: the offset of a field inside the struct.
    unsafe {
        let base = (&mut future.current as *mut kolibri_model_params).cast::<u8>();
        *base.add(std::mem::offset_of!(kolibri_model_params, use_mmap)) = 2;
    }
    let err = read(&future).err().expect("bad bool refused");
    assert!(err.message.contains("not 0 or 1"), "{}", err.message);
    // Each earlier version: its fields read, the later ones at their defaults, even where the
    // caller's memory past its struct holds anything.
    for &size in kolibri_model_params::OLDER_SIZES {
        let mut older = FutureParams {
            current: ours,
            added_later: 0,
        };
        older.current.struct_size = size;
        older.current.use_mlock = true;
        older.current.paged_weights = true;
        older.current.n_mtp_blocks = 1;
        let p = read(&older).unwrap_or_else(|e| panic!("size {size} refused: {}", e.message));
        let has_paged = size > std::mem::offset_of!(kolibri_model_params, paged_weights);
        assert!(p.use_mlock && p.paged_weights == has_paged, "size {size}");
        assert_eq!(p.n_mtp_blocks, 0, "size {size}");
    }
    future.current.struct_size = kolibri_model_params::OLDER_SIZES[0] - 8;
    assert!(read(&future).is_err(), "a size between versions");
}

#[test]
fn sampler_params_are_validated() {
    let mut p = kolibri_sampler_params::defaults();
    p.min_p = f32::NAN;
    let mut out = std::ptr::null_mut();
    // SAFETY: valid params and a valid out pointer.
    let status = unsafe { kolibri_sampler_new(&p, &mut out) };
    assert_eq!(status, KOLIBRI_STATUS_INVALID_ARGUMENT);
    assert!(out.is_null());
}

#[test]
fn exclusive_handles_refuse_reentry_and_poison_after_a_panic() {
    let cell = Exclusive::new(5);
    {
        let held = cell.lock("thing").ok().unwrap();
        let again = cell.lock("thing").err().expect("second lock refused");
        assert_eq!(again.status, KOLIBRI_STATUS_INVALID_STATE);
        assert_eq!(*held, 5);
    }
    *cell.lock("thing").ok().unwrap() += 1;
    assert_eq!(*cell.lock("thing").ok().unwrap(), 6);
    let status = guard(|| {
        let _held = cell.lock("thing")?;
        panic!("inside");
    });
    assert_eq!(status, KOLIBRI_STATUS_PANIC);
    let err = cell.lock("thing").err().expect("poisoned");
    assert!(err.message.contains("panic"), "{}", err.message);
}
