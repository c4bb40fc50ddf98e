// Greedy generation through llama.cpp's C API, printing each step's top log-probabilities:
// the reference the architecture tests compare Kolibri against. Built and run by
// scripts/record-arch-reference.py against a llama.cpp build outside the repository.
//
// usage: greedy_logprobs MODEL FLASH_ATTN(0|1) N_PREDICT PROMPT...
// output, per prompt:  "case", "prompt ID...", then one "step ID LOGPROB ..." line (top 5,
// best first) per generated token; generation stops early at an end-of-generation token.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define TOP 5

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// The TOP best tokens of log_softmax(logits), best first.
static void top_logprobs(const float *logits, int n_vocab, int *ids, double *lps) {
    double max = logits[0];
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    double log_z = max + log(sum);
    for (int k = 0; k < TOP; k++) ids[k] = -1;
    for (int i = 0; i < n_vocab; i++) {
        for (int k = 0; k < TOP; k++) {
            if (ids[k] < 0 || logits[i] > logits[ids[k]]) {
                memmove(ids + k + 1, ids + k, sizeof(int) * (TOP - 1 - k));
                ids[k] = i;
                break;
            }
        }
    }
    for (int k = 0; k < TOP; k++) lps[k] = (double)logits[ids[k]] - log_z;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL FLASH_ATTN N_PREDICT PROMPT...\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_predict = atoi(argv[3]);

    for (int c = 4; c < argc; c++) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_batch = 512;
        cp.n_threads = cp.n_threads_batch = 2;
        cp.flash_attn_type = atoi(argv[2]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                           : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) return 1;
        llama_token tokens[512];
        int n = llama_tokenize(vocab, argv[c], (int)strlen(argv[c]), tokens, 512, true, true);
        if (n <= 0) return 1;
        printf("case\nprompt");
        for (int i = 0; i < n; i++) printf(" %d", tokens[i]);
        printf("\n");
        struct llama_batch batch = llama_batch_get_one(tokens, n);
        for (int step = 0; step < n_predict; step++) {
            if (llama_decode(ctx, batch) != 0) return 1;
            int ids[TOP];
            double lps[TOP];
            top_logprobs(llama_get_logits_ith(ctx, -1), n_vocab, ids, lps);
            printf("step");
            for (int k = 0; k < TOP; k++) printf(" %d %.6f", ids[k], lps[k]);
            printf("\n");
            static llama_token next;
            next = ids[0];
            if (llama_vocab_is_eog(vocab, next)) break;
            batch = llama_batch_get_one(&next, 1);
        }
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}
