//! What llama.h declares and Kolibri does not do. Tools bind every symbol at start-up, so each
//! is exported; each returns llama.h's failure value and says why once through the log.
//! Pointers to ggml's own types are `c_void` here: nothing reads them.

use crate::log;
use crate::types::*;
use std::ffi::{c_char, c_void};
use std::ptr;

macro_rules! unsupported {
    ($($why:literal: fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty = $fail:expr)?;)*) => {$(
        #[doc = concat!("Not supported: ", $why, ".")]
        ///
        /// # Safety
        /// Any arguments: none is read.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            $(let _ = $arg;)*
            log::once(stringify!($name), concat!("not supported: ", $why));
            $($fail)?
        }
    )*};
}

const LORA: &str = "LoRA adapters";

unsupported! {
    "building a model from user tensors": fn llama_model_init_from_user(
        metadata: *mut c_void, set_tensor_data: *mut c_void, user: *mut c_void, params: llama_model_params
    ) -> *mut crate::model::llama_model = ptr::null_mut();
    "loading from a FILE*; pass a path": fn llama_model_load_from_file_ptr(
        file: *mut c_void, params: llama_model_params
    ) -> *mut crate::model::llama_model = ptr::null_mut();
    "writing a model back to GGUF": fn llama_model_save_to_file(model: *const c_void, path: *const c_char);
    "quantizing through llama.h; use `kolibri quantize`": fn llama_model_quantize(
        input: *const c_char, output: *const c_char, params: *const llama_model_quantize_params
    ) -> u32 = 1;
    "LoRA adapters": fn llama_adapter_lora_init(model: *mut c_void, path: *const c_char) -> *mut c_void = ptr::null_mut();
    "LoRA adapters": fn llama_adapter_lora_init_from_file_ptr(model: *mut c_void, file: *mut c_void) -> *mut c_void = ptr::null_mut();
    "LoRA adapters": fn llama_adapter_meta_val_str(
        adapter: *const c_void, key: *const c_char, buf: *mut c_char, size: usize
    ) -> i32 = -1;
    "LoRA adapters": fn llama_adapter_meta_count(adapter: *const c_void) -> i32 = -1;
    "LoRA adapters": fn llama_adapter_meta_key_by_index(
        adapter: *const c_void, i: i32, buf: *mut c_char, size: usize
    ) -> i32 = -1;
    "LoRA adapters": fn llama_adapter_meta_val_str_by_index(
        adapter: *const c_void, i: i32, buf: *mut c_char, size: usize
    ) -> i32 = -1;
    "LoRA adapters": fn llama_adapter_lora_free(adapter: *mut c_void);
    "LoRA adapters": fn llama_adapter_get_alora_n_invocation_tokens(adapter: *const c_void) -> u64 = 0;
    "LoRA adapters": fn llama_adapter_get_alora_invocation_tokens(adapter: *const c_void) -> *const llama_token = ptr::null();
    "control vectors": fn llama_set_adapter_cvec(
        ctx: *mut c_void, data: *const f32, len: usize, n_embd: i32, il_start: i32, il_end: i32
    ) -> i32 = -1;
    "backend (graph) sampling; use llama_sampler_sample": fn llama_set_sampler(
        ctx: *mut c_void, seq: llama_seq_id, smpl: *mut llama_sampler
    ) -> bool = false;
    "backend (graph) sampling": fn llama_get_sampled_token_ith(ctx: *mut c_void, i: i32) -> llama_token = LLAMA_TOKEN_NULL;
    "backend (graph) sampling": fn llama_get_sampled_probs_ith(ctx: *mut c_void, i: i32) -> *mut f32 = ptr::null_mut();
    "backend (graph) sampling": fn llama_get_sampled_probs_count_ith(ctx: *mut c_void, i: i32) -> u32 = 0;
    "backend (graph) sampling": fn llama_get_sampled_logits_ith(ctx: *mut c_void, i: i32) -> *mut f32 = ptr::null_mut();
    "backend (graph) sampling": fn llama_get_sampled_logits_count_ith(ctx: *mut c_void, i: i32) -> u32 = 0;
    "backend (graph) sampling": fn llama_get_sampled_candidates_ith(ctx: *mut c_void, i: i32) -> *mut llama_token = ptr::null_mut();
    "backend (graph) sampling": fn llama_get_sampled_candidates_count_ith(ctx: *mut c_void, i: i32) -> u32 = 0;
    "lazy grammars (triggered by words)": fn llama_sampler_init_grammar_lazy(
        vocab: *const c_void, grammar: *const c_char, root: *const c_char,
        trigger_words: *const *const c_char, n_words: usize,
        trigger_tokens: *const llama_token, n_tokens: usize
    ) -> *mut llama_sampler = ptr::null_mut();
    "lazy grammars (triggered by patterns)": fn llama_sampler_init_grammar_lazy_patterns(
        vocab: *const c_void, grammar: *const c_char, root: *const c_char,
        trigger_patterns: *const *const c_char, n_patterns: usize,
        trigger_tokens: *const llama_token, n_tokens: usize
    ) -> *mut llama_sampler = ptr::null_mut();
    "the DRY sampler": fn llama_sampler_init_dry(
        vocab: *const c_void, multiplier: f32, base: f32, allowed_length: i32, penalty_last_n: i32,
        seq_breakers: *const *const c_char, n_breakers: usize
    ) -> *mut llama_sampler = ptr::null_mut();
    "the adaptive-p sampler": fn llama_sampler_init_adaptive_p(target: f32, decay: f32, seed: u32) -> *mut llama_sampler = ptr::null_mut();
    "the infill sampler": fn llama_sampler_init_infill(vocab: *const c_void) -> *mut llama_sampler = ptr::null_mut();
    "training": fn llama_opt_init(ctx: *mut c_void, model: *mut c_void, params: llama_opt_params);
    "training": fn llama_opt_epoch(
        ctx: *mut c_void, dataset: *mut c_void, result_train: *mut c_void, result_eval: *mut c_void,
        idata_split: i64, callback_train: *mut c_void, callback_eval: *mut c_void
    );
}

/// LoRA adapters are refused; setting none is accepted (tools call it with zero adapters).
///
/// # Safety
/// Any arguments: only the count is read.
#[no_mangle]
pub unsafe extern "C" fn llama_set_adapters_lora(
    _ctx: *mut c_void,
    _adapters: *mut *mut c_void,
    n_adapters: usize,
    _scales: *mut f32,
) -> i32 {
    if n_adapters == 0 {
        return 0;
    }
    log::once("llama_set_adapters_lora", LORA);
    -1
}
