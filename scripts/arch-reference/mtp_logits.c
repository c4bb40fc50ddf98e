// The multi-token-prediction block's log-probabilities through llama.cpp's C API, teacher-forced
// on each prompt: the reference tests/mtp_reference.rs compares Kolibri's MTP block against.
// Built and run by scripts/record-mtp-reference.py against a llama.cpp build outside the
// repository.
//
// usage: mtp_logits MODEL FLASH_ATTN(0|1) TOP PROMPT...
// For each prompt the target runs over its tokens, keeping each token's hidden state (the
// output norm's result, what the LM head reads); then the MTP context runs over the same
// tokens, token p paired with the target's hidden state of token p-1 (zeros for the first),
// as llama.cpp's MTP drafter catches up on a prompt. Output per prompt: "case", "prompt ID...",
// then per token "step ID LOGPROB ..." (the TOP best of the MTP block's prediction of the token
// after it, best first).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define MAX_TOKENS 512
#include "top_logprobs.h"


static struct llama_context *context(struct llama_model *model, int flash, int mtp) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = MAX_TOKENS;
    cp.n_batch = cp.n_ubatch = MAX_TOKENS;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.embeddings = !mtp;  // the target's hidden states
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (mtp) cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    return llama_init_from_model(model, cp);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL FLASH_ATTN TOP PROMPT...\n", argv[0]);
        return 2;
    }
    int flash = atoi(argv[2]), top = atoi(argv[3]);
    if (top < 1 || top > 64) return 2;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mtp = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_embd = llama_model_n_embd(model);
    for (int c = 4; c < argc; c++) {
        struct llama_context *target = context(model, flash, 0);
        struct llama_context *mtp = context(model, flash, 1);
        if (!target || !mtp) return 1;
        static struct prompt p;
        int n = begin_case(vocab, argv[c], &p);
        if (n <= 0) return 1;
        if (llama_decode(target, prompt_batch(&p, 0, n, NULL)) != 0) return 1;
        // Token p reads the hidden state of token p - 1.
        float *hidden = calloc((size_t)n * (size_t)n_embd, sizeof(float));
        for (int i = 1; i < n; i++) {
            const float *h = llama_get_embeddings_ith(target, i - 1);
            if (!h) return 1;
            memcpy(hidden + (size_t)i * (size_t)n_embd, h, sizeof(float) * (size_t)n_embd);
        }
        if (llama_decode(mtp, prompt_batch(&p, 0, n, hidden)) != 0) return 1;
        for (int i = 0; i < n; i++) print_top(llama_get_logits_ith(mtp, i), n_vocab, top);
        free(hidden);
        llama_free(mtp);
        llama_free(target);
    }
    llama_model_free(model);
    return 0;
}
