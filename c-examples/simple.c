/* simple.c: load a model, tokenize a prompt, generate greedily, print, free.
 *
 *   simple MODEL.gguf ["prompt"] [n_predict] [n_threads]
 *
 * Every call's status is checked; on failure the program prints kolibri_last_error() and
 * releases what it created (the cleanup path frees handles in any order, NULL-safe). */
#include <kolibri.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        kolibri_status st_ = (call);                                                       \
        if (st_ != KOLIBRI_STATUS_OK) {                                                    \
            fprintf(stderr, "%s failed: %s: %s\n", #call, kolibri_status_string(st_),      \
                    kolibri_last_error());                                                 \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

static bool on_progress(float progress, void *user_data) {
    int *last_tenth = user_data;
    int tenth = (int)(progress * 10.0f);
    for (; *last_tenth < tenth; ++*last_tenth) fputc('.', stderr);
    return true; /* keep loading */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [prompt] [n_predict] [n_threads]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "The capital of France is";
    int n_predict = argc > 3 ? atoi(argv[3]) : 32;
    int n_threads = argc > 4 ? atoi(argv[4]) : 0; /* 0: one per core */

    int exit_code = 1;
    kolibri_model *model = NULL;
    kolibri_context *ctx = NULL;
    kolibri_sampler *sampler = NULL;
    int32_t *tokens = NULL;

    int progress_state = 0;
    kolibri_model_params mp;
    CHECK(kolibri_model_params_init(&mp, sizeof mp));
    mp.progress_callback = on_progress;
    mp.progress_user_data = &progress_state;
    mp.n_threads = (uint32_t)(n_threads > 0 ? n_threads : 0);
    CHECK(kolibri_model_load(argv[1], &mp, &model));
    fputc('\n', stderr);

    char arch[64];
    size_t arch_len = 0;
    CHECK(kolibri_model_architecture(model, arch, sizeof arch, &arch_len));
    kolibri_model_dims dims;
    CHECK(kolibri_model_get_dims(model, &dims, sizeof dims));
    fprintf(stderr, "kolibri %s: %s, %.0fM parameters, vocabulary %d\n", kolibri_version(), arch,
            (double)dims.n_params / 1e6, dims.n_vocab);

    /* Size query first, then the real call. Special-token texts in the prompt become their
     * ids, as in llama.cpp's simple example. */
    size_t n_tokens = 0;
    kolibri_status st = kolibri_tokenize(model, prompt, strlen(prompt), true, true, NULL, 0,
                                         &n_tokens);
    if (st != KOLIBRI_STATUS_BUFFER_TOO_SMALL && st != KOLIBRI_STATUS_OK) CHECK(st);
    tokens = malloc(n_tokens * sizeof *tokens);
    if (!tokens) goto done;
    CHECK(kolibri_tokenize(model, prompt, strlen(prompt), true, true, tokens, n_tokens,
                           &n_tokens));

    kolibri_context_params cp;
    CHECK(kolibri_context_params_init(&cp, sizeof cp));
    cp.n_ctx = 512;
    CHECK(kolibri_context_new(model, &cp, &ctx));

    kolibri_sampler_params sp;
    CHECK(kolibri_sampler_params_init(&sp, sizeof sp));
    sp.temperature = 0.0f; /* greedy */
    CHECK(kolibri_sampler_new(&sp, &sampler));
    /* Never generate the tokens the model's file suppresses (Gemma 4 lists some). */
    CHECK(kolibri_sampler_suppress_model_tokens(sampler, model));

    printf("%s", prompt);
    CHECK(kolibri_context_eval(ctx, tokens, n_tokens));
    for (int i = 0; i < n_predict; i++) {
        int32_t next;
        CHECK(kolibri_sampler_sample(sampler, ctx, &next));
        bool eog = false;
        CHECK(kolibri_model_token_is_eog(model, next, &eog));
        if (eog) break;
        char piece[256];
        size_t len = 0;
        CHECK(kolibri_token_to_piece(model, next, false, piece, sizeof piece, &len));
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        CHECK(kolibri_context_eval(ctx, &next, 1));
    }
    printf("\n");
    exit_code = 0;

done:
    kolibri_sampler_free(sampler);
    kolibri_context_free(ctx);
    kolibri_model_free(model);
    free(tokens);
    return exit_code;
}
