// What the reference tools share: llama.cpp's log quieted to errors, and a row of logits
// printed as its TOP best log-probabilities ("step ID LOGPROB ...", best first).
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
