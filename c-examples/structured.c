/* structured.c: JSON that follows a schema, from any model, through a constrained sampler.
 *
 *   structured MODEL.gguf [n_predict]
 *
 * Prints the generated JSON on stdout (the test pipes it into a JSON parser), after checking
 * that bad constraints are refused with INVALID_ARGUMENT and a message. */
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

#define EXPECT(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "expected %s (last error: %s)\n", #cond, kolibri_last_error());\
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

static const char *SCHEMA =
    "{\"type\": \"object\", \"properties\": {"
    "\"city\": {\"type\": \"string\", \"maxLength\": 30},"
    "\"population\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"capital\": {\"type\": \"boolean\"}},"
    "\"required\": [\"city\", \"population\", \"capital\"], \"additionalProperties\": false}";

static const char *PROMPT = "<|im_start|>user\nDescribe Paris as JSON.<|im_end|>\n"
                            "<|im_start|>assistant\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [n_predict]\n", argv[0]);
        return 2;
    }
    int n_predict = argc > 2 ? atoi(argv[2]) : 96;
    int exit_code = 1;
    kolibri_model *model = NULL;
    kolibri_context *ctx = NULL;
    kolibri_sampler *sampler = NULL;
    int32_t tokens[256];
    size_t n_tokens = 0;

    kolibri_model_params mp;
    CHECK(kolibri_model_params_init(&mp, sizeof mp));
    CHECK(kolibri_model_load(argv[1], &mp, &model));
    kolibri_sampler_params sp;
    CHECK(kolibri_sampler_params_init(&sp, sizeof sp));
    sp.temperature = 0.0f;
    CHECK(kolibri_sampler_new(&sp, &sampler));

    /* Bad constraints: refused, the sampler unchanged. */
    EXPECT(kolibri_sampler_set_constraint(sampler, model, KOLIBRI_CONSTRAINT_JSON_SCHEMA,
                                          "{\"type\": ") == KOLIBRI_STATUS_INVALID_ARGUMENT);
    EXPECT(strstr(kolibri_last_error(), "not JSON") != NULL);
    EXPECT(kolibri_sampler_set_constraint(sampler, model, KOLIBRI_CONSTRAINT_GBNF,
                                          "root ::= nowhere") == KOLIBRI_STATUS_INVALID_ARGUMENT);
    EXPECT(strstr(kolibri_last_error(), "undefined rule") != NULL);
    EXPECT(kolibri_sampler_set_constraint(sampler, model, 99, "x") ==
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    EXPECT(kolibri_sampler_set_constraint(sampler, model, KOLIBRI_CONSTRAINT_REGEX, NULL) ==
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    EXPECT(kolibri_sampler_set_constraint(NULL, model, KOLIBRI_CONSTRAINT_JSON_OBJECT, NULL) ==
           KOLIBRI_STATUS_INVALID_ARGUMENT);
    EXPECT(kolibri_sampler_clear_constraint(NULL) == KOLIBRI_STATUS_INVALID_ARGUMENT);
    /* Set, cleared, set again: the last one holds. */
    CHECK(kolibri_sampler_set_constraint(sampler, model, KOLIBRI_CONSTRAINT_JSON_OBJECT, NULL));
    CHECK(kolibri_sampler_clear_constraint(sampler));
    CHECK(kolibri_sampler_set_constraint(sampler, model, KOLIBRI_CONSTRAINT_JSON_SCHEMA, SCHEMA));

    CHECK(kolibri_tokenize(model, PROMPT, strlen(PROMPT), true, true, tokens, 256, &n_tokens));
    kolibri_context_params cp;
    CHECK(kolibri_context_params_init(&cp, sizeof cp));
    cp.n_ctx = 512;
    CHECK(kolibri_context_new(model, &cp, &ctx));
    CHECK(kolibri_context_eval(ctx, tokens, n_tokens));
    bool ended = false;
    for (int i = 0; i < n_predict && !ended; i++) {
        int32_t next;
        CHECK(kolibri_sampler_sample(sampler, ctx, &next));
        CHECK(kolibri_model_token_is_eog(model, next, &ended));
        if (ended) break;
        char piece[256];
        size_t len = 0;
        CHECK(kolibri_token_to_piece(model, next, false, piece, sizeof piece, &len));
        fwrite(piece, 1, len, stdout);
        CHECK(kolibri_context_eval(ctx, &next, 1));
    }
    printf("\n");
    EXPECT(ended); /* the schema's object closed and the sampler ended the output */
    exit_code = 0;

done:
    kolibri_sampler_free(sampler);
    kolibri_context_free(ctx);
    kolibri_model_free(model);
    return exit_code;
}
