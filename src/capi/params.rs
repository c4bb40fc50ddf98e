//! Versioned params structs: each begins with `size_t struct_size`, which the caller sets to
//! `sizeof` the struct it was compiled against (the `*_init` functions do that). This library
//! reads exactly that many bytes, so a caller built against an older or newer header never
//! reads or writes past what it allocated.

use std::mem::size_of;

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
    /// `sizeof` each earlier published version of the struct, oldest first (each the offset of
    /// the first field appended after it); callers built against one get the defaults for
    /// every later field. Empty while the struct has only ever had one version.
    const OLDER_SIZES: &'static [usize] = &[];
    fn defaults() -> Self;
}

/// Reads the caller's params (NULL means defaults). A caller built against an older version
/// (one of [`VersionedParams::OLDER_SIZES`]) gets the defaults for the fields it does not
/// have; smaller sizes are refused. Larger ones are accepted when every byte this version does
/// not know is zero (fields added later, left at their zero default).
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
    // This version's size or larger, or exactly an earlier version's.
    if declared < ours && !T::OLDER_SIZES.contains(&declared) {
        return Err(Failure::invalid(format!(
            "{}.struct_size is {declared}, expected {ours}{}: initialise it with the matching \
             _init function",
            T::NAME,
            earlier_versions::<T>()
        )));
    }
    if declared > ours {
        // SAFETY: the caller promised `declared` readable bytes.
        let extra =
            unsafe { std::slice::from_raw_parts(ptr.cast::<u8>().add(ours), declared - ours) };
        if extra.iter().any(|&b| b != 0) {
            return Err(Failure::invalid(format!(
                "{} has fields this library version does not know (struct_size {declared}, \
                 known {ours}); upgrade the library",
                T::NAME
            )));
        }
    }
    // The caller's bytes over the defaults: an older caller's struct ends early.
    let n = declared.min(ours);
    // SAFETY: the caller has `declared >= n` readable bytes.
    let caller = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), n) };
    if let Some(&off) = T::BOOL_FIELDS
        .iter()
        .find(|&&off| off < n && caller[off] > 1)
    {
        return Err(Failure::invalid(format!(
            "{}: the bool at offset {off} holds {}, not 0 or 1",
            T::NAME,
            caller[off]
        )));
    }
    let mut value = T::defaults();
    // SAFETY: `n <= size_of::<T>()` bytes over a valid T, ending on a field boundary (a
    // version's size); bools checked, every other field accepts any bit pattern.
    unsafe { std::ptr::copy_nonoverlapping(caller.as_ptr(), (&mut value as *mut T).cast(), n) };
    Ok(value)
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
    if size < ours && !T::OLDER_SIZES.contains(&size) {
        return Err(Failure::invalid(format!(
            "struct_size {size} is not the size of {} ({ours} bytes{})",
            T::NAME,
            earlier_versions::<T>()
        )));
    }
    let mut defaults = T::defaults();
    // SAFETY: every params struct starts with `struct_size: usize`.
    unsafe { (&mut defaults as *mut T).cast::<usize>().write(size) };
    // SAFETY: the caller's struct has `size` writable bytes: the defaults' first
    // `min(size, ours)` bytes (an older caller's struct ends early), zeros past ours.
    unsafe {
        let dst = ptr.cast::<u8>();
        let n = size.min(ours);
        std::ptr::copy_nonoverlapping((&defaults as *const T).cast::<u8>(), dst, n);
        std::ptr::write_bytes(dst.add(n), 0, size - n);
    }
    Ok(())
}

/// ", or N, M from earlier versions" for an error message; empty for a struct of one version.
fn earlier_versions<T: VersionedParams>() -> String {
    match T::OLDER_SIZES {
        [] => String::new(),
        sizes => {
            let list: Vec<String> = sizes.iter().map(usize::to_string).collect();
            format!(", or {} from earlier versions", list.join(", "))
        }
    }
}
