/* Checks libllama's structs against llama.h itself: every struct's size and every field's
 * offset, as this compiler lays them out from the header, against what the shim exports
 * (kolibri_llama_layout). Built against the llama.h of the llama-cpp-python 0.3.36 sdist by
 * scripts/test-libllama.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "llama.h"

int64_t kolibri_llama_layout(const char * name);
int32_t kolibri_llama_layout_count(void);

static int failures = 0;
static int checked = 0;

static void check(const char * name, size_t expected) {
    int64_t got = kolibri_llama_layout(name);
    checked++;
    if (got != (int64_t) expected) {
        printf("FAIL %s: llama.h %zu, libllama %lld\n", name, expected, (long long) got);
        failures++;
    }
}

#define SIZE(T) check(#T, sizeof(struct T))
#define FIELD(T, F) check(#T "." #F, offsetof(struct T, F))

int main(void) {
    SIZE(llama_token_data);
    FIELD(llama_token_data, id); FIELD(llama_token_data, logit); FIELD(llama_token_data, p);

    SIZE(llama_token_data_array);
    FIELD(llama_token_data_array, data); FIELD(llama_token_data_array, size);
    FIELD(llama_token_data_array, selected); FIELD(llama_token_data_array, sorted);

    SIZE(llama_batch);
    FIELD(llama_batch, n_tokens); FIELD(llama_batch, token); FIELD(llama_batch, embd);
    FIELD(llama_batch, pos); FIELD(llama_batch, n_seq_id); FIELD(llama_batch, seq_id);
    FIELD(llama_batch, logits);

    SIZE(llama_model_kv_override);
    FIELD(llama_model_kv_override, tag); FIELD(llama_model_kv_override, key);
    FIELD(llama_model_kv_override, val_i64);

    SIZE(llama_model_tensor_buft_override);
    FIELD(llama_model_tensor_buft_override, pattern); FIELD(llama_model_tensor_buft_override, buft);

    SIZE(llama_model_params);
    FIELD(llama_model_params, devices); FIELD(llama_model_params, tensor_buft_overrides);
    FIELD(llama_model_params, n_gpu_layers); FIELD(llama_model_params, split_mode);
    FIELD(llama_model_params, load_mode); FIELD(llama_model_params, lazy_mode);
    FIELD(llama_model_params, main_gpu); FIELD(llama_model_params, tensor_split);
    FIELD(llama_model_params, progress_callback); FIELD(llama_model_params, progress_callback_user_data);
    FIELD(llama_model_params, kv_overrides); FIELD(llama_model_params, vocab_only);
    FIELD(llama_model_params, check_tensors); FIELD(llama_model_params, use_extra_bufts);
    FIELD(llama_model_params, no_host); FIELD(llama_model_params, no_alloc);
    FIELD(llama_model_params, load_mtp);

    SIZE(llama_sampler_seq_config);
    FIELD(llama_sampler_seq_config, seq_id); FIELD(llama_sampler_seq_config, sampler);

    SIZE(llama_context_params);
    FIELD(llama_context_params, n_ctx); FIELD(llama_context_params, n_batch);
    FIELD(llama_context_params, n_ubatch); FIELD(llama_context_params, n_seq_max);
    FIELD(llama_context_params, n_rs_seq); FIELD(llama_context_params, n_outputs_max);
    FIELD(llama_context_params, n_outputs_max_per_seq); FIELD(llama_context_params, n_threads);
    FIELD(llama_context_params, n_threads_batch); FIELD(llama_context_params, ctx_type);
    FIELD(llama_context_params, rope_scaling_type); FIELD(llama_context_params, pooling_type);
    FIELD(llama_context_params, attention_type); FIELD(llama_context_params, flash_attn_type);
    FIELD(llama_context_params, rope_freq_base); FIELD(llama_context_params, rope_freq_scale);
    FIELD(llama_context_params, yarn_ext_factor); FIELD(llama_context_params, yarn_attn_factor);
    FIELD(llama_context_params, yarn_beta_fast); FIELD(llama_context_params, yarn_beta_slow);
    FIELD(llama_context_params, yarn_orig_ctx); FIELD(llama_context_params, defrag_thold);
    FIELD(llama_context_params, cb_eval); FIELD(llama_context_params, cb_eval_user_data);
    FIELD(llama_context_params, type_k); FIELD(llama_context_params, type_v);
    FIELD(llama_context_params, abort_callback); FIELD(llama_context_params, abort_callback_data);
    FIELD(llama_context_params, embeddings); FIELD(llama_context_params, offload_kqv);
    FIELD(llama_context_params, no_perf); FIELD(llama_context_params, op_offload);
    FIELD(llama_context_params, swa_full); FIELD(llama_context_params, kv_unified);
    FIELD(llama_context_params, samplers); FIELD(llama_context_params, n_samplers);
    FIELD(llama_context_params, ctx_other);

    SIZE(llama_model_tensor_override);
    FIELD(llama_model_tensor_override, pattern); FIELD(llama_model_tensor_override, type);

    SIZE(llama_model_imatrix_data);
    FIELD(llama_model_imatrix_data, name); FIELD(llama_model_imatrix_data, data);
    FIELD(llama_model_imatrix_data, size);

    SIZE(llama_model_quantize_params);
    FIELD(llama_model_quantize_params, nthread); FIELD(llama_model_quantize_params, ftype);
    FIELD(llama_model_quantize_params, output_tensor_type);
    FIELD(llama_model_quantize_params, token_embedding_type);
    FIELD(llama_model_quantize_params, allow_requantize);
    FIELD(llama_model_quantize_params, quantize_output_tensor);
    FIELD(llama_model_quantize_params, only_copy); FIELD(llama_model_quantize_params, pure);
    FIELD(llama_model_quantize_params, keep_split); FIELD(llama_model_quantize_params, dry_run);
    FIELD(llama_model_quantize_params, imatrix); FIELD(llama_model_quantize_params, kv_overrides);
    FIELD(llama_model_quantize_params, tt_overrides); FIELD(llama_model_quantize_params, prune_layers);
    FIELD(llama_model_quantize_params, max_buf_size);

    SIZE(llama_logit_bias);
    FIELD(llama_logit_bias, token); FIELD(llama_logit_bias, bias);

    SIZE(llama_sampler_chain_params);
    FIELD(llama_sampler_chain_params, no_perf);

    SIZE(llama_chat_message);
    FIELD(llama_chat_message, role); FIELD(llama_chat_message, content);

    SIZE(llama_embd);
    FIELD(llama_embd, data); FIELD(llama_embd, n_rows); FIELD(llama_embd, n_embd);

    SIZE(llama_sampler_i);
    FIELD(llama_sampler_i, name); FIELD(llama_sampler_i, accept); FIELD(llama_sampler_i, apply);
    FIELD(llama_sampler_i, reset); FIELD(llama_sampler_i, clone); FIELD(llama_sampler_i, free);
    FIELD(llama_sampler_i, backend_init); FIELD(llama_sampler_i, backend_accept);
    FIELD(llama_sampler_i, backend_apply); FIELD(llama_sampler_i, backend_set_input);
    FIELD(llama_sampler_i, backend_reset); FIELD(llama_sampler_i, copy_state);

    SIZE(llama_sampler);
    FIELD(llama_sampler, iface); FIELD(llama_sampler, ctx);

    SIZE(llama_perf_context_data);
    FIELD(llama_perf_context_data, t_start_ms); FIELD(llama_perf_context_data, t_load_ms);
    FIELD(llama_perf_context_data, t_p_eval_ms); FIELD(llama_perf_context_data, t_eval_ms);
    FIELD(llama_perf_context_data, n_p_eval); FIELD(llama_perf_context_data, n_eval);
    FIELD(llama_perf_context_data, n_reused);

    SIZE(llama_perf_sampler_data);
    FIELD(llama_perf_sampler_data, t_sample_ms); FIELD(llama_perf_sampler_data, n_sample);

    SIZE(llama_opt_params);
    FIELD(llama_opt_params, n_ctx_train); FIELD(llama_opt_params, param_filter);
    FIELD(llama_opt_params, param_filter_ud); FIELD(llama_opt_params, get_opt_pars);
    FIELD(llama_opt_params, get_opt_pars_ud); FIELD(llama_opt_params, optimizer_type);

    if (checked != kolibri_llama_layout_count()) {
        printf("FAIL checked %d names, libllama lays out %d\n", checked, kolibri_llama_layout_count());
        failures++;
    }
    printf("llama.h layout: %d sizes and offsets checked, %d differ\n", checked, failures);
    return failures != 0;
}
