//! `kolibri_model`: a loaded GGUF model and what can be asked about it.

use std::ffi::{c_char, c_void};
use std::mem::offset_of;
use std::sync::{Arc, OnceLock};

use super::guard::{
    c_str, c_str_path, free_boxed, guard, guard_void, handle, into_raw, out_ptr, path_from_c,
    write, write_text, FfiResult,
};
use super::params::{init_params, read_params, VersionedParams};
use super::status::*;
use crate::chat::ChatTemplate;
use crate::model::{LoadOptions, Model};

/// A loaded model: weights, hyperparameters, tokenizer and metadata. Immutable once loaded.
///
/// Thread safety: a `const kolibri_model*` may be used from any number of threads at once,
/// including creating contexts and tokenizing concurrently.
pub struct kolibri_model {
    pub(crate) model: Arc<Model>,
    /// Worker threads for contexts whose params leave `n_threads` at 0.
    pub(crate) default_threads: usize,
    /// The GGUF's chat template, compiled on first use.
    chat_template: OnceLock<Result<ChatTemplate, Failure>>,
    /// The vocabulary as constrained sampling sees it, built on first use.
    #[cfg(feature = "grammar")]
    grammar: OnceLock<Result<crate::grammar::GrammarCompiler, Failure>>,
}

impl kolibri_model {
    pub(crate) fn chat_template(&self) -> FfiResult<&ChatTemplate> {
        let compiled = self
            .chat_template
            .get_or_init(|| ChatTemplate::from_model(&self.model).map_err(Failure::from));
        compiled.as_ref().map_err(Failure::clone)
    }

    #[cfg(feature = "grammar")]
    pub(crate) fn grammar(&self) -> FfiResult<&crate::grammar::GrammarCompiler> {
        let built = self.grammar.get_or_init(|| {
            crate::grammar::GrammarCompiler::new(&self.model.tokenizer)
                .map_err(|e| Failure::new(KOLIBRI_STATUS_INTERNAL, e.to_string()))
        });
        built.as_ref().map_err(Failure::clone)
    }
}

/// Called during loading with the fraction done, in [0, 1]; return `false` to cancel the load
/// (kolibri_model_load then returns CANCELLED). Runs on the thread calling kolibri_model_load.
/// It must not throw (C++) or longjmp.
pub type kolibri_progress_callback =
    Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> bool>;

/// How to load a model. Initialise with kolibri_model_params_init, then change fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct kolibri_model_params {
    /// sizeof(kolibri_model_params) as the caller compiled it; set by the init function.
    pub struct_size: usize,
    /// Worker threads of contexts that ask for 0 threads. 0 = one per CPU core. Default 0.
    pub n_threads: u32,
    /// Map the file (shared with the OS page cache) rather than reading it into private
    /// memory. Default true.
    pub use_mmap: bool,
    /// Lock the model's memory so it is never paged out (needs RLIMIT_MEMLOCK). Default false.
    pub use_mlock: bool,
    /// Optional progress callback; NULL for none. Default NULL.
    pub progress_callback: kolibri_progress_callback,
    /// Passed to `progress_callback` unchanged. Default NULL.
    pub progress_user_data: *mut c_void,
    /// Directory of the repack cache (appended after the first version of this struct:
    /// callers built against that one get the default). Weights repacked at load are mapped
    /// from a cache file there when a valid one exists, and written there otherwise, so the
    /// next load skips the repack (docs/architecture.md, "Numerics"). A NUL-terminated path, read only
    /// during kolibri_model_load; the directory is created if needed, and a cache that cannot
    /// be written only costs later loads their speed. NULL repacks at every load and writes
    /// no files. Default NULL.
    pub repack_cache_dir: *const c_char,
    /// Paged weights (appended in 0.2; older callers get the default): the weights stay in
    /// the mapped file and the forward pass streams them layer by layer (the next layers
    /// prefetched, finished ones released), so a model larger than the memory available runs
    /// with its RSS near a few layers' weights plus the KV cache, at the speed the file's
    /// pages arrive. Repacked copies are used only when `repack_cache_dir` holds them. Needs
    /// `use_mmap` and not `use_mlock` (INVALID_ARGUMENT otherwise). Default false.
    pub paged_weights: bool,
    /// Multi-token-prediction blocks to load (appended in 0.3; older callers get the
    /// default): 0, or 1 for the model's first block (`nextn_predict_layers`, Qwen3.5 / 3.6),
    /// which kolibri_speculator_new_mtp drafts with. It adds its weights and a KV cache layer
    /// to every context. A model without a block fails with INVALID_ARGUMENT; not with
    /// `paged_weights`. Default 0.
    pub n_mtp_blocks: usize,
}

// SAFETY: repr(C), starts with `struct_size: usize`, every bool field listed.
unsafe impl VersionedParams for kolibri_model_params {
    const NAME: &'static str = "kolibri_model_params";
    const BOOL_FIELDS: &'static [usize] = &[
        offset_of!(kolibri_model_params, use_mmap),
        offset_of!(kolibri_model_params, use_mlock),
        offset_of!(kolibri_model_params, paged_weights),
    ];
    const OLDER_SIZES: &'static [usize] = &[
        offset_of!(kolibri_model_params, repack_cache_dir),
        offset_of!(kolibri_model_params, paged_weights),
        offset_of!(kolibri_model_params, n_mtp_blocks),
    ];
    fn defaults() -> Self {
        kolibri_model_params {
            struct_size: std::mem::size_of::<Self>(),
            n_threads: 0,
            use_mmap: true,
            use_mlock: false,
            progress_callback: None,
            progress_user_data: std::ptr::null_mut(),
            repack_cache_dir: std::ptr::null(),
            paged_weights: false,
            n_mtp_blocks: 0,
        }
    }
}

/// Fills `params` with the defaults; `struct_size` is `sizeof(kolibri_model_params)` as the caller
/// compiled it: exactly that many bytes are written, and `params->struct_size` is set to it.
/// Call it as `kolibri_model_params_init(&params, sizeof params)`.
///
/// **Ownership:** writes into the caller's struct; nothing to free.
/// **Errors:** INVALID_ARGUMENT (`params` is NULL, or `struct_size` is smaller than this
/// version of the struct and not the size of an earlier one).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `params` is NULL or writable for `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_params_init(
    params: *mut kolibri_model_params,
    struct_size: usize,
) -> kolibri_status {
    // SAFETY: per this function\'s contract.
    guard(|| unsafe { init_params(params, struct_size) })
}

/// Loads the GGUF model at `path`: maps (or reads) the file, validates every tensor and
/// builds the tokenizer. Every page is brought into memory before it returns. A part of a
/// split model (`NAME-00002-of-00003.gguf`) loads every part.
///
/// `params` may be NULL for the defaults.
///
/// **Ownership:** on success `*out_model` receives a new model the caller frees with
/// kolibri_model_free; on failure `*out_model` is not written.
/// **Errors:** INVALID_ARGUMENT (NULL `path` or `out_model`, bad params), IO (cannot open,
/// read, map or mlock; a missing part), INVALID_MODEL (corrupt or truncated GGUF, missing
/// tensors or keys, parts that are not one model's),
/// UNSUPPORTED (unknown architecture or tensor type), CANCELLED (the progress callback
/// returned false).
/// **Thread safety:** callable from any thread; loads may run concurrently.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `params` is NULL or initialised as documented
/// (`repack_cache_dir` NULL or a NUL-terminated string); `out_model` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_load(
    path: *const c_char,
    params: *const kolibri_model_params,
    out_model: *mut *mut kolibri_model,
) -> kolibri_status {
    guard(|| {
        let out = out_ptr(out_model, "out_model")?;
        // SAFETY: per this function's contract.
        let path = unsafe { c_str_path(path, "path") }?;
        // SAFETY: per this function's contract.
        let p = unsafe { read_params(params) }?;
        let mut report = |fraction: f32| match p.progress_callback {
            // SAFETY: the caller supplied a valid callback and its user data.
            Some(cb) => unsafe { cb(fraction, p.progress_user_data) },
            None => true,
        };
        let repack_cache = (!p.repack_cache_dir.is_null()).then(|| {
            // SAFETY: per this function's contract (params initialised as documented).
            unsafe { path_from_c(p.repack_cache_dir) }
        });
        let mut opts = LoadOptions {
            use_mmap: p.use_mmap,
            use_mlock: p.use_mlock,
            progress: Some(&mut report),
            repack_cache,
            paged: p.paged_weights,
            mtp: match p.n_mtp_blocks {
                0 => false,
                1 => true,
                n => {
                    return Err(Failure::invalid(format!(
                        "n_mtp_blocks is {n}: 0 or 1 (the first block drafts)"
                    )))
                }
            },
        };
        let model = Model::load_with(&path, &mut opts)?;
        let default_threads = match p.n_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        };
        let handle = kolibri_model {
            model: Arc::new(model),
            default_threads,
            chat_template: OnceLock::new(),
            #[cfg(feature = "grammar")]
            grammar: OnceLock::new(),
        };
        // SAFETY: `out` checked above.
        unsafe { write(out, into_raw(handle)) };
        Ok(())
    })
}

/// Frees a model. NULL is a no-op. Contexts created from the model hold their own reference
/// to its weights and stay usable; the memory is released when the last of them is freed.
///
/// **Ownership:** `model` is invalid after this call.
/// **Errors:** none; freeing the same handle twice is undefined behaviour.
/// **Thread safety:** no other thread may be using this `model` handle.
///
/// # Safety
/// `model` is NULL or a live handle from kolibri_model_load, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_free(model: *mut kolibri_model) {
    // SAFETY: per this function's contract.
    guard_void(|| unsafe { free_boxed(model) })
}

/// The model's architecture name (`general.architecture`, e.g. "qwen2", "gemma3").
///
/// **Ownership:** writes into the caller's `buf` (text plus NUL); `*len` receives the text's
/// length without the NUL.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`, NULL `buf` with `capacity > 0`),
/// BUFFER_TOO_SMALL (only `*len` written; pass NULL/0 to query the length).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `buf` is NULL or writable for `capacity` bytes; `len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_architecture(
    model: *const kolibri_model,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        // SAFETY: per this function's contract.
        unsafe { write_text(m.model.arch.name.as_bytes(), buf, capacity, len) }
    })
}

/// Scalar facts about a model, all written by one call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kolibri_model_dims {
    /// Number of weight elements (the "parameter count").
    pub n_params: u64,
    /// Context length the model was trained with (the largest n_ctx a context may use).
    pub n_ctx_train: u32,
    /// Vocabulary size; valid token ids are `0 .. n_vocab - 1`.
    pub n_vocab: i32,
    /// Embedding width.
    pub n_embd: u32,
    /// Number of transformer layers.
    pub n_layer: u32,
}

/// Writes the model's dimensions into `*out`.
///
/// Note: kolibri_model_dims may grow at the end in later versions; the caller passes
/// `sizeof(kolibri_model_dims)` as `out_size` and only that many bytes are written.
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `out`, `out_size` smaller than the first
/// version of the struct, 24 bytes).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `out` is NULL or writable for `out_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_get_dims(
    model: *const kolibri_model,
    out: *mut kolibri_model_dims,
    out_size: usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let out = out_ptr(out, "out")?;
        let first_version = std::mem::size_of::<kolibri_model_dims>();
        if out_size < first_version {
            return Err(Failure::invalid(format!(
                "out_size {out_size} is smaller than kolibri_model_dims ({first_version})"
            )));
        }
        let hp = &m.model.hparams;
        let dims = kolibri_model_dims {
            n_params: m.model.n_params(),
            n_ctx_train: hp.n_ctx_train as u32,
            n_vocab: hp.n_vocab as i32,
            n_embd: hp.n_embd as u32,
            n_layer: hp.n_layer as u32,
        };
        // SAFETY: `out` is writable for at least our struct's size (checked above).
        unsafe { write(out, dims) };
        Ok(())
    })
}

/// Which special token kolibri_model_special_token asks for (a `KOLIBRI_SPECIAL_TOKEN_*` value).
pub type kolibri_special_token = i32;
/// Beginning of sequence.
pub const KOLIBRI_SPECIAL_TOKEN_BOS: kolibri_special_token = 0;
/// End of sequence.
pub const KOLIBRI_SPECIAL_TOKEN_EOS: kolibri_special_token = 1;

/// The id of a special token (`kind` is a `KOLIBRI_SPECIAL_TOKEN_*` value).
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `out_token`, unknown `kind`), NOT_FOUND (the
/// model has no such token; `*out_token` is not written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `out_token` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_special_token(
    model: *const kolibri_model,
    kind: kolibri_special_token,
    out_token: *mut i32,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let out = out_ptr(out_token, "out_token")?;
        let tok = &m.model.tokenizer;
        let (name, id) = match kind {
            KOLIBRI_SPECIAL_TOKEN_BOS => ("BOS", tok.bos()),
            KOLIBRI_SPECIAL_TOKEN_EOS => ("EOS", tok.eos()),
            other => {
                return Err(Failure::invalid(format!(
                    "unknown special token kind {other}"
                )))
            }
        };
        let id = id.ok_or_else(|| {
            Failure::new(
                KOLIBRI_STATUS_NOT_FOUND,
                format!("the model has no {name} token"),
            )
        })?;
        // SAFETY: `out` checked above.
        unsafe { write(out, id as i32) };
        Ok(())
    })
}

/// Whether `token` ends a generation (EOS, end-of-turn and similar tokens of this model).
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `out`), INVALID_TOKEN (outside the vocabulary).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_token_is_eog(
    model: *const kolibri_model,
    token: i32,
    out: *mut bool,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let out = out_ptr(out, "out")?;
        let id = m.checked_token(token)?;
        // SAFETY: `out` checked above.
        unsafe { write(out, m.model.tokenizer.is_eog(id)) };
        Ok(())
    })
}

impl kolibri_model {
    /// A token id from C, or INVALID_TOKEN.
    pub(crate) fn checked_token(&self, token: i32) -> FfiResult<u32> {
        checked_token(token, self.model.hparams.n_vocab)
    }
}

/// A token id from C checked against a vocabulary size, or INVALID_TOKEN.
pub(crate) fn checked_token(token: i32, n_vocab: usize) -> FfiResult<u32> {
    match u32::try_from(token) {
        Ok(id) if (id as usize) < n_vocab => Ok(id),
        _ => Err(Failure::new(
            KOLIBRI_STATUS_INVALID_TOKEN,
            format!("token id {token} is out of range (vocabulary has {n_vocab})"),
        )),
    }
}

/// A metadata value as text: strings as stored, numbers and booleans printed, arrays as
/// `[a, b, ...]` with strings quoted.
///
/// **Ownership:** writes into the caller's `buf` (text plus NUL); `*len` receives the length
/// without the NUL.
/// **Errors:** INVALID_ARGUMENT (NULL `model`, `key` or `len`; `key` not UTF-8), NOT_FOUND (no
/// such key; nothing written), BUFFER_TOO_SMALL (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `key` is NULL or NUL-terminated; `buf` is NULL or writable for
/// `capacity` bytes; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_meta_string(
    model: *const kolibri_model,
    key: *const c_char,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        // SAFETY: per this function's contract.
        let key = unsafe { c_str(key, "key") }?;
        let value = m.model.gguf.get(key).ok_or_else(|| {
            Failure::new(KOLIBRI_STATUS_NOT_FOUND, format!("no metadata key {key:?}"))
        })?;
        // SAFETY: per this function's contract.
        unsafe { write_text(value.to_text().as_bytes(), buf, capacity, len) }
    })
}

/// Number of metadata keys (for listing them with kolibri_model_meta_key).
///
/// **Ownership:** results go to the caller's outputs; nothing to free.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `out_count`).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `out_count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_meta_count(
    model: *const kolibri_model,
    out_count: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let out = out_ptr(out_count, "out_count")?;
        // SAFETY: `out` checked above.
        unsafe { write(out, m.model.gguf.metadata().len()) };
        Ok(())
    })
}

/// The name of the metadata key at `index` (file order, `0 .. count - 1`).
///
/// **Ownership:** as kolibri_model_meta_string.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`, `index` out of range),
/// BUFFER_TOO_SMALL (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `buf` is NULL or writable for `capacity` bytes; `len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_meta_key(
    model: *const kolibri_model,
    index: usize,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let meta = m.model.gguf.metadata();
        let (key, _) = meta.get(index).ok_or_else(|| {
            Failure::invalid(format!("index {index} out of range ({} keys)", meta.len()))
        })?;
        // SAFETY: per this function's contract.
        unsafe { write_text(key.as_bytes(), buf, capacity, len) }
    })
}

/// The model's chat template (`tokenizer.chat_template`, Jinja source).
///
/// **Ownership:** as kolibri_model_meta_string.
/// **Errors:** INVALID_ARGUMENT (NULL `model` or `len`), NOT_FOUND (the model has none),
/// BUFFER_TOO_SMALL (only `*len` written).
/// **Thread safety:** callable from any thread.
///
/// # Safety
/// `model` is NULL or live; `buf` is NULL or writable for `capacity` bytes; `len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kolibri_model_chat_template(
    model: *const kolibri_model,
    buf: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> kolibri_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { handle(model, "model") }?;
        let source = m
            .model
            .gguf
            .get_str(crate::chat::TEMPLATE_KEY)
            .ok_or_else(|| {
                Failure::new(
                    KOLIBRI_STATUS_NOT_FOUND,
                    crate::chat::ChatTemplateError::NoTemplate.to_string(),
                )
            })?;
        // SAFETY: per this function's contract.
        unsafe { write_text(source.as_bytes(), buf, capacity, len) }
    })
}
