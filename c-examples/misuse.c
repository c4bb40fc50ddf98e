/* misuse.c: wrong uses of the C API each get their documented status and a useful
 * kolibri_last_error() message, and the process lives on.
 *
 *   misuse MODEL.gguf [MODEL_WITHOUT_CHAT_TEMPLATE.gguf]
 *
 * Prints one "ok"/"FAIL" line per check; exits 0 only if every check passed. */
#include <kolibri.h>

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;

/* Checks that `got` is `want` and that the last error mentions `needle` (if given). */
static void expect(const char *what, kolibri_status got, kolibri_status want, const char *needle) {
    const char *msg = got == KOLIBRI_STATUS_OK ? "" : kolibri_last_error();
    int ok = got == want && (needle == NULL || strstr(msg, needle) != NULL);
    printf("%s - %s: %s (%s)\n", ok ? "ok" : "FAIL", what, kolibri_status_string(got), msg);
    if (!ok) {
        printf("    expected %s%s%s\n", kolibri_status_string(want), needle ? " mentioning " : "",
               needle ? needle : "");
        failures++;
    }
}

static void expect_true(const char *what, int cond) {
    printf("%s - %s\n", cond ? "ok" : "FAIL", what);
    if (!cond) failures++;
}

static int calls = 0;
static bool cancel_at_half(float progress, void *user_data) {
    (void)user_data;
    calls++;
    return progress < 0.5f;
}

static bool abort_now(void *user_data) {
    int *count = user_data;
    return ++*count >= 2; /* let one layer run, then stop */
}

static int write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = fwrite(data, 1, len, f);
    fclose(f);
    return n == len ? 0 : -1;
}

static void model_loading(const char *model_path) {
    kolibri_model *m = (kolibri_model *)0x1; /* must stay untouched on failure */
    expect("load a missing file", kolibri_model_load("/nonexistent/dir/model.gguf", NULL, &m),
           KOLIBRI_STATUS_IO, "/nonexistent/dir/model.gguf");
    expect_true("out_model untouched on failure", m == (kolibri_model *)0x1);
    expect("load with NULL path", kolibri_model_load(NULL, NULL, &m),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "path");
    expect("load with NULL out_model", kolibri_model_load(model_path, NULL, NULL),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "out_model");

    const char garbage[] = "this is not a GGUF file at all, just some bytes to read";
    const char *bad = "misuse-garbage.gguf";
    if (write_file(bad, garbage, sizeof garbage) == 0)
        expect("load a corrupt file", kolibri_model_load(bad, NULL, &m),
               KOLIBRI_STATUS_INVALID_MODEL, "magic");
    remove(bad);

    /* The real model cut to its first 64 KiB: the header parses partway, then ends. */
    FILE *f = fopen(model_path, "rb");
    char *head = malloc(65536);
    if (f && head && fread(head, 1, 65536, f) == 65536) {
        const char *cut = "misuse-truncated.gguf";
        write_file(cut, head, 65536);
        expect("load a truncated model", kolibri_model_load(cut, NULL, &m),
               KOLIBRI_STATUS_INVALID_MODEL, NULL);
        remove(cut);
    }
    if (f) fclose(f);
    free(head);

    kolibri_model_params mp;
    expect("params init with NULL", kolibri_model_params_init(NULL, sizeof mp),
           KOLIBRI_STATUS_INVALID_ARGUMENT, NULL);
    kolibri_model_params_init(&mp, sizeof mp);
    mp.struct_size = 4;
    expect("params with a wrong struct_size", kolibri_model_load(model_path, &mp, &m),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "struct_size");
    kolibri_model_params_init(&mp, sizeof mp);
    mp.progress_callback = cancel_at_half;
    expect("cancel loading from the progress callback", kolibri_model_load(model_path, &mp, &m),
           KOLIBRI_STATUS_CANCELLED, "cancel");
    expect_true("progress callback was called", calls > 0);
    mp.use_mmap = false;
    calls = 0;
    expect("cancel a non-mmap load", kolibri_model_load(model_path, &mp, &m),
           KOLIBRI_STATUS_CANCELLED, NULL);

    /* A caller built against the first version of the struct (it ended before
       repack_cache_dir): the library reads only those bytes and defaults the rest. */
    kolibri_model_params_init(&mp, offsetof(kolibri_model_params, repack_cache_dir));
    mp.repack_cache_dir = (const char *)0x1; /* past that struct's end: never read */
    expect("load with first-version params", kolibri_model_load(model_path, &mp, &m),
           KOLIBRI_STATUS_OK, NULL);
    kolibri_model_free(m);

    /* A repack cache: written by the first load, used by the second, one file per model. */
    const char *cache = "misuse-repack-cache";
    kolibri_model_params_init(&mp, sizeof mp);
    mp.repack_cache_dir = cache;
    for (int i = 0; i < 2; i++) {
        m = NULL;
        expect("load with a repack cache", kolibri_model_load(model_path, &mp, &m),
               KOLIBRI_STATUS_OK, NULL);
        kolibri_model_free(m);
    }
    int files = 0;
    DIR *d = opendir(cache);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        files++;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
        remove(path);
    }
    if (d) closedir(d);
    rmdir(cache);
#if defined(__x86_64__) || defined(_M_X64)
    expect_true("the repack cache directory holds one file", files == 1);
#else
    /* No weights are repacked on this architecture, so there is nothing to cache. */
    expect_true("no repack cache file where nothing is repacked", files == 0);
#endif
}

static void null_handles(void) {
    size_t n = 0;
    kolibri_model_dims dims;
    expect("dims of a NULL model", kolibri_model_get_dims(NULL, &dims, sizeof dims),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "model is NULL");
    expect("tokenize with a NULL model", kolibri_tokenize(NULL, "a", 1, true, false, NULL, 0, &n),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "model is NULL");
    int32_t t = 1;
    expect("eval on a NULL context", kolibri_context_eval(NULL, &t, 1),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "context is NULL");
    expect("sample with a NULL sampler", kolibri_sampler_sample(NULL, NULL, &t),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "sampler is NULL");
    kolibri_context *c = NULL;
    expect("context on a NULL model", kolibri_context_new(NULL, NULL, &c),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "model is NULL");
    kolibri_model_free(NULL);
    kolibri_context_free(NULL);
    kolibri_sampler_free(NULL);
    expect_true("freeing NULL handles is a no-op", 1);
    expect_true("unknown status has a name", strcmp(kolibri_status_string(9999), "unknown status") == 0);
}

static void with_model(kolibri_model *m) {
    kolibri_model_dims dims;
    expect("dims", kolibri_model_get_dims(m, &dims, sizeof dims), KOLIBRI_STATUS_OK, NULL);
    expect("dims with a short out_size", kolibri_model_get_dims(m, &dims, 3),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "out_size");

    /* Too-small buffers: BUFFER_TOO_SMALL, the size needed reported, the buffer untouched. */
    const char *text = "Hello world, this is a test.";
    int32_t few[2] = {-7, -7};
    size_t n = 0;
    expect("tokenize into a 2-token buffer",
           kolibri_tokenize(m, text, strlen(text), true, false, few, 2, &n),
           KOLIBRI_STATUS_BUFFER_TOO_SMALL, "too small");
    expect_true("needed token count reported", n > 2);
    expect_true("token buffer untouched", few[0] == -7 && few[1] == -7);
    expect("tokenize with NULL count", kolibri_tokenize(m, text, strlen(text), true, false, few, 2, NULL),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "count");
    expect("tokenize invalid UTF-8", kolibri_tokenize(m, "\xff\xfe", 2, true, false, NULL, 0, &n),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "UTF-8");
    char small[4] = "xyz";
    size_t len = 0;
    expect("architecture into 4 bytes", kolibri_model_architecture(m, small, 2, &len),
           KOLIBRI_STATUS_BUFFER_TOO_SMALL, NULL);
    expect_true("architecture length reported, buffer untouched", len > 0 && strcmp(small, "xyz") == 0);
    expect("system info size query", kolibri_system_info(NULL, 0, &len),
           KOLIBRI_STATUS_BUFFER_TOO_SMALL, NULL);
    expect("metadata key that does not exist", kolibri_model_meta_string(m, "no.such.key", NULL, 0, &len),
           KOLIBRI_STATUS_NOT_FOUND, "no.such.key");
    expect("metadata key out of range", kolibri_model_meta_key(m, 1u << 30, NULL, 0, &len),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "out of range");

    /* Invalid token ids. */
    expect("piece of token -1", kolibri_token_to_piece(m, -1, false, small, sizeof small, &len),
           KOLIBRI_STATUS_INVALID_TOKEN, "out of range");
    expect("piece of token n_vocab",
           kolibri_token_to_piece(m, dims.n_vocab, false, small, sizeof small, &len),
           KOLIBRI_STATUS_INVALID_TOKEN, NULL);
    int32_t bad_ids[2] = {1, dims.n_vocab + 5};
    expect("detokenize an out-of-range id", kolibri_detokenize(m, bad_ids, 2, false, NULL, 0, &len),
           KOLIBRI_STATUS_INVALID_TOKEN, NULL);

    /* A template that does not parse. */
    kolibri_chat_message msg = {"user", "hi"};
    expect("chat template with a syntax error",
           kolibri_chat_apply_template(m, "{% for x in messages %}", &msg, 1, true, NULL, 0, &len),
           KOLIBRI_STATUS_TEMPLATE_ERROR, "parse");
    /* Templates written to hang, recurse or explode: TEMPLATE_ERROR within a second. */
    const char *hostile[] = {
        "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ 'x' * 4000000000 }}",
        "{{ no_such_function() }}",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        struct timespec t0, t1;
        timespec_get(&t0, TIME_UTC);
        expect("a hostile chat template",
               kolibri_chat_apply_template(m, hostile[i], &msg, 1, true, NULL, 0, &len),
               KOLIBRI_STATUS_TEMPLATE_ERROR, NULL);
        timespec_get(&t1, TIME_UTC);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        /* Under valgrind (KOLIBRI_SLOW set) everything runs ~50x slower: no time bound. */
        if (getenv("KOLIBRI_SLOW") == NULL) expect_true("... refused within 1 s", secs < 1.0);
    }
    kolibri_chat_message null_msg = {"user", NULL};
    expect("chat message with NULL content",
           kolibri_chat_apply_template(m, NULL, &null_msg, 1, true, NULL, 0, &len),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "messages[0].content");

    /* Contexts. */
    kolibri_context_params cp;
    kolibri_context_params_init(&cp, sizeof cp);
    cp.n_ctx = dims.n_ctx_train + 1;
    kolibri_context *c = NULL;
    expect("n_ctx above the trained context", kolibri_context_new(m, &cp, &c),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "n_ctx");
    cp.n_ctx = 8;
    expect("context with n_ctx 8", kolibri_context_new(m, &cp, &c), KOLIBRI_STATUS_OK, NULL);
    if (!c) return;
    const float *logits = NULL;
    size_t n_vocab = 0;
    expect("logits before any eval", kolibri_context_logits(c, &logits, &n_vocab),
           KOLIBRI_STATUS_INVALID_STATE, "no logits");
    int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t invalid[2] = {1, -3};
    expect("eval an invalid token", kolibri_context_eval(c, invalid, 2), KOLIBRI_STATUS_INVALID_TOKEN, "-3");
    expect("eval 0 tokens", kolibri_context_eval(c, ids, 0), KOLIBRI_STATUS_INVALID_ARGUMENT, NULL);
    expect("eval 9 tokens into 8 positions", kolibri_context_eval(c, ids, 9),
           KOLIBRI_STATUS_CONTEXT_FULL, "context full");
    size_t held = 99, cap = 0;
    kolibri_context_size(c, &held, &cap);
    expect_true("nothing held after the failed evals", held == 0 && cap == 8);
    expect("eval 8 tokens", kolibri_context_eval(c, ids, 8), KOLIBRI_STATUS_OK, NULL);
    expect("eval past the end", kolibri_context_eval(c, ids, 1), KOLIBRI_STATUS_CONTEXT_FULL, NULL);
    expect("rewind beyond what is held", kolibri_context_rewind(c, 9),
           KOLIBRI_STATUS_INVALID_ARGUMENT, NULL);
    expect("rewind to 4", kolibri_context_rewind(c, 4), KOLIBRI_STATUS_OK, NULL);
    expect("logits after a rewind", kolibri_context_logits(c, &logits, &n_vocab),
           KOLIBRI_STATUS_INVALID_STATE, NULL);

    int aborts = 0;
    kolibri_context_set_abort_callback(c, abort_now, &aborts);
    expect("abort callback stops eval", kolibri_context_eval(c, ids, 2), KOLIBRI_STATUS_CANCELLED, "cancel");
    kolibri_context_size(c, &held, NULL);
    expect_true("an aborted eval leaves the context as it was", held == 4);
    kolibri_context_set_abort_callback(c, NULL, NULL);
    expect("eval after removing the callback", kolibri_context_eval(c, ids, 2), KOLIBRI_STATUS_OK, NULL);
    expect("logits after eval", kolibri_context_logits(c, &logits, &n_vocab), KOLIBRI_STATUS_OK, NULL);
    expect_true("logits cover the vocabulary", logits != NULL && (int32_t)n_vocab == dims.n_vocab);

    /* Samplers. */
    kolibri_sampler_params sp;
    kolibri_sampler_params_init(&sp, sizeof sp);
    sp.top_p = 2.0f;
    kolibri_sampler *s = NULL;
    expect("sampler with top_p 2", kolibri_sampler_new(&sp, &s), KOLIBRI_STATUS_INVALID_ARGUMENT, "top_p");
    kolibri_sampler_params_init(&sp, sizeof sp);
    sp.top_k = -1;
    expect("sampler with negative top_k", kolibri_sampler_new(&sp, &s), KOLIBRI_STATUS_INVALID_ARGUMENT, "top_k");
    expect("sampler with defaults", kolibri_sampler_new(NULL, &s), KOLIBRI_STATUS_OK, NULL);
    kolibri_context_rewind(c, 0);
    int32_t tok = -1;
    expect("sample without logits", kolibri_sampler_sample(s, c, &tok), KOLIBRI_STATUS_INVALID_STATE, NULL);
    expect("accept a negative token", kolibri_sampler_accept(s, -1), KOLIBRI_STATUS_INVALID_TOKEN, NULL);
    expect("suppress without a model", kolibri_sampler_suppress_model_tokens(s, NULL),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "model");
    expect("suppress without a sampler", kolibri_sampler_suppress_model_tokens(NULL, m),
           KOLIBRI_STATUS_INVALID_ARGUMENT, "sampler");
    expect("suppress a model's tokens", kolibri_sampler_suppress_model_tokens(s, m), KOLIBRI_STATUS_OK, NULL);
    kolibri_sampler_free(s);
    kolibri_context_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [MODEL_WITHOUT_CHAT_TEMPLATE.gguf]\n", argv[0]);
        return 2;
    }
    null_handles();
    model_loading(argv[1]);

    kolibri_model *m = NULL;
    expect("load the model", kolibri_model_load(argv[1], NULL, &m), KOLIBRI_STATUS_OK, NULL);
    if (m) with_model(m);
    kolibri_model_free(m);

    if (argc > 2) {
        kolibri_model *plain = NULL;
        expect("load a model without a chat template", kolibri_model_load(argv[2], NULL, &plain),
               KOLIBRI_STATUS_OK, NULL);
        kolibri_chat_message msg = {"user", "hi"};
        size_t len = 0;
        expect("its template", kolibri_model_chat_template(plain, NULL, 0, &len),
               KOLIBRI_STATUS_NOT_FOUND, "no chat template");
        expect("apply its template", kolibri_chat_apply_template(plain, NULL, &msg, 1, true, NULL, 0, &len),
               KOLIBRI_STATUS_NOT_FOUND, "no chat template");
        kolibri_model_free(plain);
    }
    printf("%d failure(s)\n", failures);
    return failures == 0 ? 0 : 1;
}
