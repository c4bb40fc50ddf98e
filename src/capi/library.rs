//! Library-level queries: version and system information.

use std::ffi::c_char;

use super::guard::{guard, write_text};
use super::status::*;

/// Major version of the header this program was compiled against.
pub const KOLIBRI_VERSION_MAJOR: u32 = 0;
/// Minor version of the header this program was compiled against.
pub const KOLIBRI_VERSION_MINOR: u32 = 1;
/// Patch version of the header this program was compiled against.
pub const KOLIBRI_VERSION_PATCH: u32 = 0;

/// The library's version as "MAJOR.MINOR.PATCH" (compare with the `KOLIBRI_VERSION_*`
/// macros to detect a header/library mismatch).
///
/// **Ownership:** the string is static; never free it.
/// **Errors:** none.
/// **Thread safety:** callable from any thread.
#[no_mangle]
pub extern "C" fn kolibri_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The library's version as one number: `MAJOR * 1000000 + MINOR * 1000 + PATCH`.
///
/// **Ownership:** returns a plain value.
/// **Errors:** none.
/// **Thread safety:** callable from any thread.
#[no_mangle]
pub extern "C" fn kolibri_version_number() -> u32 {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 1_000_000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 1_000
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}

/// Describes the machine as Kolibri sees it: architecture, CPU features found, the kernel
/// path chosen and the paths available, e.g.
/// "arch: x86_64; cpu features: ... avx2 fma f16c; kernels: avx2 (available: scalar, avx2; ...)".
///
/// **Ownership:** writes into the caller's `buf` (text plus NUL); `*len` receives the text's
/// length without the NUL.
/// **Errors:** INVALID_ARGUMENT if `len` is NULL, or `buf` is NULL with `capacity > 0`;
/// BUFFER_TOO_SMALL if `capacity < *len + 1` (only `*len` is written; pass NULL/0 to query).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `buf` is NULL or writable for `capacity` bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_system_info(
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        let info = crate::kernels::system_info();
        // SAFETY: per this function's contract.
        unsafe { write_text(info.as_bytes(), buf, capacity, len) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_macros_match_the_crate_version() {
        let header =
            format!("{KOLIBRI_VERSION_MAJOR}.{KOLIBRI_VERSION_MINOR}.{KOLIBRI_VERSION_PATCH}");
        assert_eq!(header, env!("CARGO_PKG_VERSION"));
        // SAFETY: kolibri_version returns a static NUL-terminated string.
        let runtime = unsafe { std::ffi::CStr::from_ptr(kolibri_version()) };
        assert_eq!(runtime.to_str().unwrap(), header);
        assert_eq!(
            kolibri_version_number(),
            KOLIBRI_VERSION_MAJOR * 1_000_000
                + KOLIBRI_VERSION_MINOR * 1_000
                + KOLIBRI_VERSION_PATCH
        );
    }
}
