/* Misuse through libllama: every call below is wrong, and each must return llama.h's failure
 * value and say why through the log callback, with the process alive and the context still
 * usable afterwards. Usage: misuse MODEL.gguf */
#include <stdio.h>
#include <string.h>

#include "llama.h"

static int log_lines = 0;
static int failures = 0;
static int checks = 0;

static void on_log(enum ggml_log_level level, const char * text, void * user) {
    (void) level;
    (void) user;
    (void) text;
    log_lines++;
}

/* `ok` must hold, and the call must have logged at least one line. */
static void expect(int ok, const char * what, int lines_before) {
    checks++;
    if (!ok) {
        printf("FAIL %s: wrong return value\n", what);
        failures++;
    } else if (log_lines == lines_before) {
        printf("FAIL %s: nothing logged\n", what);
        failures++;
    } else {
        printf("ok   %s\n", what);
    }
}

#define EXPECT(cond, what) do { int before_ = log_lines; int ok_ = (cond); expect(ok_, what, before_); } while (0)

static llama_batch one_token(llama_token tok, llama_pos pos, llama_seq_id seq) {
    llama_batch b = llama_batch_init(1, 0, 1);
    b.n_tokens = 1;
    b.token[0] = tok;
    b.pos[0] = pos;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = seq;
    b.logits[0] = 1;
    return b;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(on_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_context_params cp = llama_context_default_params();

    EXPECT(llama_model_load_from_file(NULL, mp) == NULL, "load: NULL path");
    EXPECT(llama_model_load_from_file("/nonexistent/model.gguf", mp) == NULL, "load: a bad path");
    EXPECT(llama_model_load_from_file(argv[0], mp) == NULL, "load: a file that is not GGUF");
    EXPECT(llama_init_from_model(NULL, cp) == NULL, "context: NULL model");
    const char * no_paths[] = {NULL};
    const char * not_parts[] = {argv[1], argv[1]};
    EXPECT(llama_model_load_from_splits(NULL, 1, mp) == NULL, "splits: NULL paths");
    EXPECT(llama_model_load_from_splits(no_paths, 0, mp) == NULL, "splits: no paths");
    EXPECT(llama_model_load_from_splits(no_paths, 1, mp) == NULL, "splits: a NULL path");
    EXPECT(llama_model_load_from_splits(not_parts, 2, mp) == NULL, "splits: files that are not parts");

    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        printf("FAIL cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    struct llama_context_params too_long = cp;
    too_long.n_ctx = (uint32_t) llama_model_n_ctx_train(model) * 2;
    EXPECT(llama_init_from_model(model, too_long) == NULL, "context: n_ctx past the trained context");
    struct llama_context_params bad_kv = cp;
    bad_kv.type_k = GGML_TYPE_Q5_K;
    EXPECT(llama_init_from_model(model, bad_kv) == NULL, "context: a KV cache type Kolibri lacks");

    cp.n_ctx = 64;
    cp.n_seq_max = 2;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        printf("FAIL cannot create a context\n");
        return 1;
    }
    llama_token bos = llama_vocab_bos(vocab);
    if (bos < 0) bos = 0;

    EXPECT(llama_decode(NULL, llama_batch_get_one(&bos, 1)) == -1, "decode: NULL context");
    llama_batch empty = llama_batch_get_one(&bos, 0);
    EXPECT(llama_decode(ctx, empty) == -1, "decode: an empty batch");

    llama_batch gap = one_token(bos, 5, 0);
    EXPECT(llama_decode(ctx, gap) == -1, "decode: a batch with a position gap");
    llama_batch_free(gap);

    llama_batch bad_seq = one_token(bos, 0, 7);
    EXPECT(llama_decode(ctx, bad_seq) == -1, "decode: a sequence id out of range");
    llama_batch_free(bad_seq);

    llama_batch bad_tok = one_token(llama_vocab_n_tokens(vocab) + 10, 0, 0);
    EXPECT(llama_decode(ctx, bad_tok) == -1, "decode: a token id out of range");
    llama_batch_free(bad_tok);

    EXPECT(llama_get_logits_ith(ctx, 3) == NULL, "logits: an index with no output");
    struct llama_sampler * greedy = llama_sampler_init_greedy();
    EXPECT(llama_sampler_sample(greedy, ctx, -1) == LLAMA_TOKEN_NULL, "sample: before any decode");
    EXPECT(llama_sampler_sample(greedy, NULL, -1) == LLAMA_TOKEN_NULL, "sample: NULL context");

    EXPECT(llama_sampler_init_grammar(vocab, "root ::= (", "root") == NULL, "grammar: a broken GBNF");
    unsigned char junk[64];
    memset(junk, 0x5a, sizeof junk);
    EXPECT(llama_state_set_data(ctx, junk, sizeof junk) == 0, "state: bytes that are no state");
    EXPECT(!llama_state_load_file(ctx, "/nonexistent/state.bin", NULL, 0, NULL), "state: a missing file");
    EXPECT(llama_vocab_get_text(vocab, -3) == NULL, "vocab: a negative token");
    EXPECT(llama_model_meta_val_str(NULL, "general.name", NULL, 0) == -1, "metadata: NULL model");
    llama_memory_t mem = llama_get_memory(ctx);
    EXPECT(!llama_memory_seq_rm(mem, 9, 0, -1), "memory: remove from a sequence out of range");
    EXPECT(llama_sampler_chain_remove(llama_sampler_chain_init(llama_sampler_chain_default_params()), 4) == NULL,
           "sampler: remove past the chain's end");
    EXPECT(llama_adapter_lora_init(model, "/nonexistent.gguf") == NULL, "unsupported: a LoRA adapter");

    /* Still alive and still right: a valid decode and a sample after all of the above, on a
     * pool resized to one thread. */
    llama_set_n_threads(ctx, 1, 1);
    checks++;
    llama_batch good = one_token(bos, 0, 0);
    int rc = llama_decode(ctx, good);
    llama_token next = llama_sampler_sample(greedy, ctx, -1);
    if (rc != 0 || next < 0 || next >= llama_vocab_n_tokens(vocab) || llama_n_threads(ctx) != 1 ||
        llama_memory_seq_pos_max(mem, 0) != 0) {
        printf("FAIL the context does not work after the misuse (rc %d, token %d)\n", rc, next);
        failures++;
    } else {
        printf("ok   the context decodes and samples after all of it\n");
    }
    llama_batch_free(good);
    llama_sampler_free(greedy);
    llama_free(ctx);
    llama_model_free(model);
    printf("libllama misuse: %d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
