//! Versioned params structs: each begins with `size_t struct_size`, which the caller sets to
//! `sizeof` the struct it was compiled against (the `*_init` functions do that). This library
//! reads exactly that many bytes, so a caller built against an older or newer header never
//! reads or writes past what it allocated.

use std::mem::{size_of, MaybeUninit};

use super::guard::FfiResult;
use super::status::Failure;

/// A `#[repr(C)]` params struct whose first field is `struct_size: usize`.
///
/// # Safety
/// Implementors are `#[repr(C)]`, start with a `usize` and list the offsets of all their
/// `bool` fields in `BOOL_FIELDS` (the only fields with invalid bit patterns).
pub(crate) unsafe trait VersionedParams: Copy {
    const NAME: &'static str;
    const BOOL_FIELDS: &'static [usize];
    fn defaults() -> Self;
}

/// Reads the caller's params (NULL means defaults). Sizes smaller than this version's are
/// refused (there is no older version yet); larger ones are accepted when every byte this
/// version does not know is zero (fields added later, left at their zero default).
///
/// # Safety
/// `ptr` is NULL or points to at least `(*ptr).struct_size` readable bytes.
pub(crate) unsafe fn read_params<T: VersionedParams>(ptr: *const T) -> FfiResult<T> {
    if ptr.is_null() {
        return Ok(T::defaults());
    }
    // SAFETY: every version of the struct starts with `size_t struct_size`.
    let declared = unsafe { ptr.cast::<usize>().read_unaligned() };
    let ours = size_of::<T>();
    if declared < ours {
        return Err(Failure::invalid(format!(
            "{}.struct_size is {declared}, expected {ours}: initialise it with the matching \
             _init function",
            T::NAME
        )));
    }
    // SAFETY: the caller promised `declared` readable bytes.
    let extra = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>().add(ours), declared - ours) };
    if extra.iter().any(|&b| b != 0) {
        return Err(Failure::invalid(format!(
            "{} has fields this library version does not know (struct_size {declared}, \
             known {ours}); upgrade the library",
            T::NAME
        )));
    }
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: copies `ours` readable bytes into storage of the same size.
    let bytes = unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), value.as_mut_ptr().cast::<u8>(), ours);
        std::slice::from_raw_parts(value.as_ptr().cast::<u8>(), ours)
    };
    if let Some(&off) = T::BOOL_FIELDS.iter().find(|&&off| bytes[off] > 1) {
        return Err(Failure::invalid(format!(
            "{}: the bool at offset {off} holds {}, not 0 or 1",
            T::NAME,
            bytes[off]
        )));
    }
    // SAFETY: all bytes copied; bools checked; every other field accepts any bit pattern.
    Ok(unsafe { value.assume_init() })
}

/// Writes the defaults into the caller's struct of `size` bytes (its `sizeof`): the fields this
/// version knows, zeros for any it does not, and `struct_size = size`. Never writes past `size`.
///
/// # Safety
/// `ptr` is NULL or writable for `size` bytes.
pub(crate) unsafe fn init_params<T: VersionedParams>(ptr: *mut T, size: usize) -> FfiResult {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{} pointer is NULL", T::NAME)));
    }
    let ours = size_of::<T>();
    if size < ours {
        return Err(Failure::invalid(format!(
            "struct_size {size} is smaller than {} ({ours} bytes)",
            T::NAME
        )));
    }
    let mut defaults = T::defaults();
    // SAFETY: every params struct starts with `struct_size: usize`.
    unsafe { (&mut defaults as *mut T).cast::<usize>().write(size) };
    // SAFETY: the caller's struct has `size >= ours` writable bytes.
    unsafe {
        let dst = ptr.cast::<u8>();
        std::ptr::copy_nonoverlapping((&defaults as *const T).cast::<u8>(), dst, ours);
        std::ptr::write_bytes(dst.add(ours), 0, size - ours);
    }
    Ok(())
}
