//! The structs, enums and callbacks that cross llama.h's boundary, laid out exactly as llama.h
//! (llama.cpp 0c1e57098) declares them. `tests/llama_h_layout.c` checks every size and offset
//! against the header itself (see [`crate::layout`]).
//!
//! Names are llama.h's, so that a reader can hold this file beside the header.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

pub type llama_token = i32;
pub type llama_pos = i32;
pub type llama_seq_id = i32;
pub type llama_state_seq_flags = u32;

pub const LLAMA_DEFAULT_SEED: u32 = 0xFFFF_FFFF;
pub const LLAMA_TOKEN_NULL: llama_token = -1;

/// `enum ggml_log_level`.
pub const GGML_LOG_LEVEL_INFO: i32 = 2;
pub const GGML_LOG_LEVEL_WARN: i32 = 3;
pub const GGML_LOG_LEVEL_ERROR: i32 = 4;

/// `enum llama_vocab_type`.
pub const LLAMA_VOCAB_TYPE_SPM: i32 = 1;
pub const LLAMA_VOCAB_TYPE_BPE: i32 = 2;
pub const LLAMA_VOCAB_TYPE_WPM: i32 = 3;

/// `enum llama_rope_type`.
pub const LLAMA_ROPE_TYPE_NORM: i32 = 0;
pub const LLAMA_ROPE_TYPE_NEOX: i32 = 2;

/// `enum llama_pooling_type`.
pub const LLAMA_POOLING_TYPE_UNSPECIFIED: i32 = -1;
pub const LLAMA_POOLING_TYPE_NONE: i32 = 0;
pub const LLAMA_POOLING_TYPE_MEAN: i32 = 1;
pub const LLAMA_POOLING_TYPE_CLS: i32 = 2;
pub const LLAMA_POOLING_TYPE_LAST: i32 = 3;

/// `enum llama_load_mode`.
pub const LLAMA_LOAD_MODE_AUTO: i32 = -1;
pub const LLAMA_LOAD_MODE_NONE: i32 = 0;
pub const LLAMA_LOAD_MODE_MMAP: i32 = 1;
pub const LLAMA_LOAD_MODE_MLOCK: i32 = 2;
pub const LLAMA_LOAD_MODE_MMAP_MLOCK: i32 = 3;
pub const LLAMA_LOAD_MODE_DIRECT_IO: i32 = 4;

/// `enum ggml_type` values the KV cache accepts.
pub const GGML_TYPE_F16: i32 = 1;
pub const GGML_TYPE_Q4_0: i32 = 2;
pub const GGML_TYPE_Q8_0: i32 = 8;

/// `enum llama_ftype` for files that do not say.
pub const LLAMA_FTYPE_GUESSED: i32 = 1024;

pub type llama_progress_callback =
    Option<unsafe extern "C" fn(progress: f32, user: *mut c_void) -> bool>;
pub type ggml_abort_callback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;
pub type ggml_log_callback =
    Option<unsafe extern "C" fn(level: i32, text: *const c_char, user: *mut c_void)>;
pub type ggml_backend_sched_eval_callback =
    Option<unsafe extern "C" fn(tensor: *mut c_void, ask: bool, user: *mut c_void) -> bool>;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct llama_token_data {
    pub id: llama_token,
    pub logit: f32,
    pub p: f32,
}

#[repr(C)]
pub struct llama_token_data_array {
    pub data: *mut llama_token_data,
    pub size: usize,
    /// Index into `data` (not a token id) of the chosen candidate, -1 before one is chosen.
    pub selected: i64,
    pub sorted: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_batch {
    pub n_tokens: i32,
    pub token: *mut llama_token,
    pub embd: *mut f32,
    pub pos: *mut llama_pos,
    pub n_seq_id: *mut i32,
    pub seq_id: *mut *mut llama_seq_id,
    pub logits: *mut i8,
}

#[repr(C)]
pub struct llama_model_kv_override {
    pub tag: i32,
    pub key: [c_char; 128],
    /// `union { int64_t; double; bool; char[128]; }`: 128 bytes, 8-aligned.
    pub value: [u64; 16],
}

#[repr(C)]
pub struct llama_model_tensor_buft_override {
    pub pattern: *const c_char,
    pub buft: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_model_params {
    pub devices: *mut *mut c_void,
    pub tensor_buft_overrides: *const llama_model_tensor_buft_override,
    pub n_gpu_layers: i32,
    pub split_mode: i32,
    pub load_mode: i32,
    pub lazy_mode: i32,
    pub main_gpu: i32,
    pub tensor_split: *const f32,
    pub progress_callback: llama_progress_callback,
    pub progress_callback_user_data: *mut c_void,
    pub kv_overrides: *const llama_model_kv_override,
    pub vocab_only: bool,
    pub check_tensors: bool,
    pub use_extra_bufts: bool,
    pub no_host: bool,
    pub no_alloc: bool,
    pub load_mtp: bool,
}

#[repr(C)]
pub struct llama_sampler_seq_config {
    pub seq_id: llama_seq_id,
    pub sampler: *mut llama_sampler,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_context_params {
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_rs_seq: u32,
    pub n_outputs_max: u32,
    pub n_outputs_max_per_seq: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub ctx_type: i32,
    pub rope_scaling_type: i32,
    pub pooling_type: i32,
    pub attention_type: i32,
    pub flash_attn_type: i32,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub yarn_orig_ctx: u32,
    pub defrag_thold: f32,
    pub cb_eval: ggml_backend_sched_eval_callback,
    pub cb_eval_user_data: *mut c_void,
    pub type_k: i32,
    pub type_v: i32,
    pub abort_callback: ggml_abort_callback,
    pub abort_callback_data: *mut c_void,
    pub embeddings: bool,
    pub offload_kqv: bool,
    pub no_perf: bool,
    pub op_offload: bool,
    pub swa_full: bool,
    pub kv_unified: bool,
    pub samplers: *mut llama_sampler_seq_config,
    pub n_samplers: usize,
    pub ctx_other: *mut c_void,
}

#[repr(C)]
pub struct llama_model_tensor_override {
    pub pattern: *const c_char,
    pub type_: i32,
}

#[repr(C)]
pub struct llama_model_imatrix_data {
    pub name: *const c_char,
    pub data: *const f32,
    pub size: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_model_quantize_params {
    pub nthread: i32,
    pub ftype: i32,
    pub output_tensor_type: i32,
    pub token_embedding_type: i32,
    pub allow_requantize: bool,
    pub quantize_output_tensor: bool,
    pub only_copy: bool,
    pub pure_: bool,
    pub keep_split: bool,
    pub dry_run: bool,
    pub imatrix: *const llama_model_imatrix_data,
    pub kv_overrides: *const llama_model_kv_override,
    pub tt_overrides: *const llama_model_tensor_override,
    pub prune_layers: *const i32,
    pub max_buf_size: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_logit_bias {
    pub token: llama_token,
    pub bias: f32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_sampler_chain_params {
    pub no_perf: bool,
}

#[repr(C)]
pub struct llama_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
}

#[repr(C)]
pub struct llama_embd {
    pub data: *const f32,
    pub n_rows: usize,
    pub n_embd: usize,
}

/// A sampler's operations. Built-in samplers share one table ([`crate::sampler`]); user code
/// may bring its own.
#[repr(C)]
pub struct llama_sampler_i {
    pub name: Option<unsafe extern "C" fn(smpl: *const llama_sampler) -> *const c_char>,
    pub accept: Option<unsafe extern "C" fn(smpl: *mut llama_sampler, token: llama_token)>,
    pub apply:
        Option<unsafe extern "C" fn(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array)>,
    pub reset: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    pub clone: Option<unsafe extern "C" fn(smpl: *const llama_sampler) -> *mut llama_sampler>,
    pub free: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    // The backend (graph) sampling hooks: never called by Kolibri, kept for the layout.
    pub backend_init: Option<unsafe extern "C" fn()>,
    pub backend_accept: Option<unsafe extern "C" fn()>,
    pub backend_apply: Option<unsafe extern "C" fn()>,
    pub backend_set_input: Option<unsafe extern "C" fn()>,
    pub backend_reset: Option<unsafe extern "C" fn()>,
    pub copy_state:
        Option<unsafe extern "C" fn(src: *const llama_sampler, dst: *mut llama_sampler)>,
}

#[repr(C)]
pub struct llama_sampler {
    pub iface: *const llama_sampler_i,
    pub ctx: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct llama_perf_context_data {
    pub t_start_ms: f64,
    pub t_load_ms: f64,
    pub t_p_eval_ms: f64,
    pub t_eval_ms: f64,
    pub n_p_eval: i32,
    pub n_eval: i32,
    pub n_reused: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct llama_perf_sampler_data {
    pub t_sample_ms: f64,
    pub n_sample: i32,
}

#[repr(C)]
pub struct llama_opt_params {
    pub n_ctx_train: u32,
    pub param_filter:
        Option<unsafe extern "C" fn(tensor: *const c_void, user: *mut c_void) -> bool>,
    pub param_filter_ud: *mut c_void,
    /// Returns `struct ggml_opt_optimizer_params` by value; never called here.
    pub get_opt_pars: Option<unsafe extern "C" fn()>,
    pub get_opt_pars_ud: *mut c_void,
    pub optimizer_type: i32,
}
