// quantmodel: llama-quantize rebuilt on the C API of the pinned libllama
// (the npm package ships no llama-quantize executable). It does what
// tools/quantize/quantize.cpp does for the options below, including its
// importance-matrix loading (common/imatrix-loader.cpp: the GGUF format
// and the legacy .dat), so gguftool quantize can be compared with it
// byte for byte.
//
//   quantmodel [--imatrix FILE] [--tensor-type PATTERN=TYPE]... [--keep-split]
//              [--allow-requantize] [--leave-output-tensor] [--pure]
//              [--output-tensor-type TYPE] [--token-embedding-type TYPE]
//              IN.gguf OUT.gguf FTYPE
//
// FTYPE is a llama_ftype number; TYPE a ggml type name (q4_K, f16, …).
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ggml.h"
#include "gguf.h"
#include "llama.h"

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "quantmodel: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(1);
}

static enum ggml_type parse_type(const char *s) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *name = ggml_type_name((enum ggml_type)t);
        if (name && ggml_blck_size((enum ggml_type)t) != 0 && !strcasecmp(name, s)) return (enum ggml_type)t;
    }
    die("unknown type", s);
    return GGML_TYPE_COUNT;
}

// One processed importance-matrix entry (tools/quantize/quantize.cpp load_imatrix).
struct entry {
    char *name;
    float *data;
    size_t n;
};

static struct entry *entries;
static size_t n_entries;
static int chunk_count;
static char *first_dataset;

static struct entry *add_entry(const char *name, size_t n) {
    entries = realloc(entries, sizeof(struct entry) * (n_entries + 1));
    struct entry *e = &entries[n_entries++];
    e->name = strdup(name);
    e->data = calloc(n ? n : 1, sizeof(float));
    e->n = n;
    return e;
}

static int load_legacy(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open imatrix", path);
    int32_t n = 0;
    if (fread(&n, 4, 1, f) != 1 || n < 1) die("no data in imatrix", path);
    for (int i = 0; i < n; i++) {
        int32_t len = 0, ncall = 0, nval = 0;
        if (fread(&len, 4, 1, f) != 1 || len < 0) die("bad legacy imatrix entry", path);
        char *name = calloc(len + 1, 1);
        if (fread(name, 1, len, f) != (size_t)len) die("bad legacy imatrix name", path);
        if (fread(&ncall, 4, 1, f) != 1 || fread(&nval, 4, 1, f) != 1 || nval < 1) die("bad legacy imatrix entry", path);
        float *sums = malloc(sizeof(float) * nval);
        if (fread(sums, 4, nval, f) != (size_t)nval) die("bad legacy imatrix data", path);
        struct entry *e = add_entry(name, nval);
        for (int j = 0; j < nval; j++) e->data[j] = ncall > 0 ? sums[j] / (int64_t)ncall : sums[j];
        free(sums);
        free(name);
    }
    int32_t calls = 0;
    if (fread(&calls, 4, 1, f) == 1) {
        chunk_count = calls;
        int32_t len = 0;
        if (fread(&len, 4, 1, f) == 1 && len > 0) {
            char *ds = calloc(len + 1, 1);
            if (fread(ds, 1, len, f) == (size_t)len) first_dataset = ds;
        }
    }
    fclose(f);
    return 1;
}

static void load_imatrix(const char *path) {
    struct ggml_context *ctx = NULL;
    struct gguf_init_params p = {.no_alloc = false, .ctx = &ctx};
    struct gguf_context *g = gguf_init_from_file(path, p);
    if (!g) {
        load_legacy(path);
        return;
    }
    if (gguf_get_n_tensors(g) < 1) die("no data in imatrix", path);
    int64_t kd = gguf_find_key(g, "imatrix.datasets");
    int64_t kc = gguf_find_key(g, "imatrix.chunk_count");
    int64_t ks = gguf_find_key(g, "imatrix.chunk_size");
    if (kd == -1 || kc == -1 || ks == -1) die("missing imatrix metadata", path);
    if (gguf_get_kv_type(g, kd) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, kd) == GGUF_TYPE_STRING &&
        gguf_get_arr_n(g, kd) > 0) {
        first_dataset = strdup(gguf_get_arr_str(g, kd, 0));
    }
    chunk_count = (int)gguf_get_val_u32(g, kc);
    for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const char *name = ggml_get_name(t);
        size_t len = strlen(name);
        if (len <= 8 || strcmp(name + len - 8, ".in_sum2")) continue;
        char base[GGML_MAX_NAME + 16];
        snprintf(base, sizeof base, "%.*s.counts", (int)(len - 8), name);
        struct ggml_tensor *counts = ggml_get_tensor(ctx, base);
        if (!counts) die("mismatched sums and counts", name);
        if (t->type != GGML_TYPE_F32 || counts->type != GGML_TYPE_F32) die("sums and counts must be F32", name);
        base[len - 8] = 0;
        int64_t nval = ggml_nelements(t), ncounts = ggml_nelements(counts);
        int64_t ne0 = nval / ncounts;
        struct entry *e = add_entry(base, nval);
        const float *sums = t->data, *cnt = counts->data;
        for (int64_t j = 0; j < ncounts; j++) {
            const float count = (float)lround(cnt[j]);
            for (int64_t i = 0; i < ne0; i++) e->data[j * ne0 + i] = count > 0.0f ? sums[j * ne0 + i] / count : 1;
        }
    }
    // A sums tensor without counts, or counts without sums, is an error in llama.cpp too.
    for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const char *name = ggml_get_name(t);
        size_t len = strlen(name);
        if (len > 7 && !strcmp(name + len - 7, ".counts")) {
            char sums[GGML_MAX_NAME + 16];
            snprintf(sums, sizeof sums, "%.*s.in_sum2", (int)(len - 7), name);
            if (!ggml_get_tensor(ctx, sums)) die("mismatched sums and counts", name);
        }
    }
    gguf_free(g);
    ggml_free(ctx);
}

int main(int argc, char **argv) {
    struct llama_model_quantize_params params = llama_model_quantize_default_params();
    const char *imatrix_file = NULL;
    struct llama_model_tensor_override *tt = calloc(argc + 1, sizeof *tt); // at most one per argument
    int n_tt = 0;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--keep-split")) params.keep_split = true;
        else if (!strcmp(a, "--allow-requantize")) params.allow_requantize = true;
        else if (!strcmp(a, "--leave-output-tensor")) params.quantize_output_tensor = false;
        else if (!strcmp(a, "--pure")) params.pure = true;
        else if (i + 1 < argc && !strcmp(a, "--imatrix")) imatrix_file = argv[++i];
        else if (i + 1 < argc && !strcmp(a, "--output-tensor-type")) params.output_tensor_type = parse_type(argv[++i]);
        else if (i + 1 < argc && !strcmp(a, "--token-embedding-type")) params.token_embedding_type = parse_type(argv[++i]);
        else if (i + 1 < argc && !strcmp(a, "--tensor-type")) {
            char *spec = strdup(argv[++i]);
            char *eq = strchr(spec, '=');
            if (!eq || eq == spec || !eq[1]) die("malformed --tensor-type", spec);
            *eq = 0;
            for (char *c = spec; *c; c++) *c = (char)tolower((unsigned char)*c);
            tt[n_tt].pattern = spec;
            tt[n_tt].type = parse_type(eq + 1);
            n_tt++;
        } else die("unknown option", a);
    }
    if (argc - i != 3) die("usage: quantmodel [options] IN.gguf OUT.gguf FTYPE", NULL);
    const char *in = argv[i];
    char *out = strdup(argv[i + 1]);
    params.ftype = (enum llama_ftype)atoi(argv[i + 2]);
    if (params.keep_split && strstr(out, ".gguf")) out[strlen(out) - 5] = 0;

    struct llama_model_kv_override kvo[5];
    int n_kvo = 0;
    struct llama_model_imatrix_data *idata = NULL;
    if (imatrix_file) {
        load_imatrix(imatrix_file);
        idata = calloc(n_entries + 1, sizeof *idata);
        for (size_t k = 0; k < n_entries; k++) idata[k] = (struct llama_model_imatrix_data){entries[k].name, entries[k].data, entries[k].n};
        params.imatrix = idata;
        memset(kvo, 0, sizeof kvo);
        strcpy(kvo[n_kvo].key, "quantize.imatrix.file");
        kvo[n_kvo].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
        strncpy(kvo[n_kvo].val_str, imatrix_file, 127);
        n_kvo++;
        if (first_dataset) {
            strcpy(kvo[n_kvo].key, "quantize.imatrix.dataset");
            kvo[n_kvo].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
            strncpy(kvo[n_kvo].val_str, first_dataset, 127);
            n_kvo++;
        }
        strcpy(kvo[n_kvo].key, "quantize.imatrix.entries_count");
        kvo[n_kvo].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
        kvo[n_kvo].val_i64 = (int64_t)n_entries;
        n_kvo++;
        if (chunk_count > 0) {
            strcpy(kvo[n_kvo].key, "quantize.imatrix.chunks_count");
            kvo[n_kvo].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
            kvo[n_kvo].val_i64 = chunk_count;
            n_kvo++;
        }
        kvo[n_kvo].key[0] = 0;
        params.kv_overrides = kvo;
    }
    if (n_tt > 0) {
        tt[n_tt].pattern = NULL;
        tt[n_tt].type = GGML_TYPE_COUNT;
        params.tt_overrides = tt;
    }
    llama_backend_init();
    if (llama_model_quantize(in, out, &params) != 0) die("llama_model_quantize failed", NULL);
    return 0;
}
