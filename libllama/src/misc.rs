//! Process-wide functions: backend set-up, capabilities, names, time, split file names.

use crate::guard::{c_str, write_c_string};
use crate::log;
use crate::types::*;
use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::sync::OnceLock;

/// Kolibri needs no backend set-up; the worker pools start with each context.
#[no_mangle]
pub extern "C" fn llama_backend_init() {}

#[no_mangle]
pub extern "C" fn llama_backend_free() {}

/// NUMA placement is left to the OS.
#[no_mangle]
pub extern "C" fn llama_numa_init(_strategy: i32) {}

#[no_mangle]
pub extern "C" fn llama_time_us() -> i64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_micros() as i64
}

/// ggml's clock, which llama.cpp's examples read beside llama.h (they link libggml too; here
/// libllama is the one library).
#[no_mangle]
pub extern "C" fn ggml_time_us() -> i64 {
    llama_time_us()
}

#[no_mangle]
pub extern "C" fn ggml_time_ms() -> i64 {
    llama_time_us() / 1000
}

#[no_mangle]
pub extern "C" fn ggml_time_init() {}

#[no_mangle]
pub extern "C" fn llama_max_devices() -> usize {
    1
}

#[no_mangle]
pub extern "C" fn llama_max_parallel_sequences() -> usize {
    crate::context::MAX_SEQ as usize
}

#[no_mangle]
pub extern "C" fn llama_max_tensor_buft_overrides() -> usize {
    0
}

#[no_mangle]
pub extern "C" fn llama_supports_mmap() -> bool {
    true
}

#[no_mangle]
pub extern "C" fn llama_supports_mlock() -> bool {
    true
}

#[no_mangle]
pub extern "C" fn llama_supports_gpu_offload() -> bool {
    false
}

#[no_mangle]
pub extern "C" fn llama_supports_rpc() -> bool {
    false
}

fn static_c_string(
    cell: &'static OnceLock<CString>,
    make: impl FnOnce() -> String,
) -> *const c_char {
    cell.get_or_init(|| CString::new(make()).unwrap_or_default())
        .as_ptr()
}

#[no_mangle]
pub extern "C" fn llama_version() -> *const c_char {
    static TEXT: OnceLock<CString> = OnceLock::new();
    static_c_string(&TEXT, || {
        format!(
            "kolibri {} (llama.h of llama.cpp 0c1e57098)",
            env!("CARGO_PKG_VERSION")
        )
    })
}

#[no_mangle]
pub extern "C" fn llama_print_system_info() -> *const c_char {
    static TEXT: OnceLock<CString> = OnceLock::new();
    static_c_string(&TEXT, || {
        format!("Kolibri: {}", kolibri::kernels::system_info())
    })
}

#[no_mangle]
pub extern "C" fn llama_ftype_name(ftype: i32) -> *const c_char {
    crate::names::ftype_name(ftype).as_ptr()
}

#[no_mangle]
pub extern "C" fn llama_flash_attn_type_name(kind: i32) -> *const c_char {
    match kind {
        -1 => c"auto",
        0 => c"disabled",
        1 => c"enabled",
        _ => c"(unknown)",
    }
    .as_ptr()
}

const LOAD_MODES: &[(i32, &std::ffi::CStr)] = &[
    (LLAMA_LOAD_MODE_AUTO, c"auto"),
    (LLAMA_LOAD_MODE_NONE, c"none"),
    (LLAMA_LOAD_MODE_MMAP, c"mmap"),
    (LLAMA_LOAD_MODE_MLOCK, c"mlock"),
    (LLAMA_LOAD_MODE_MMAP_MLOCK, c"mmap+mlock"),
    (LLAMA_LOAD_MODE_DIRECT_IO, c"direct-io"),
];

#[no_mangle]
pub extern "C" fn llama_load_mode_name(mode: i32) -> *const c_char {
    LOAD_MODES
        .iter()
        .find(|(m, _)| *m == mode)
        .map_or(c"(unknown)".as_ptr(), |(_, n)| n.as_ptr())
}

/// # Safety
/// `text` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn llama_load_mode_from_str(text: *const c_char) -> i32 {
    // SAFETY: the caller's contract.
    let text = unsafe { c_str(text) }.unwrap_or_default();
    LOAD_MODES
        .iter()
        .find(|(_, n)| n.to_bytes() == text.as_bytes())
        .map_or(LLAMA_LOAD_MODE_AUTO, |(m, _)| *m)
}

#[no_mangle]
pub extern "C" fn llama_model_meta_key_str(key: i32) -> *const c_char {
    const KEYS: &[&std::ffi::CStr] = &[
        c"general.sampling.sequence",
        c"general.sampling.top_k",
        c"general.sampling.top_p",
        c"general.sampling.min_p",
        c"general.sampling.xtc_probability",
        c"general.sampling.xtc_threshold",
        c"general.sampling.temp",
        c"general.sampling.penalty_last_n",
        c"general.sampling.penalty_repeat",
        c"general.sampling.mirostat",
        c"general.sampling.mirostat_tau",
        c"general.sampling.mirostat_eta",
    ];
    usize::try_from(key)
        .ok()
        .and_then(|k| KEYS.get(k))
        .map_or(ptr::null(), |k| k.as_ptr())
}

#[no_mangle]
pub extern "C" fn llama_model_quantize_default_params() -> llama_model_quantize_params {
    llama_model_quantize_params {
        nthread: 0,
        ftype: 7,
        output_tensor_type: 39, // GGML_TYPE_COUNT: "not set"
        token_embedding_type: 39,
        allow_requantize: false,
        quantize_output_tensor: true,
        only_copy: false,
        pure_: false,
        keep_split: false,
        dry_run: false,
        imatrix: ptr::null(),
        kv_overrides: ptr::null(),
        tt_overrides: ptr::null(),
        prune_layers: ptr::null(),
        max_buf_size: 0,
    }
}

/// `PREFIX-00001-of-00003.gguf`; its length, or 0 when it does not fit.
///
/// # Safety
/// `split_path` is writable for `maxlen` bytes; `prefix` a C string.
#[no_mangle]
pub unsafe extern "C" fn llama_split_path(
    split_path: *mut c_char,
    maxlen: usize,
    prefix: *const c_char,
    split_no: i32,
    split_count: i32,
) -> i32 {
    // SAFETY: the caller's contract.
    let Some(prefix) = (unsafe { c_str(prefix) }) else {
        return 0;
    };
    let path = format!("{prefix}-{:05}-of-{split_count:05}.gguf", split_no + 1);
    if path.len() >= maxlen {
        return 0;
    }
    // SAFETY: as above.
    unsafe { write_c_string(split_path, maxlen, path.as_bytes()) }
}

/// The prefix of a split file name when it matches `split_no` of `split_count`; else 0.
///
/// # Safety
/// `split_prefix` is writable for `maxlen` bytes; `split_path` a C string.
#[no_mangle]
pub unsafe extern "C" fn llama_split_prefix(
    split_prefix: *mut c_char,
    maxlen: usize,
    split_path: *const c_char,
    split_no: i32,
    split_count: i32,
) -> i32 {
    // SAFETY: the caller's contract.
    let Some(path) = (unsafe { c_str(split_path) }) else {
        return 0;
    };
    let postfix = format!("-{:05}-of-{split_count:05}.gguf", split_no + 1);
    match path.strip_suffix(&postfix) {
        // SAFETY: as above.
        Some(prefix) if prefix.len() < maxlen => unsafe {
            write_c_string(split_prefix, maxlen, prefix.as_bytes())
        },
        _ => 0,
    }
}

/// Thread pools belong to Kolibri's contexts; an attached ggml pool is not used.
///
/// # Safety
/// Any arguments.
#[no_mangle]
pub unsafe extern "C" fn llama_attach_threadpool(
    _ctx: *mut c_void,
    _pool: *mut c_void,
    _batch_pool: *mut c_void,
) {
    log::once(
        "llama_attach_threadpool",
        "ggml thread pools are not used; the context keeps its own",
    );
}

/// # Safety
/// Any argument.
#[no_mangle]
pub unsafe extern "C" fn llama_detach_threadpool(_ctx: *mut c_void) {}

/// Attention is causal for every model Kolibri runs.
///
/// # Safety
/// Any arguments.
#[no_mangle]
pub unsafe extern "C" fn llama_set_causal_attn(_ctx: *mut c_void, causal: bool) {
    if !causal {
        log::once(
            "llama_set_causal_attn",
            "non-causal attention is not supported",
        );
    }
}

/// # Safety
/// Any argument.
#[no_mangle]
pub unsafe extern "C" fn llama_get_causal_attn(_ctx: *const c_void) -> bool {
    true
}

/// Kolibri needs no warm-up runs.
///
/// # Safety
/// Any arguments.
#[no_mangle]
pub unsafe extern "C" fn llama_set_warmup(_ctx: *mut c_void, _warmup: bool) {}

/// llama.h: "always returns true".
///
/// # Safety
/// Any arguments.
#[no_mangle]
pub unsafe extern "C" fn llama_opt_param_filter_all(
    _tensor: *const c_void,
    _user: *mut c_void,
) -> bool {
    true
}

/// ggml's fatal-error exit, which `GGML_ABORT` in programs built against llama.h calls. It is
/// the calling program's own decision to stop; Kolibri never calls it. The format's arguments
/// are not read (a Rust function cannot take C varargs; ignoring them is sound in the C
/// calling conventions of the targets Kolibri supports): the raw format is printed.
///
/// # Safety
/// `file` and `fmt` are NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn ggml_abort(file: *const c_char, line: i32, fmt: *const c_char) -> ! {
    // SAFETY: the caller's contract.
    let (file, fmt) = unsafe { (c_str(file), c_str(fmt)) };
    log::error(&format!(
        "{}:{line}: {}",
        file.unwrap_or_default(),
        fmt.unwrap_or_default()
    ));
    std::process::abort()
}
