// Greedy generation through llama.cpp's C API, printing each step's top log-probabilities:
// the reference the architecture tests compare Kolibri against. Built and run by
// scripts/record-arch-reference.py against a llama.cpp build outside the repository.
//
// usage: greedy_logprobs MODEL FLASH_ATTN(0|1) N_PREDICT [FORCED_FILE] PROMPT...
// output, per prompt:  "case", "prompt ID...", then one "step ID LOGPROB ..." line (top 5,
// best first) per generated token; generation stops early at an end-of-generation token.
// With FORCED_FILE (named "force:PATH"), line i of it holds the tokens fed after prompt i
// instead of the greedy ones (teacher forcing: another run's generated tokens, so that two
// runs are compared on the same steps); a step is printed for each of them, with the top 64.
// Greedy runs end each case with "pieces HEX...": each generated token's bytes as
// llama_token_to_piece writes them for streamed output (no leading space stripped, control
// tokens hidden), in hex, "-" for none: the text a continuation must print.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define TOP 5
// Forced runs print more, so that they hold the log-probabilities of the other run's top 5.
#define TOP_FORCED 64
#define MAX_FORCED 1024

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// The `top` best tokens of log_softmax(logits), best first.
static void top_logprobs(const float *logits, int n_vocab, int top, int *ids, double *lps) {
    double max = logits[0];
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    double log_z = max + log(sum);
    for (int k = 0; k < top; k++) ids[k] = -1;
    for (int i = 0; i < n_vocab; i++) {
        for (int k = 0; k < top; k++) {
            if (ids[k] < 0 || logits[i] > logits[ids[k]]) {
                memmove(ids + k + 1, ids + k, sizeof(int) * (top - 1 - k));
                ids[k] = i;
                break;
            }
        }
    }
    for (int k = 0; k < top; k++) lps[k] = (double)logits[ids[k]] - log_z;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL FLASH_ATTN N_PREDICT [force:FILE] PROMPT...\n", argv[0]);
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
    int first_prompt = 4;
    FILE *forced_file = NULL;
    if (argc > 4 && strncmp(argv[4], "force:", 6) == 0) {
        forced_file = fopen(argv[4] + 6, "r");
        if (!forced_file) return 1;
        first_prompt = 5;
    }

    for (int c = first_prompt; c < argc; c++) {
        static llama_token forced[MAX_FORCED];
        int n_forced = 0;
        if (forced_file) {
            static char line[MAX_FORCED * 12];
            if (!fgets(line, sizeof line, forced_file)) return 1;
            for (char *p = strtok(line, " \n"); p && n_forced < MAX_FORCED; p = strtok(NULL, " \n"))
                forced[n_forced++] = atoi(p);
        }
        const int n_steps = forced_file ? n_forced : n_predict;
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
        static llama_token generated[MAX_FORCED];
        int n_generated = 0;
        for (int step = 0; step < n_steps; step++) {
            if (llama_decode(ctx, batch) != 0) return 1;
            const int top = forced_file ? TOP_FORCED : TOP;
            int ids[TOP_FORCED];
            double lps[TOP_FORCED];
            top_logprobs(llama_get_logits_ith(ctx, -1), n_vocab, top, ids, lps);
            printf("step");
            for (int k = 0; k < top; k++) printf(" %d %.6f", ids[k], lps[k]);
            printf("\n");
            static llama_token next;
            next = forced_file ? forced[step] : ids[0];
            if (n_generated < MAX_FORCED) generated[n_generated++] = next;
            if (step + 1 == n_steps || llama_vocab_is_eog(vocab, next)) break;
            batch = llama_batch_get_one(&next, 1);
        }
        if (!forced_file) {
            printf("pieces");
            for (int i = 0; i < n_generated; i++) {
                char piece[256];
                int len = llama_token_to_piece(vocab, generated[i], piece, sizeof piece, 0, false);
                if (len < 0) return 1;
                printf(len ? " " : " -");
                for (int b = 0; b < len; b++) printf("%02x", (unsigned char)piece[b]);
            }
            printf("\n");
        }
        llama_free(ctx);
    }
    if (forced_file) fclose(forced_file);
    llama_model_free(model);
    return 0;
}
