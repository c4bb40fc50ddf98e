// Gemma 4's assistant drafter's log-probabilities through llama.cpp's C API, teacher-forced on
// each prompt: the reference tests/mtp_reference.rs compares Kolibri's assistant against.
// Built and run by scripts/record-mtp-reference.py against a llama.cpp build outside the
// repository.
//
// usage: assistant_logits TARGET ASSISTANT FLASH_ATTN(0|1) TOP PROMPT...
// For each prompt the target runs over its tokens, keeping each token's hidden state (the
// output norm's result). Then, from the last token back to the second, the target's cache is
// cut to the positions before token p and the assistant (a context sharing the target's KV
// cache, as llama.cpp's draft-mtp sets it up) reads token p at position p paired with the
// target's hidden state of token p - 1: what it sees when it drafts after token p - 1. Output
// per prompt: "case", "prompt ID...", then per token from the second on "step ID LOGPROB ..."
// (the TOP best of the assistant's prediction of the token after it, best first).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define MAX_TOKENS 512
#include "top_logprobs.h"


static struct llama_context_params params(int flash) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = MAX_TOKENS;
    cp.n_batch = cp.n_ubatch = MAX_TOKENS;
    cp.n_threads = cp.n_threads_batch = 2;
    // Every position stays in the sliding layers' cache: cutting it back must not lose any.
    cp.swa_full = true;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    return cp;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s TARGET ASSISTANT FLASH_ATTN TOP PROMPT...\n", argv[0]);
        return 2;
    }
    int flash = atoi(argv[3]), top = atoi(argv[4]);
    if (top < 1 || top > 64) return 2;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *target_model = llama_model_load_from_file(argv[1], mp);
    struct llama_model *assistant_model = llama_model_load_from_file(argv[2], mp);
    if (!target_model || !assistant_model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(target_model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_embd = llama_model_n_embd(target_model);
    for (int c = 5; c < argc; c++) {
        struct llama_context_params tp = params(flash);
        tp.embeddings = true;  // the target's hidden states
        struct llama_context *target = llama_init_from_model(target_model, tp);
        if (!target) return 1;
        struct llama_context_params ap = params(flash);
        ap.ctx_other = target;
        struct llama_context *assistant = llama_init_from_model(assistant_model, ap);
        if (!assistant) return 1;
        static struct prompt p;
        int n = begin_case(vocab, argv[c], &p);
        if (n <= 1) return 1;
        if (llama_decode(target, prompt_batch(&p, 0, n, NULL)) != 0) return 1;
        float *hidden = calloc((size_t)n * (size_t)n_embd, sizeof(float));
        for (int i = 0; i < n; i++) {
            const float *h = llama_get_embeddings_ith(target, i);
            if (!h) return 1;
            memcpy(hidden + (size_t)i * (size_t)n_embd, h, sizeof(float) * (size_t)n_embd);
        }
        // From the back: each cut leaves the target's cache as it was before token i.
        float *logits = calloc((size_t)n * (size_t)n_vocab, sizeof(float));
        for (int i = n - 1; i >= 1; i--) {
            if (!llama_memory_seq_rm(llama_get_memory(target), 0, i, -1)) return 1;
            float *h = hidden + (size_t)(i - 1) * (size_t)n_embd;
            if (llama_decode(assistant, prompt_batch(&p, i, 1, h)) != 0) return 1;
            memcpy(logits + (size_t)i * (size_t)n_vocab, llama_get_logits_ith(assistant, 0),
                   sizeof(float) * (size_t)n_vocab);
        }
        for (int i = 1; i < n; i++) print_top(logits + (size_t)i * (size_t)n_vocab, n_vocab, top);
        free(logits);
        free(hidden);
        llama_free(assistant);
        llama_free(target);
    }
    llama_model_free(assistant_model);
    llama_model_free(target_model);
    return 0;
}
