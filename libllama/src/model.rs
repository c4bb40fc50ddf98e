//! `llama_model` and `llama_vocab`: loading, hyperparameters and metadata.

use crate::guard::{c_str, guard, handle, write_c_string};
use crate::log;
use crate::types::*;
use kolibri::gguf::{GgufFile, Value};
use kolibri::model::{LoadOptions, Model};
use kolibri::tokenizer::Tokenizer;
use std::ffi::{c_char, CString};
use std::ptr;
use std::sync::Arc;

/// A loaded model. With `vocab_only` there is no engine model, only the vocabulary and
/// metadata (llama.cpp's vocabulary files carry no weights).
pub struct llama_model {
    pub(crate) engine: Option<Arc<Model>>,
    pub(crate) vocab: crate::vocab::llama_vocab,
    /// Scalar metadata as text, sorted by key (llama.cpp leaves arrays out).
    meta: Vec<(CString, CString)>,
    desc: String,
    n_params: u64,
    size: u64,
    ftype: i32,
}

impl llama_model {
    fn meta_value(&self, key: &str) -> Option<&CString> {
        self.meta
            .iter()
            .find(|(k, _)| k.as_bytes() == key.as_bytes())
            .map(|(_, v)| v)
    }
}

#[no_mangle]
pub extern "C" fn llama_model_default_params() -> llama_model_params {
    llama_model_params {
        devices: ptr::null_mut(),
        tensor_buft_overrides: ptr::null(),
        n_gpu_layers: -1,
        split_mode: 1,
        load_mode: LLAMA_LOAD_MODE_AUTO,
        lazy_mode: 1,
        main_gpu: 0,
        tensor_split: ptr::null(),
        progress_callback: None,
        progress_callback_user_data: ptr::null_mut(),
        kv_overrides: ptr::null(),
        vocab_only: false,
        check_tensors: false,
        use_extra_bufts: true,
        no_host: false,
        no_alloc: false,
        load_mtp: false,
    }
}

/// # Safety
/// `path` is NULL or a C string; `params`' pointers are NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn llama_model_load_from_file(
    path: *const c_char,
    params: llama_model_params,
) -> *mut llama_model {
    const F: &str = "llama_model_load_from_file";
    guard(F, ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(path) = (unsafe { c_str(path) }) else {
            log::error(&format!("{F}: NULL path"));
            return ptr::null_mut();
        };
        match load(&[path.as_ref().into()], &params) {
            Ok(m) => Box::into_raw(Box::new(m)),
            Err(e) => {
                log::error(&format!("{F}: failed to load model from {path}: {e}"));
                ptr::null_mut()
            }
        }
    })
}

/// The parts of a split model, in order, whatever their names.
///
/// # Safety
/// `paths` is NULL or holds `n_paths` pointers, each NULL or a C string; `params`' pointers
/// are NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn llama_model_load_from_splits(
    paths: *const *const c_char,
    n_paths: usize,
    params: llama_model_params,
) -> *mut llama_model {
    const F: &str = "llama_model_load_from_splits";
    guard(F, ptr::null_mut(), || {
        if paths.is_null() || n_paths == 0 {
            log::error(&format!("{F}: no paths"));
            return ptr::null_mut();
        }
        // SAFETY: the caller's contract: n_paths pointers at `paths`.
        let given = unsafe { std::slice::from_raw_parts(paths, n_paths) };
        let mut parts = Vec::with_capacity(n_paths);
        for (i, &p) in given.iter().enumerate() {
            // SAFETY: each NULL or a C string, by the contract.
            let Some(path) = (unsafe { c_str(p) }) else {
                log::error(&format!("{F}: path {i} is NULL"));
                return ptr::null_mut();
            };
            parts.push(std::path::PathBuf::from(path.as_ref()));
        }
        match load(&parts, &params) {
            Ok(m) => Box::into_raw(Box::new(m)),
            Err(e) => {
                log::error(&format!("{F}: failed to load model: {e}"));
                ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// As [`llama_model_load_from_file`].
#[no_mangle]
pub unsafe extern "C" fn llama_load_model_from_file(
    path: *const c_char,
    params: llama_model_params,
) -> *mut llama_model {
    // SAFETY: the same contract.
    unsafe { llama_model_load_from_file(path, params) }
}

/// The model in `paths`: one file (any part of a split model brings the others), or the
/// parts of a split model in order.
fn load(paths: &[std::path::PathBuf], params: &llama_model_params) -> Result<llama_model, String> {
    if !params.kv_overrides.is_null() {
        // SAFETY: llama.h's kv_overrides is an array ended by an entry with an empty key.
        let first_key = unsafe { (*params.kv_overrides).key[0] };
        if first_key != 0 {
            log::once(
                "kv_overrides",
                "metadata overrides are not supported; ignored",
            );
        }
    }
    if params.vocab_only {
        let gguf = GgufFile::open_parts(paths).map_err(|e| e.to_string())?;
        let tokenizer = Tokenizer::from_gguf(&gguf).map_err(|e| e.to_string())?;
        let vocab =
            crate::vocab::llama_vocab::new(crate::vocab::Source::Alone(Box::new(tokenizer)));
        return Ok(describe(None, &gguf, vocab));
    }
    let mut progress = |fraction: f32| match params.progress_callback {
        // SAFETY: the user's callback with the user data it was registered with.
        Some(cb) => unsafe { cb(fraction, params.progress_callback_user_data) },
        None => true,
    };
    let (use_mmap, use_mlock) = match params.load_mode {
        LLAMA_LOAD_MODE_NONE | LLAMA_LOAD_MODE_DIRECT_IO => (false, false),
        LLAMA_LOAD_MODE_MLOCK => (false, true),
        LLAMA_LOAD_MODE_MMAP_MLOCK => (true, true),
        _ => (true, false),
    };
    let mut opts = LoadOptions {
        use_mmap,
        use_mlock,
        progress: Some(&mut progress),
        ..LoadOptions::default()
    };
    let model = Arc::new(Model::load_parts_with(paths, &mut opts).map_err(|e| e.to_string())?);
    let vocab = crate::vocab::llama_vocab::new(crate::vocab::Source::Model(Arc::clone(&model)));
    Ok(describe(Some(Arc::clone(&model)), &model.gguf, vocab))
}

fn describe(
    engine: Option<Arc<Model>>,
    gguf: &GgufFile,
    vocab: crate::vocab::llama_vocab,
) -> llama_model {
    let mut meta: Vec<(CString, CString)> = gguf
        .metadata()
        .iter()
        .filter(|(_, v)| !matches!(v, Value::Array(_)))
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::F32(x) => format!("{x:.6}"),
                Value::F64(x) => format!("{x:.6}"),
                other => other.to_text(),
            };
            Some((
                CString::new(k.as_str()).ok()?,
                CString::new(text.replace('\0', "")).ok()?,
            ))
        })
        .collect();
    meta.sort();
    let size: u64 = gguf
        .tensors()
        .iter()
        .map(|t| gguf.tensor_data(t).len() as u64)
        .sum();
    let n_params = engine.as_ref().map_or(0, |m| m.n_params());
    let ftype = gguf
        .get_u64("general.file_type")
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(LLAMA_FTYPE_GUESSED);
    let arch = gguf.get_str("general.architecture").unwrap_or("unknown");
    let desc = format!(
        "{arch} {} {}",
        size_label(n_params),
        crate::names::ftype_name(ftype).to_string_lossy()
    );
    llama_model {
        engine,
        vocab,
        meta,
        desc,
        n_params,
        size,
        ftype,
    }
}

/// "0.5B", "1.5B", "270M": the size class llama.cpp's description names.
fn size_label(n_params: u64) -> String {
    if n_params >= 1_000_000_000 {
        format!("{:.1}B", n_params as f64 / 1e9)
    } else {
        format!("{}M", (n_params as f64 / 1e6).round())
    }
}

/// # Safety
/// `model` is NULL or a model from `llama_model_load_from_file` not yet freed, whose contexts
/// are already freed.
#[no_mangle]
pub unsafe extern "C" fn llama_model_free(model: *mut llama_model) {
    if !model.is_null() {
        // SAFETY: the caller's contract; the box came from `Box::into_raw`.
        guard("llama_model_free", (), || {
            drop(unsafe { Box::from_raw(model) })
        });
    }
}

/// # Safety
/// As [`llama_model_free`].
#[no_mangle]
pub unsafe extern "C" fn llama_free_model(model: *mut llama_model) {
    // SAFETY: the same contract.
    unsafe { llama_model_free(model) }
}

/// A query of the engine model's hyperparameters; 0 for NULL or a vocabulary-only model.
unsafe fn hparam(model: *const llama_model, f: impl FnOnce(&Model) -> i64) -> i64 {
    // SAFETY: the caller passes NULL or a live model.
    let Some(m) = (unsafe { handle("llama_model query", model) }) else {
        return 0;
    };
    m.engine.as_deref().map_or(0, f)
}

macro_rules! model_i32 {
    ($($name:ident => |$m:ident| $e:expr;)*) => {$(
        /// # Safety
        /// `model` is NULL or a live model.
        #[no_mangle]
        pub unsafe extern "C" fn $name(model: *const llama_model) -> i32 {
            // SAFETY: the caller's contract.
            unsafe { hparam(model, |$m| $e as i64) as i32 }
        }
    )*};
}

model_i32! {
    llama_model_n_ctx_train => |m| m.hparams.n_ctx_train;
    llama_model_n_embd => |m| m.hparams.n_embd;
    llama_model_n_embd_inp => |m| m.hparams.n_embd;
    llama_model_n_embd_out => |m| m.hparams.n_embd;
    llama_model_n_layer => |m| m.hparams.n_layer;
    llama_model_n_layer_nextn => |_m| 0;
    llama_model_n_head => |m| m.hparams.heads[0].n_head;
    llama_model_n_head_kv => |m| m.hparams.heads[0].n_head_kv;
    llama_model_n_swa => |m| m.hparams.sliding_window;
    llama_n_ctx_train => |m| m.hparams.n_ctx_train;
    llama_n_embd => |m| m.hparams.n_embd;
    llama_n_layer => |m| m.hparams.n_layer;
    llama_n_head => |m| m.hparams.heads[0].n_head;
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_rope_freq_scale_train(model: *const llama_model) -> f32 {
    // SAFETY: the caller's contract.
    let m = unsafe { model.as_ref() };
    m.and_then(|m| m.engine.as_deref())
        .map_or(0.0, |e| e.hparams.rope_freq_scale)
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_rope_type(model: *const llama_model) -> i32 {
    // SAFETY: the caller's contract.
    let m = unsafe { model.as_ref() };
    let arch = m.and_then(|m| m.meta_value("general.architecture"));
    // Llama-family models rotate adjacent pairs; the rest Kolibri runs rotate halves (NEOX).
    match arch.map(|a| a.to_string_lossy().into_owned()).as_deref() {
        Some("llama") => LLAMA_ROPE_TYPE_NORM,
        _ => LLAMA_ROPE_TYPE_NEOX,
    }
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_get_vocab(
    model: *const llama_model,
) -> *const crate::vocab::llama_vocab {
    // SAFETY: the caller's contract.
    match unsafe { handle("llama_model_get_vocab", model) } {
        Some(m) => &m.vocab,
        None => ptr::null(),
    }
}

/// # Safety
/// `model` is NULL or a live model; `key` a C string; `buf` NULL or `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_val_str(
    model: *const llama_model,
    key: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> i32 {
    // SAFETY: the caller's contract.
    let (Some(m), Some(key)) = (
        unsafe { handle("llama_model_meta_val_str", model) },
        unsafe { c_str(key) },
    ) else {
        return -1;
    };
    match m.meta_value(&key) {
        // SAFETY: the caller's contract on `buf`.
        Some(v) => unsafe { write_c_string(buf, size, v.as_bytes()) },
        None => {
            // SAFETY: as above.
            unsafe { write_c_string(buf, size, b"") };
            -1
        }
    }
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_count(model: *const llama_model) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { model.as_ref() }.map_or(-1, |m| m.meta.len() as i32)
}

unsafe fn meta_at(
    model: *const llama_model,
    i: i32,
    buf: *mut c_char,
    size: usize,
    pick: impl FnOnce(&(CString, CString)) -> &CString,
) -> i32 {
    // SAFETY: the caller passes NULL or a live model.
    let entry =
        unsafe { model.as_ref() }.and_then(|m| usize::try_from(i).ok().and_then(|i| m.meta.get(i)));
    match entry {
        // SAFETY: the caller's contract on `buf`.
        Some(e) => unsafe { write_c_string(buf, size, pick(e).as_bytes()) },
        None => {
            // SAFETY: as above.
            unsafe { write_c_string(buf, size, b"") };
            -1
        }
    }
}

/// # Safety
/// `model` is NULL or a live model; `buf` NULL or `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_key_by_index(
    model: *const llama_model,
    i: i32,
    buf: *mut c_char,
    size: usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { meta_at(model, i, buf, size, |(k, _)| k) }
}

/// # Safety
/// As [`llama_model_meta_key_by_index`].
#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_val_str_by_index(
    model: *const llama_model,
    i: i32,
    buf: *mut c_char,
    size: usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { meta_at(model, i, buf, size, |(_, v)| v) }
}

/// # Safety
/// `model` is NULL or a live model; `buf` NULL or `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_model_desc(
    model: *const llama_model,
    buf: *mut c_char,
    size: usize,
) -> i32 {
    // SAFETY: the caller's contract.
    match unsafe { handle("llama_model_desc", model) } {
        // SAFETY: as above.
        Some(m) => unsafe { write_c_string(buf, size, m.desc.as_bytes()) },
        None => -1,
    }
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_ftype(model: *const llama_model) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { model.as_ref() }.map_or(LLAMA_FTYPE_GUESSED, |m| m.ftype)
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_size(model: *const llama_model) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { model.as_ref() }.map_or(0, |m| m.size)
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_n_params(model: *const llama_model) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { model.as_ref() }.map_or(0, |m| m.n_params)
}

/// The GGUF's `tokenizer.chat_template` (or `tokenizer.chat_template.NAME`), owned by the model.
///
/// # Safety
/// `model` is NULL or a live model; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn llama_model_chat_template(
    model: *const llama_model,
    name: *const c_char,
) -> *const c_char {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { handle("llama_model_chat_template", model) }) else {
        return ptr::null();
    };
    // SAFETY: as above.
    let key = match unsafe { c_str(name) } {
        Some(n) => format!("tokenizer.chat_template.{n}"),
        None => "tokenizer.chat_template".to_string(),
    };
    m.meta_value(&key).map_or(ptr::null(), |v| v.as_ptr())
}

macro_rules! model_bool {
    ($($name:ident => $value:expr;)*) => {$(
        /// # Safety
        /// `model` is NULL or a live model.
        #[no_mangle]
        pub unsafe extern "C" fn $name(_model: *const llama_model) -> bool {
            $value
        }
    )*};
}

// Kolibri runs decoder-only transformers.
model_bool! {
    llama_model_has_encoder => false;
    llama_model_has_decoder => true;
    llama_model_is_recurrent => false;
    llama_model_is_hybrid => false;
    llama_model_is_diffusion => false;
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_decoder_start_token(
    _model: *const llama_model,
) -> llama_token {
    LLAMA_TOKEN_NULL
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_n_cls_out(_model: *const llama_model) -> u32 {
    0
}

/// # Safety
/// `model` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn llama_model_cls_label(
    _model: *const llama_model,
    _i: u32,
) -> *const c_char {
    ptr::null()
}
