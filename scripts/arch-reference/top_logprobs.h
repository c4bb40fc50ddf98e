// What the reference tools share: llama.cpp's log quieted to errors, a prompt's case header
// and its one-sequence batch, and a row of logits printed as its TOP best log-probabilities
// ("step ID LOGPROB ...", best first).
#pragma once

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void print_top(const float *logits, int n_vocab, int top) {
    double max = logits[0];
    for (int i = 1; i < n_vocab; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    double log_z = max + log(sum);
    int ids[64];
    for (int k = 0; k < top; k++) ids[k] = -1;
    for (int i = 0; i < n_vocab; i++) {
        for (int k = 0; k < top; k++) {
            if (ids[k] < 0 || logits[i] > logits[ids[k]]) {
                memmove(&ids[k + 1], &ids[k], sizeof(int) * (size_t)(top - k - 1));
                ids[k] = i;
                break;
            }
        }
    }
    printf("step");
    for (int k = 0; k < top; k++) printf(" %d %.6f", ids[k], (double)logits[ids[k]] - log_z);
    printf("\n");
}

#ifndef MAX_TOKENS
#define MAX_TOKENS 512
#endif

/* A prompt of sequence 0: its tokens at positions 0.., every one with an output. */
struct prompt {
    int n;
    llama_token tokens[MAX_TOKENS];
    llama_pos pos[MAX_TOKENS];
    int32_t n_seq[MAX_TOKENS];
    llama_seq_id *seqs[MAX_TOKENS];
    int8_t out[MAX_TOKENS];
};

static llama_seq_id SEQ0 = 0;

/* Tokenizes `text` into `p` and prints "case" and "prompt ID...". Returns the token count
 * (0 on failure). */
static int begin_case(const struct llama_vocab *vocab, const char *text, struct prompt *p) {
    p->n = llama_tokenize(vocab, text, (int)strlen(text), p->tokens, MAX_TOKENS, true, true);
    if (p->n <= 0) return 0;
    printf("case\nprompt");
    for (int i = 0; i < p->n; i++) {
        printf(" %d", p->tokens[i]);
        p->pos[i] = i;
        p->n_seq[i] = 1;
        p->seqs[i] = &SEQ0;
        p->out[i] = 1;
    }
    printf("\n");
    return p->n;
}

/* The batch of `p`'s tokens from `first`, `n` of them, with `embd` rows (NULL: none). */
static struct llama_batch prompt_batch(struct prompt *p, int first, int n, float *embd) {
    struct llama_batch b = {n, p->tokens + first, embd, p->pos + first, p->n_seq + first,
                            p->seqs + first, p->out + first};
    return b;
}
