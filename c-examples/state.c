/* state.c: a prompt evaluated once, its context saved (to memory and to a file) and loaded
 * into fresh contexts, which continue with bit-identical logits; bad states are refused with
 * KOLIBRI_STATUS_BAD_STATE and leave the context as it was.
 *
 *   state MODEL.gguf STATE_FILE
 *
 * Prints one "ok"/"FAIL" line per check; exits 0 only if every check passed. */
#include <kolibri.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(const char *what, int cond) {
    printf("%s - %s\n", cond ? "ok" : "FAIL", what);
    if (!cond) failures++;
}

static void expect(const char *what, kolibri_status got, kolibri_status want) {
    printf("%s - %s: %s (%s)\n", got == want ? "ok" : "FAIL", what, kolibri_status_string(got),
           got == KOLIBRI_STATUS_OK ? "" : kolibri_last_error());
    if (got != want) failures++;
}

/* Evaluates one token and copies the logits it gives into `out` (n_vocab floats). */
static int next_logits(kolibri_context *c, int32_t token, float *out, size_t n_vocab) {
    const float *logits;
    size_t n;
    if (kolibri_context_eval(c, &token, 1) != KOLIBRI_STATUS_OK ||
        kolibri_context_logits(c, &logits, &n) != KOLIBRI_STATUS_OK || n != n_vocab)
        return -1;
    memcpy(out, logits, n * sizeof *out);
    return 0;
}

static kolibri_context *new_context(const kolibri_model *m) {
    kolibri_context_params p;
    kolibri_context_params_init(&p, sizeof p);
    p.n_ctx = 256;
    p.type_k = KOLIBRI_KV_TYPE_Q8_0;
    kolibri_context *c = NULL;
    return kolibri_context_new(m, &p, &c) == KOLIBRI_STATUS_OK ? c : NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf STATE_FILE\n", argv[0]);
        return 2;
    }
    kolibri_model *m = NULL;
    if (kolibri_model_load(argv[1], NULL, &m) != KOLIBRI_STATUS_OK) {
        fprintf(stderr, "load: %s\n", kolibri_last_error());
        return 1;
    }
    kolibri_model_dims dims;
    kolibri_model_get_dims(m, &dims, sizeof dims);
    size_t n_vocab = (size_t)dims.n_vocab;
    int32_t prompt[64];
    size_t n_prompt = 0;
    const char *text = "int main(void) { printf(\"hello\"); return 0; }";
    kolibri_tokenize(m, text, strlen(text), true, false, prompt, 64, &n_prompt);

    kolibri_context *a = new_context(m);
    expect("evaluate the prompt", kolibri_context_eval(a, prompt, n_prompt), KOLIBRI_STATUS_OK);

    size_t size = 0;
    expect("state size", kolibri_context_state_size(a, &size), KOLIBRI_STATUS_OK);
    size_t needed = 0;
    expect("save into no buffer reports the size",
           kolibri_context_state_save(a, NULL, 0, &needed), KOLIBRI_STATUS_BUFFER_TOO_SMALL);
    check("the size reported is the state's size", needed == size);
    unsigned char *buf = malloc(size);
    size_t written = 0;
    expect("save into a buffer", kolibri_context_state_save(a, buf, size, &written),
           KOLIBRI_STATUS_OK);
    check("all of it written", written == size);
    expect("save to a file", kolibri_context_state_save_file(a, argv[2]), KOLIBRI_STATUS_OK);

    float *want = malloc(n_vocab * sizeof *want), *got = malloc(n_vocab * sizeof *got);
    const float *saved_logits, *loaded_logits;
    size_t n;
    kolibri_context_logits(a, &saved_logits, &n);
    memcpy(got, saved_logits, n_vocab * sizeof *got);
    next_logits(a, 1000, want, n_vocab);

    kolibri_context *b = new_context(m);
    expect("load from the buffer", kolibri_context_state_load(b, buf, size), KOLIBRI_STATUS_OK);
    expect("logits after load", kolibri_context_logits(b, &loaded_logits, &n), KOLIBRI_STATUS_OK);
    check("the saved logits come back", memcmp(loaded_logits, got, n_vocab * sizeof *got) == 0);
    int32_t held[64];
    size_t n_held = 0;
    expect("tokens held", kolibri_context_tokens(b, held, 64, &n_held), KOLIBRI_STATUS_OK);
    check("they are the prompt's",
          n_held == n_prompt && memcmp(held, prompt, n_prompt * sizeof *held) == 0);
    check("the next logits are bit-identical (buffer)",
          next_logits(b, 1000, got, n_vocab) == 0 && memcmp(got, want, n_vocab * 4) == 0);

    kolibri_context *f = new_context(m);
    expect("load from the file", kolibri_context_state_load_file(f, argv[2]), KOLIBRI_STATUS_OK);
    check("the next logits are bit-identical (file)",
          next_logits(f, 1000, got, n_vocab) == 0 && memcmp(got, want, n_vocab * 4) == 0);

    /* Bad states: the context keeps its two tokens and its logits. */
    kolibri_context *c = new_context(m);
    int32_t two[2] = {prompt[0], prompt[1]};
    kolibri_context_eval(c, two, 2);
    expect("a truncated state", kolibri_context_state_load(c, buf, size - 9),
           KOLIBRI_STATUS_BAD_STATE);
    buf[size / 2] ^= 1;
    expect("a corrupted state", kolibri_context_state_load(c, buf, size), KOLIBRI_STATUS_BAD_STATE);
    check("the message says so", strstr(kolibri_last_error(), "corrupted") != NULL);
    expect("a missing file", kolibri_context_state_load_file(c, "/nonexistent/state"),
           KOLIBRI_STATUS_IO);
    expect("NULL buffer with a size", kolibri_context_state_load(c, NULL, 5),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    expect("NULL path", kolibri_context_state_save_file(c, NULL), KOLIBRI_STATUS_INVALID_ARGUMENT);
    expect("NULL context", kolibri_context_state_size(NULL, &size), KOLIBRI_STATUS_INVALID_ARGUMENT);
    size_t n_tokens = 0;
    kolibri_context_size(c, &n_tokens, NULL);
    check("the refused loads left the context's tokens", n_tokens == 2);
    expect("its logits are still there", kolibri_context_logits(c, &loaded_logits, &n),
           KOLIBRI_STATUS_OK);

    kolibri_context_free(a);
    kolibri_context_free(b);
    kolibri_context_free(f);
    kolibri_context_free(c);
    kolibri_model_free(m);
    free(buf);
    free(want);
    free(got);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
