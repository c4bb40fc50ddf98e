/* speculative.c: speculative decoding through the C API gives plain greedy decoding's tokens,
 * by prompt lookup and (given a draft model) with a draft context; unusable drafts and misuse
 * get their documented statuses.
 *
 *   speculative SMALL.gguf [LARGE.gguf [OTHER_VOCAB.gguf]]
 *
 * SMALL is the target of prompt lookup, and the draft model for LARGE (same vocabulary).
 *
 * Prints one "ok"/"FAIL" line per check; exits 0 only if every check passed. */
#include <kolibri.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_NEW 40
#define MAX_DRAFT 8

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

static kolibri_model *load(const char *path) {
    kolibri_model *m = NULL;
    if (kolibri_model_load(path, NULL, &m) != KOLIBRI_STATUS_OK)
        fprintf(stderr, "load %s: %s\n", path, kolibri_last_error());
    return m;
}

static kolibri_context *new_context(const kolibri_model *m) {
    kolibri_context_params p;
    kolibri_context_params_init(&p, sizeof p);
    p.n_ctx = 512;
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

/* So regular that every model continues it the same way, whatever its kernels' rounding: lookup
 * must find drafts to accept on any machine. */
static const char *PROMPT =
    "def f1(x):\n    return x + 1\n\ndef f2(x):\n    return x + 2\n\n"
    "def f3(x):\n    return x + 3\n\ndef f4(x):\n    return x + 4\n\ndef f5(x):\n";

/* Greedy tokens after the prompt: plainly (draft_model NULL and lookup 0), by prompt lookup,
 * or with a draft context of draft_model. Returns how many were written to out. */
static size_t generate(const kolibri_model *m, const kolibri_model *draft_model, int lookup,
                       int32_t *out, kolibri_speculator_stats *stats) {
    int32_t prompt[256];
    size_t n_prompt = 0, n = 0;
    kolibri_tokenize(m, PROMPT, strlen(PROMPT), true, false, prompt, 256, &n_prompt);
    kolibri_context *c = new_context(m);
    kolibri_context *d = draft_model ? new_context(draft_model) : NULL;
    kolibri_sampler *s = greedy_sampler();
    kolibri_speculator *spec = NULL;
    if (draft_model || lookup) {
        kolibri_speculator_params p;
        kolibri_speculator_params_init(&p, sizeof p);
        p.max_draft = MAX_DRAFT;
        expect("create the speculator", kolibri_speculator_new(c, d, &p, &spec),
               KOLIBRI_STATUS_OK);
    }
    int32_t tok;
    if (kolibri_context_eval(c, prompt, n_prompt) != KOLIBRI_STATUS_OK ||
        kolibri_sampler_sample(s, c, &tok) != KOLIBRI_STATUS_OK)
        goto done;
    /* The draft model reads the prompt now, as prompt processing (a step would otherwise). */
    if (spec) {
        expect("prepare the draft", kolibri_speculator_prepare(spec, c, d), KOLIBRI_STATUS_OK);
        if (d)
            expect("prepare without the draft context", kolibri_speculator_prepare(spec, c, NULL),
                   KOLIBRI_STATUS_INVALID_ARGUMENT);
        expect("prepare without the target", kolibri_speculator_prepare(spec, NULL, d),
               KOLIBRI_STATUS_INVALID_ARGUMENT);
    }
    out[n++] = tok;
    while (n < N_NEW) {
        if (spec) {
            int32_t step[MAX_DRAFT + 1];
            size_t got = 0;
            if (kolibri_speculator_step(spec, c, d, s, out[n - 1], step, MAX_DRAFT + 1, &got) !=
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
        int32_t small[2];
        size_t got = 0;
        expect("a step into too small a buffer",
               kolibri_speculator_step(spec, c, d, s, out[n - 1], small, 2, &got),
               KOLIBRI_STATUS_BUFFER_TOO_SMALL);
        if (d)
            expect("a draft speculator stepped without its draft context",
                   kolibri_speculator_step(spec, c, NULL, s, out[n - 1], out, MAX_DRAFT + 1,
                                           &got),
                   KOLIBRI_STATUS_INVALID_ARGUMENT);
        expect("stats", kolibri_speculator_get_stats(spec, stats), KOLIBRI_STATUS_OK);
    }
done:
    kolibri_speculator_free(spec);
    kolibri_sampler_free(s);
    kolibri_context_free(d);
    kolibri_context_free(c);
    return n;
}

static void refused(const char *what, const kolibri_model *target, const kolibri_model *draft) {
    kolibri_context *c = new_context(target), *d = new_context(draft);
    kolibri_speculator *spec = NULL;
    expect(what, kolibri_speculator_new(c, d, NULL, &spec), KOLIBRI_STATUS_INVALID_ARGUMENT);
    check("  and no speculator was made", spec == NULL);
    kolibri_context_free(d);
    kolibri_context_free(c);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s SMALL.gguf [LARGE.gguf [OTHER_VOCAB.gguf]]\n", argv[0]);
        return 2;
    }
    kolibri_model *m = load(argv[1]);
    kolibri_model *large = argc > 2 ? load(argv[2]) : NULL;
    kolibri_model *other = argc > 3 ? load(argv[3]) : NULL;
    if (!m || (argc > 2 && !large) || (argc > 3 && !other)) return 1;

    int32_t plain[N_NEW], fast[N_NEW];
    kolibri_speculator_stats st;
    size_t n_plain = generate(m, NULL, 0, plain, &st);
    check("plain greedy generates", n_plain == N_NEW);

    memset(&st, 0, sizeof st);
    size_t n = generate(m, NULL, 1, fast, &st);
    check("prompt lookup: the same tokens", n == n_plain && !memcmp(fast, plain, sizeof plain));
    check("prompt lookup drafted and was accepted", st.drafted > 0 && st.accepted > 0);
    check("fewer target passes than tokens", st.target_passes < st.generated);
    printf("       (drafted %llu, accepted %llu, %llu target passes for %llu tokens)\n",
           (unsigned long long)st.drafted, (unsigned long long)st.accepted,
           (unsigned long long)st.target_passes, (unsigned long long)st.generated);

    kolibri_context *c = new_context(m);
    kolibri_speculator *spec = NULL;
    kolibri_speculator_params p;
    kolibri_speculator_params_init(&p, sizeof p);
    p.max_draft = 33;
    expect("max_draft above 32", kolibri_speculator_new(c, NULL, &p, &spec),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    expect("one context as target and draft", kolibri_speculator_new(c, c, NULL, &spec),
           KOLIBRI_STATUS_INVALID_STATE);
    expect("NULL target", kolibri_speculator_new(NULL, NULL, NULL, &spec),
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    kolibri_context_free(c);
    refused("a draft as large as the target", m, m);

    if (large) {
        memset(&st, 0, sizeof st);
        size_t n_large = generate(large, NULL, 0, plain, &st);
        n = generate(large, m, 0, fast, &st);
        check("draft model: the same tokens", n == n_large && !memcmp(fast, plain, sizeof plain));
        check("the draft model's tokens were accepted", st.accepted > 0);
    }
    if (other) refused("a draft of another vocabulary", m, other);

    kolibri_model_free(other);
    kolibri_model_free(large);
    kolibri_model_free(m);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
