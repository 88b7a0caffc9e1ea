// tokref: llama.cpp's tokenizer (libllama from the pinned node-llama-cpp
// package) as the reference for gguftool's runtime tokenizer. The model is
// loaded with vocab_only, so only its metadata is read.
//
//   tokref BINS MODEL tokenize IN OUT
//       IN holds texts, each a u32 byte length and the bytes. For each text
//       OUT gets the ids of llama_tokenize for (add_special, parse_special)
//       = (0,0), (0,1), (1,0), (1,1), each as a u32 count and that many
//       i32 ids, then the llama_detokenize texts of the (1,1) ids for
//       (remove_special, unparse_special) = (0,0), (0,1), (1,0), (1,1),
//       each as a u32 byte length and the bytes.
//   tokref BINS MODEL detokenize IN OUT
//       IN holds id lists (u32 count, i32 ids); OUT gets the four
//       llama_detokenize texts of each, in the order above.
//   tokref BINS MODEL vocab OUT
//       OUT gets i32 n_vocab, i32 bos, i32 eos, u8 add_bos, u8 add_eos, then
//       per token u8 is_eog, u32 attr and llama_token_to_piece (lstrip 0)
//       with special = 0 and = 1, each as a u32 length and the bytes.
//
// All integers are little-endian. Prints {"ok":true,"records":N} on
// success; errors go to stderr with exit status 1.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOOL "tokref"
#include "helpers.h"

#include "ggml-backend.h"
#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// buffer is a growable byte array for the output file.
struct buffer {
    char *data;
    size_t n, cap;
};

static void put(struct buffer *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->data = realloc(b->data, b->cap);
        if (!b->data) die("out of memory");
    }
    memcpy(b->data + b->n, p, n);
    b->n += n;
}

static void put_u32(struct buffer *b, uint32_t v) {
    unsigned char le[4] = {v, v >> 8, v >> 16, v >> 24};
    put(b, le, 4);
}

static void put_bytes(struct buffer *b, const char *p, size_t n) {
    put_u32(b, (uint32_t)n);
    put(b, p, n);
}

// reader walks the input file.
struct reader {
    const unsigned char *p, *end;
};

static uint32_t get_u32(struct reader *r) {
    if (r->end - r->p < 4) die("truncated input");
    uint32_t v = r->p[0] | r->p[1] << 8 | r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static llama_token *tokenize(const struct llama_vocab *vocab, const char *text, uint32_t len, int add, int parse, int *n) {
    int cap = (int)len + 8;
    llama_token *ids = malloc(sizeof(llama_token) * cap);
    *n = llama_tokenize(vocab, text, (int32_t)len, ids, cap, add, parse);
    if (*n < 0) {
        cap = -*n;
        ids = realloc(ids, sizeof(llama_token) * cap);
        *n = llama_tokenize(vocab, text, (int32_t)len, ids, cap, add, parse);
    }
    if (*n < 0) die("llama_tokenize failed");
    return ids;
}

// put_detokenized writes the four llama_detokenize texts of ids.
static void put_detokenized(struct buffer *out, const struct llama_vocab *vocab, const llama_token *ids, int n) {
    for (int d = 0; d < 4; d++) {
        int cap = n * 8 + 16;
        char *text = malloc(cap);
        int len = llama_detokenize(vocab, ids, n, text, cap, d >> 1, d & 1);
        if (len < 0) {
            cap = -len;
            text = realloc(text, cap);
            len = llama_detokenize(vocab, ids, n, text, cap, d >> 1, d & 1);
        }
        if (len < 0) die("llama_detokenize failed");
        put_bytes(out, text, len);
        free(text);
    }
}

static void put_piece(struct buffer *out, const struct llama_vocab *vocab, llama_token id, int special) {
    char small[256];
    int len = llama_token_to_piece(vocab, id, small, sizeof small, 0, special);
    if (len >= 0) {
        put_bytes(out, small, len);
        return;
    }
    char *big = malloc(-len);
    len = llama_token_to_piece(vocab, id, big, -len, 0, special);
    if (len < 0) die("llama_token_to_piece failed");
    put_bytes(out, big, len);
    free(big);
}

int main(int argc, char **argv) {
    if (argc < 5) die("usage: tokref BINS MODEL tokenize|detokenize IN OUT | tokref BINS MODEL vocab OUT");
    const char *bins = argv[1], *model_path = argv[2], *mode = argv[3];
    int vocab_mode = !strcmp(mode, "vocab");
    if (!vocab_mode && argc < 6) die("tokenize and detokenize need IN and OUT");
    const char *out_path = vocab_mode ? argv[4] : argv[5];

    llama_log_set(quiet_log, NULL);
    ggml_log_set(quiet_log, NULL);
    ggml_backend_load_all_from_path(bins);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) die("llama.cpp failed to load the model");
    const struct llama_vocab *vocab = llama_model_get_vocab(model);

    struct buffer out = {0};
    long records = 0;
    if (vocab_mode) {
        int n_vocab = llama_vocab_n_tokens(vocab);
        put_u32(&out, (uint32_t)n_vocab);
        put_u32(&out, (uint32_t)llama_vocab_bos(vocab));
        put_u32(&out, (uint32_t)llama_vocab_eos(vocab));
        unsigned char flags[2] = {llama_vocab_get_add_bos(vocab), llama_vocab_get_add_eos(vocab)};
        put(&out, flags, 2);
        for (llama_token id = 0; id < n_vocab; id++) {
            unsigned char eog = llama_vocab_is_eog(vocab, id);
            put(&out, &eog, 1);
            put_u32(&out, (uint32_t)llama_vocab_get_attr(vocab, id));
            put_piece(&out, vocab, id, 0);
            put_piece(&out, vocab, id, 1);
            records++;
        }
    } else {
        size_t in_len;
        unsigned char *in = read_file(argv[4], &in_len);
        struct reader r = {in, in + in_len};
        int detok = !strcmp(mode, "detokenize");
        if (!detok && strcmp(mode, "tokenize")) die("mode must be tokenize, detokenize or vocab");
        while (r.p < r.end) {
            uint32_t n = get_u32(&r);
            if (detok) {
                if ((size_t)(r.end - r.p) / 4 < n) die("truncated input");
                llama_token *ids = malloc(sizeof(llama_token) * (n ? n : 1));
                for (uint32_t i = 0; i < n; i++) ids[i] = (llama_token)get_u32(&r);
                put_detokenized(&out, vocab, ids, (int)n);
                free(ids);
            } else {
                if ((size_t)(r.end - r.p) < n) die("truncated input");
                const char *text = (const char *)r.p;
                r.p += n;
                llama_token *last = NULL;
                int last_n = 0;
                for (int c = 0; c < 4; c++) {
                    int k;
                    llama_token *ids = tokenize(vocab, text, n, c >> 1, c & 1, &k);
                    put_u32(&out, (uint32_t)k);
                    for (int i = 0; i < k; i++) put_u32(&out, (uint32_t)ids[i]);
                    if (c == 3) {
                        last = ids;
                        last_n = k;
                    } else {
                        free(ids);
                    }
                }
                put_detokenized(&out, vocab, last, last_n);
                free(last);
            }
            records++;
        }
        free(in);
    }
    write_file(out_path, out.data, out.n);
    printf("{\"ok\":true,\"records\":%ld}\n", records);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
