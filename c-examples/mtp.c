/* mtp.c: drafting with a model's own multi-token-prediction block through the C API
 * (kolibri_model_params.n_mtp_blocks, kolibri_speculator_new_mtp), or with a Gemma 4 model's
 * assistant (kolibri_assistant_load, kolibri_speculator_new_assistant), gives plain greedy
 * decoding's tokens, alone and with prompt lookup first; on a block that agrees with its model
 * most drafts are accepted; misuse gets its documented status.
 *
 *   mtp MTP_MODEL.gguf NO_BLOCK.gguf [AGREEING.gguf]
 *   mtp --assistant GEMMA4.gguf ASSISTANT.gguf OTHER.gguf
 *
 * MTP_MODEL and AGREEING carry a block (Qwen3.5 `nextn_predict_layers`); NO_BLOCK does not.
 * ASSISTANT is GEMMA4's assistant; OTHER is a model it does not belong to.
 *
 * Prints one "ok"/"FAIL" line per check; exits 0 only if every check passed. */
#include <kolibri.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_NEW 40
#define MAX_DRAFT 6

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

/* The model at path, with n_mtp_blocks blocks; NULL (and the status in *status) on failure. */
static kolibri_model *load(const char *path, size_t n_mtp_blocks, kolibri_status *status) {
    kolibri_model_params p;
    kolibri_model_params_init(&p, sizeof p);
    p.n_mtp_blocks = n_mtp_blocks;
    kolibri_model *m = NULL;
    *status = kolibri_model_load(path, &p, &m);
    return m;
}

static kolibri_context *new_context(const kolibri_model *m) {
    kolibri_context_params p;
    kolibri_context_params_init(&p, sizeof p);
    p.n_ctx = 256;
    kolibri_context *c = NULL;
    return kolibri_context_new(m, &p, &c) == KOLIBRI_STATUS_OK ? c : NULL;
}

static kolibri_sampler *greedy_sampler(void) {
    kolibri_sampler_params p;
    kolibri_sampler_params_init(&p, sizeof p);
    p.temperature = 0.0f;
    kolibri_sampler *s = NULL;
    return kolibri_sampler_new(&p, &s) == KOLIBRI_STATUS_OK ? s : NULL;
}

static const char *PROMPT = "Once upon a time, in a small village, there lived an old";

/* Set in --assistant mode: the speculators draft with it instead of the block. */
static kolibri_assistant *g_assistant = NULL;

static kolibri_status new_speculator(kolibri_context *c, const kolibri_speculator_params *p,
                                     bool lookup, kolibri_speculator **spec) {
    return g_assistant ? kolibri_speculator_new_assistant(c, g_assistant, p, lookup, spec)
                       : kolibri_speculator_new_mtp(c, p, lookup, spec);
}

/* Greedy tokens after the prompt: plainly (speculate 0), or with the block (1), or with prompt
 * lookup first (2). The prompt is evaluated in two decodes, the speculator prepared after each.
 * Returns how many were written to out. */
static size_t generate(const kolibri_model *m, int speculate, int32_t *out,
                       kolibri_speculator_stats *stats) {
    int32_t prompt[128];
    size_t n_prompt = 0, n = 0;
    kolibri_tokenize(m, PROMPT, strlen(PROMPT), true, false, prompt, 128, &n_prompt);
    kolibri_context *c = new_context(m);
    kolibri_sampler *s = greedy_sampler();
    kolibri_speculator *spec = NULL;
    if (speculate) {
        kolibri_speculator_params p;
        kolibri_speculator_params_init(&p, sizeof p);
        p.max_draft = MAX_DRAFT;
        expect("create the speculator", new_speculator(c, &p, speculate == 2, &spec),
               KOLIBRI_STATUS_OK);
    }
    int32_t tok;
    size_t half = n_prompt / 2;
    for (int part = 0; part < 2; part++) {
        const int32_t *from = part ? prompt + half : prompt;
        size_t len = part ? n_prompt - half : half;
        if (kolibri_context_eval(c, from, len) != KOLIBRI_STATUS_OK) goto done;
        if (spec)
            expect("prepare after a part of the prompt", kolibri_speculator_prepare(spec, c, NULL),
                   KOLIBRI_STATUS_OK);
    }
    if (kolibri_sampler_sample(s, c, &tok) != KOLIBRI_STATUS_OK) goto done;
    out[n++] = tok;
    while (n < N_NEW) {
        if (spec) {
            int32_t step[MAX_DRAFT + 1];
            size_t got = 0;
            if (kolibri_speculator_step(spec, c, NULL, s, out[n - 1], step, MAX_DRAFT + 1, &got) !=
                KOLIBRI_STATUS_OK)
                break;
            for (size_t i = 0; i < got && n < N_NEW; i++) out[n++] = step[i];
        } else {
            if (kolibri_context_eval(c, &out[n - 1], 1) != KOLIBRI_STATUS_OK ||
                kolibri_sampler_sample(s, c, &tok) != KOLIBRI_STATUS_OK)
                break;
            out[n++] = tok;
        }
    }
    if (spec) {
        size_t got = 0;
        int32_t step[MAX_DRAFT + 1];
        expect("a step given a draft context",
               kolibri_speculator_step(spec, c, c, s, out[n - 1], step, MAX_DRAFT + 1, &got),
               KOLIBRI_STATUS_INVALID_ARGUMENT);
        expect("stats", kolibri_speculator_get_stats(spec, stats), KOLIBRI_STATUS_OK);
    }
done:
    kolibri_speculator_free(spec);
    kolibri_sampler_free(s);
    kolibri_context_free(c);
    return n;
}

/* Plain greedy and both speculators on model m (from path): the same tokens; returns the
 * drafter's stats (alone). */
static kolibri_speculator_stats same_tokens_of(const kolibri_model *m, const char *path) {
    kolibri_speculator_stats st, with_lookup;
    memset(&st, 0, sizeof st);
    int32_t plain[N_NEW], fast[N_NEW];
    size_t n_plain = generate(m, 0, plain, &st);
    check("plain greedy generates", n_plain == N_NEW);
    size_t n = generate(m, 1, fast, &st);
    check("the block: the same tokens", n == n_plain && !memcmp(fast, plain, sizeof plain));
    check("the block drafted", st.drafted > 0);
    n = generate(m, 2, fast, &with_lookup);
    check("lookup, then the block: the same tokens",
          n == n_plain && !memcmp(fast, plain, sizeof plain));
    printf("       (%s: drafted %llu, accepted %llu, %llu target passes for %llu tokens)\n", path,
           (unsigned long long)st.drafted, (unsigned long long)st.accepted,
           (unsigned long long)st.target_passes, (unsigned long long)st.generated);
    return st;
}

/* same_tokens_of the model at path, loaded with its block. */
static kolibri_speculator_stats same_tokens(const char *path) {
    kolibri_speculator_stats st;
    memset(&st, 0, sizeof st);
    kolibri_status status;
    kolibri_model *m = load(path, 1, &status);
    expect("load with the block", status, KOLIBRI_STATUS_OK);
    if (!m) return st;
    st = same_tokens_of(m, path);
    kolibri_model_free(m);
    return st;
}

/* --assistant mode: the assistant's speculators give greedy's tokens; it is refused for
 * another model, and a model file is refused as an assistant. */
static int assistant_checks(const char *target_path, const char *path, const char *other_path) {
    kolibri_status status;
    kolibri_model *target = load(target_path, 0, &status);
    kolibri_model *other = load(other_path, 0, &status);
    if (!target || !other) {
        check("load the models", 0);
        return 1;
    }
    kolibri_assistant *wrong = NULL;
    expect("an assistant for another model", kolibri_assistant_load(other, path, &wrong),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    expect("a model file as an assistant", kolibri_assistant_load(target, target_path, &wrong),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    expect("NULL target", kolibri_assistant_load(NULL, path, &wrong),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    check("  and no assistant was made", wrong == NULL);
    expect("load the assistant", kolibri_assistant_load(target, path, &g_assistant),
           KOLIBRI_STATUS_OK);
    if (g_assistant) {
        same_tokens_of(target, target_path);
        kolibri_context *c = new_context(other);
        kolibri_speculator *spec = NULL;
        expect("the assistant on another model's context",
               kolibri_speculator_new_assistant(c, g_assistant, NULL, false, &spec),
               KOLIBRI_STATUS_INVALID_ARGUMENT);
        kolibri_context_free(c);
        /* A speculator keeps what it needs of the assistant. */
        c = new_context(target);
        expect("a speculator", kolibri_speculator_new_assistant(c, g_assistant, NULL, false, &spec),
               KOLIBRI_STATUS_OK);
        kolibri_assistant_free(g_assistant);
        g_assistant = NULL;
        kolibri_sampler *s = greedy_sampler();
        int32_t prompt[4] = {2, 818, 5279, 529}, step[17], tok = 0;
        size_t got = 0;
        kolibri_context_eval(c, prompt, 4);
        kolibri_speculator_prepare(spec, c, NULL);
        kolibri_sampler_sample(s, c, &tok);
        expect("a step after the assistant was freed",
               kolibri_speculator_step(spec, c, NULL, s, tok, step, 17, &got), KOLIBRI_STATUS_OK);
        kolibri_sampler_free(s);
        kolibri_speculator_free(spec);
        kolibri_context_free(c);
    }
    kolibri_model_free(other);
    kolibri_model_free(target);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--assistant"))
        return assistant_checks(argv[2], argv[3], argv[4]);
    if (argc < 3 || argc > 4) {
        fprintf(stderr,
                "usage: %s MTP_MODEL.gguf NO_BLOCK.gguf [AGREEING.gguf]\n"
                "       %s --assistant GEMMA4.gguf ASSISTANT.gguf OTHER.gguf\n",
                argv[0], argv[0]);
        return 2;
    }
    same_tokens(argv[1]);
    if (argc > 3) {
        kolibri_speculator_stats st = same_tokens(argv[3]);
        check("the agreeing block's drafts were mostly accepted", 2 * st.accepted > st.drafted);
        check("fewer target passes than tokens", st.target_passes < st.generated);
    }

    kolibri_status status;
    kolibri_model *m = load(argv[1], 2, &status);
    expect("n_mtp_blocks 2", status, KOLIBRI_STATUS_INVALID_ARGUMENT);
    m = load(argv[2], 1, &status);
    expect("a block asked of a model without one", status, KOLIBRI_STATUS_INVALID_ARGUMENT);
    check("  and no model was made", m == NULL);
    m = load(argv[1], 0, &status);
    expect("load without the block", status, KOLIBRI_STATUS_OK);
    if (m) {
        kolibri_context *c = new_context(m);
        kolibri_speculator *spec = NULL;
        expect("the block's speculator on a model loaded without it",
               kolibri_speculator_new_mtp(c, NULL, false, &spec), KOLIBRI_STATUS_INVALID_ARGUMENT);
        check("  and no speculator was made", spec == NULL);
        expect("NULL target", kolibri_speculator_new_mtp(NULL, NULL, false, &spec),
               KOLIBRI_STATUS_INVALID_ARGUMENT);
        kolibri_context_free(c);
        kolibri_model_free(m);
    }
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
