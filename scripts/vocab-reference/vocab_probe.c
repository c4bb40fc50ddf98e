// What llama.cpp's C API says about a vocabulary beyond its tokenizer cases, for
// scripts/record-vocab-reference.py:
//   vocab_probe VOCAB.gguf TEXT...
// prints its special ids and flags, its end-of-generation and control ids, every token's piece
// (token_to_piece without and with special tokens, as hex) and each TEXT tokenized with
// add_special and parse_special.
#include "llama.h"

#include <stdio.h>
#include <string.h>

static void print_hex(const char *bytes, int n) {
    for (int i = 0; i < n; i++) {
        printf("%02x", (unsigned char)bytes[i]);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: vocab_probe VOCAB.gguf TEXT...\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], params);
    if (!model) {
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n = llama_vocab_n_tokens(vocab);
    printf("ids %d %d %d %d\n", llama_vocab_bos(vocab), llama_vocab_eos(vocab),
           llama_vocab_nl(vocab), llama_vocab_get_add_bos(vocab));
    printf("eog");
    for (int i = 0; i < n; i++) {
        if (llama_vocab_is_eog(vocab, i)) printf(" %d", i);
    }
    printf("\ncontrol");
    for (int i = 0; i < n; i++) {
        if (llama_vocab_is_control(vocab, i)) printf(" %d", i);
    }
    printf("\n");
    char piece[1024];
    for (int i = 0; i < n; i++) {
        printf("piece");
        for (int special = 0; special < 2; special++) {
            const int len = llama_token_to_piece(vocab, i, piece, sizeof piece, 0, special);
            printf(" ");
            print_hex(piece, len > 0 ? len : 0);
            printf("-");
        }
        printf("\n");
    }
    static llama_token tokens[1 << 16];
    for (int a = 2; a < argc; a++) {
        const int k = llama_tokenize(vocab, argv[a], strlen(argv[a]), tokens, 1 << 16, true, true);
        printf("tokens");
        for (int i = 0; i < k; i++) printf(" %d", tokens[i]);
        printf("\n");
    }
    llama_model_free(model);
    return 0;
}
