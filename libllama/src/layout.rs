//! The sizes and field offsets of every struct in [`crate::types`], exported so that a C
//! program compiled against llama.h can check them (`tests/llama_h_layout.c`): the header is
//! the authority, and it is not copied into this repository.

use crate::guard::c_str;
use crate::types::*;
use std::ffi::c_char;
use std::mem::{offset_of, size_of};

macro_rules! table {
    ($($ty:ident { $($field:ident $(= $rust:ident)?),* })*) => {
        fn entries() -> Vec<(String, usize)> {
            let mut out = Vec::new();
            $(
                out.push((stringify!($ty).to_string(), size_of::<$ty>()));
                $(out.push((
                    format!("{}.{}", stringify!($ty), stringify!($field)),
                    table!(@offset $ty, $field $(, $rust)?),
                ));)*
            )*
            out
        }
    };
    (@offset $ty:ident, $field:ident) => { offset_of!($ty, $field) };
    (@offset $ty:ident, $field:ident, $rust:ident) => { offset_of!($ty, $rust) };
}

table! {
    llama_token_data { id, logit, p }
    llama_token_data_array { data, size, selected, sorted }
    llama_batch { n_tokens, token, embd, pos, n_seq_id, seq_id, logits }
    llama_model_kv_override { tag, key, val_i64 = value }
    llama_model_tensor_buft_override { pattern, buft }
    llama_model_params {
        devices, tensor_buft_overrides, n_gpu_layers, split_mode, load_mode, lazy_mode, main_gpu,
        tensor_split, progress_callback, progress_callback_user_data, kv_overrides, vocab_only,
        check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp
    }
    llama_sampler_seq_config { seq_id, sampler }
    llama_context_params {
        n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq,
        n_threads, n_threads_batch, ctx_type, rope_scaling_type, pooling_type, attention_type,
        flash_attn_type, rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor,
        yarn_beta_fast, yarn_beta_slow, yarn_orig_ctx, defrag_thold, cb_eval, cb_eval_user_data,
        type_k, type_v, abort_callback, abort_callback_data, embeddings, offload_kqv, no_perf,
        op_offload, swa_full, kv_unified, samplers, n_samplers, ctx_other
    }
    llama_model_tensor_override { pattern, type = type_ }
    llama_model_imatrix_data { name, data, size }
    llama_model_quantize_params {
        nthread, ftype, output_tensor_type, token_embedding_type, allow_requantize,
        quantize_output_tensor, only_copy, pure = pure_, keep_split, dry_run, imatrix, kv_overrides,
        tt_overrides, prune_layers, max_buf_size
    }
    llama_logit_bias { token, bias }
    llama_sampler_chain_params { no_perf }
    llama_chat_message { role, content }
    llama_embd { data, n_rows, n_embd }
    llama_sampler_i {
        name, accept, apply, reset, clone, free, backend_init, backend_accept, backend_apply,
        backend_set_input, backend_reset, copy_state
    }
    llama_sampler { iface, ctx }
    llama_perf_context_data { t_start_ms, t_load_ms, t_p_eval_ms, t_eval_ms, n_p_eval, n_eval, n_reused }
    llama_perf_sampler_data { t_sample_ms, n_sample }
    llama_opt_params { n_ctx_train, param_filter, param_filter_ud, get_opt_pars, get_opt_pars_ud, optimizer_type }
}

/// The size of struct `name` ("llama_batch") or the offset of a field ("llama_batch.pos");
/// -1 for a name the shim does not lay out.
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn kolibri_llama_layout(name: *const c_char) -> i64 {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { c_str(name) }) else {
        return -1;
    };
    entries()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(-1, |(_, v)| v as i64)
}

/// How many names [`kolibri_llama_layout`] knows, so a checker can tell it covered them all.
#[no_mangle]
pub extern "C" fn kolibri_llama_layout_count() -> i32 {
    entries().len() as i32
}
