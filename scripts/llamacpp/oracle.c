// oracle: drives llama.cpp's C API (libllama from the npm package
// node-llama-cpp, pinned by install.sh) as gguftool's independent oracle.
//
//   oracle --bins DIR MODEL load
//   oracle --bins DIR MODEL generate --prompt 1,2,3 -n 16
//   oracle --bins DIR MODEL score --ids 1,2,3,4 [--top 16] [--logits-out FILE] [--sequential]
//   oracle --bins DIR MODEL bench --prompt-tokens 32 -n 128 [--kv f16|q8_0] [--cpu best] [--mmap] [--parallel P] [--ubatch N]
//
// Common flags: --kv f32|f16|q8_0 (KV cache type, default f32; q8_0 with flash attention, bench only), --threads N
// (default 2), --cpu VARIANT (the ggml CPU backend library to load,
// default haswell, so that hosts with AVX-512 record the same numbers),
// --gpu (the oracle-vulkan build only: load the Vulkan backend from DIR
// too and offload every layer; GGML_VK_VISIBLE_DEVICES picks the device),
// --cpu-moe (with --gpu: the routed experts' tensors, *_exps, stay on the
// CPU, as llama.cpp's --cpu-moe puts them — the placement of gguftool's
// GPU path).
// Flash attention is always off. Output is one JSON object on stdout.
//
// generate: the prompt is decoded as one batch, then greedy decoding one
// token at a time; reports the ids and the log-probability of each chosen
// token. score: teacher forcing, all ids in one batch with logits at every
// position; reports, per position, the log-probability of the next id and
// the top log-probabilities. bench: the speed peer of gguftool bench
// decode: load (read into RAM, or mmap with --mmap), prefill a prompt of
// ids 100, 101, … in one batch, decode greedily; reports the seconds of
// each phase. --cpu best loads the CPU variant llama.cpp picks itself.
// With --parallel P, P sequences (prompt of sequence s: ids 100 + 13s,
// 101 + 13s, …) are prefilled in one batch and then decoded together,
// one batch of P tokens per step, each in its own KV cells; "tokens" is
// then one list per sequence. With --ubatch N the prompt is decoded in
// batches of N (n_batch = n_ubatch = N, as llama.cpp's own tools do with
// their default n_ubatch of 512) instead of one batch of the whole
// prompt, whose compute buffer grows with its square: a 16k-token prompt
// in one batch needs tens of GB of attention scores.
#define _POSIX_C_SOURCE 200809L // clock_gettime
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

static void die(const char *msg) {
    fprintf(stderr, "oracle: %s\n", msg);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int parse_ids(const char *s, llama_token **out) {
    int cap = 16, n = 0;
    llama_token *ids = malloc(sizeof(llama_token) * cap);
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) die("bad id list");
        if (n == cap) {
            cap *= 2;
            ids = realloc(ids, sizeof(llama_token) * cap);
        }
        ids[n++] = (llama_token)v;
        s = end;
        if (*s == ',') s++;
    }
    *out = ids;
    return n;
}

// log_softmax writes log-probabilities, computed in double.
static void log_softmax(const float *logits, int n, double *out) {
    double mx = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
}

// argmax is llama.cpp's greedy choice: the first maximum.
static int argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static void print_top(const double *lp, int n, int top) {
    char *used = calloc(n, 1);
    printf("[");
    for (int k = 0; k < top && k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!used[i] && (best < 0 || lp[i] > lp[best])) best = i;
        used[best] = 1;
        printf("%s[%d,%.9g]", k ? "," : "", best, lp[best]);
    }
    printf("]");
    free(used);
}

// bench_parallel prefills `parallel` prompts (sequence s: ids[i] + 13s)
// in one batch, then decodes them greedily together, one batch of one
// token per sequence per step; it prints the seconds of each phase and
// each sequence's tokens.
static void bench_parallel(struct llama_context *ctx, const llama_token *ids, int n_ids, int n_gen, int parallel,
                           int n_vocab, double t_load) {
    struct llama_batch batch = llama_batch_init(n_ids * parallel, 0, 1);
    for (int s = 0; s < parallel; s++) {
        for (int i = 0; i < n_ids; i++) {
            int k = s * n_ids + i;
            batch.token[k] = (ids[i] + 13 * s) % n_vocab;
            batch.pos[k] = i;
            batch.n_seq_id[k] = 1;
            batch.seq_id[k][0] = s;
            batch.logits[k] = i == n_ids - 1;
        }
    }
    batch.n_tokens = n_ids * parallel;
    llama_token *tok = malloc(sizeof(llama_token) * parallel);
    llama_token *all = malloc(sizeof(llama_token) * parallel * (n_gen > 0 ? n_gen : 1));
    double t0 = now();
    if (llama_decode(ctx, batch)) die("llama_decode failed");
    double t_prefill = now() - t0;
    for (int s = 0; s < parallel; s++) tok[s] = all[s * n_gen] = argmax(llama_get_logits_ith(ctx, (s + 1) * n_ids - 1), n_vocab);
    t0 = now();
    for (int step = 1; step < n_gen; step++) {
        for (int s = 0; s < parallel; s++) {
            batch.token[s] = tok[s];
            batch.pos[s] = n_ids + step - 1;
            batch.n_seq_id[s] = 1;
            batch.seq_id[s][0] = s;
            batch.logits[s] = 1;
        }
        batch.n_tokens = parallel;
        if (llama_decode(ctx, batch)) die("llama_decode failed");
        for (int s = 0; s < parallel; s++) tok[s] = all[s * n_gen + step] = argmax(llama_get_logits_ith(ctx, s), n_vocab);
    }
    double t_decode = now() - t0;
    printf("{\"ok\":true,\"load_seconds\":%.6f,\"prompt_tokens\":%d,\"parallel\":%d,\"prefill_seconds\":%.6f,"
           "\"decode_seconds\":%.6f,\"sequences\":[",
           t_load, n_ids, parallel, t_prefill, t_decode);
    for (int s = 0; s < parallel; s++) {
        printf("%s[", s ? "," : "");
        for (int step = 0; step < n_gen; step++) printf("%s%d", step ? "," : "", all[s * n_gen + step]);
        printf("]");
    }
    printf("]}\n");
    free(tok);
    free(all);
    llama_batch_free(batch);
}

int main(int argc, char **argv) {
    const char *bins = NULL, *model_path = NULL, *mode = NULL, *prompt = NULL, *ids_arg = NULL;
    const char *kv = "f32", *cpu = "haswell", *logits_out = NULL;
    int n_gen = 16, threads = 2, top = 16, prompt_tokens = 32, use_mmap = 0, sequential = 0, parallel = 1, ubatch = 0, gpu = 0, cpu_moe = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE(flag, dst)            \
    if (!strcmp(a, flag)) {        \
        if (!next) die("missing value for " flag); \
        dst = next;                \
        i++;                       \
        continue;                  \
    }
        TAKE("--bins", bins)
        TAKE("--prompt", prompt)
        TAKE("--ids", ids_arg)
        TAKE("--kv", kv)
        TAKE("--cpu", cpu)
        TAKE("--logits-out", logits_out)
        if (!strcmp(a, "-n") && next) { n_gen = atoi(next); i++; continue; }
        if (!strcmp(a, "--threads") && next) { threads = atoi(next); i++; continue; }
        if (!strcmp(a, "--top") && next) { top = atoi(next); i++; continue; }
        if (!strcmp(a, "--prompt-tokens") && next) { prompt_tokens = atoi(next); i++; continue; }
        if (!strcmp(a, "--mmap")) { use_mmap = 1; continue; }
        if (!strcmp(a, "--gpu")) { gpu = 1; continue; }
        if (!strcmp(a, "--cpu-moe")) { cpu_moe = 1; continue; }
        if (!strcmp(a, "--sequential")) { sequential = 1; continue; }
        if (!strcmp(a, "--parallel") && next) { parallel = atoi(next); i++; continue; }
        if (!strcmp(a, "--ubatch") && next) { ubatch = atoi(next); i++; continue; }
        if (!model_path) { model_path = a; continue; }
        if (!mode) { mode = a; continue; }
        die("unexpected argument");
    }
    if (!bins || !model_path || !mode) die("usage: oracle --bins DIR MODEL load|generate|score|bench [flags]");

    llama_log_set(quiet_log, NULL);
    ggml_log_set(quiet_log, NULL);
    if (!strcmp(cpu, "best")) {
        ggml_backend_load_all_from_path(bins); // the variant llama.cpp itself picks for this CPU
    } else {
        char lib[4096];
        snprintf(lib, sizeof lib, "%s/libggml-cpu-%s.so", bins, cpu);
        if (!ggml_backend_load(lib)) die("cannot load the CPU backend library");
    }
    if (gpu) {
        char lib[4096];
        snprintf(lib, sizeof lib, "%s/libggml-vulkan.so", bins);
        if (!ggml_backend_load(lib)) die("cannot load the Vulkan backend library (the oracle-vulkan build's bins)");
    }
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = gpu ? 999 : 0;
    struct llama_model_tensor_buft_override experts_on_cpu[2] = {{"_exps", NULL}, {NULL, NULL}};
    if (gpu && cpu_moe) {
        ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (!cpu_dev) die("no CPU backend for --cpu-moe");
        experts_on_cpu[0].buft = ggml_backend_dev_buffer_type(cpu_dev);
        mp.tensor_buft_overrides = experts_on_cpu;
    }
    // Read into RAM unless --mmap: page-cache reclaim cannot stall it.
    mp.load_mode = use_mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
    double t_load = now();
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        printf("{\"ok\":false,\"error\":\"llama.cpp failed to load the model\"}\n");
        return 2;
    }
    t_load = now() - t_load;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    if (!strcmp(mode, "load")) {
        char desc[256];
        llama_model_desc(model, desc, sizeof desc);
        printf("{\"ok\":true,\"n_vocab\":%d,\"n_layer\":%d,\"n_embd\":%d,\"n_params\":%llu,\"desc\":\"%s\"}\n", n_vocab,
               llama_model_n_layer(model), llama_model_n_embd(model),
               (unsigned long long)llama_model_n_params(model), desc);
        llama_model_free(model);
        return 0;
    }

    llama_token *ids = NULL;
    int n_ids = 0;
    if (!strcmp(mode, "generate")) {
        if (!prompt) die("generate needs --prompt");
        n_ids = parse_ids(prompt, &ids);
    } else if (!strcmp(mode, "score")) {
        if (!ids_arg) die("score needs --ids");
        n_ids = parse_ids(ids_arg, &ids);
    } else if (!strcmp(mode, "bench")) {
        // A prompt of ids 100, 101, … (as gguftool bench decode uses).
        n_ids = prompt_tokens;
        ids = malloc(sizeof(llama_token) * (n_ids > 0 ? n_ids : 1));
        for (int i = 0; i < n_ids; i++) ids[i] = (100 + i) % n_vocab;
    } else {
        die("unknown mode");
    }
    if (n_ids < 1) die("empty id list");
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) die("id out of vocabulary");

    if (parallel < 1 || (parallel > 1 && strcmp(mode, "bench"))) die("--parallel is for bench, and at least 1");
    if (ubatch < 0 || (ubatch > 0 && (strcmp(mode, "bench") || parallel > 1))) die("--ubatch is for bench of one sequence, and positive");
    struct llama_context_params cp = llama_context_default_params();
    int n_ctx = n_ids + n_gen > 1024 ? n_ids + n_gen : 1024;
    cp.n_ctx = n_ctx * parallel; // each sequence its own n_ctx cells
    cp.n_batch = n_ctx * parallel;
    cp.n_ubatch = n_ctx * parallel;
    cp.n_seq_max = parallel;
    if (ubatch > 0) {
        cp.n_batch = ubatch;
        cp.n_ubatch = ubatch;
    }
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (!strcmp(kv, "f32")) {
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
    } else if (!strcmp(kv, "q8_0")) {
        // A quantized V cache needs flash attention in llama.cpp; for
        // bench only, where the numerics are not compared.
        if (strcmp(mode, "bench")) die("--kv q8_0 is for bench");
        cp.type_k = GGML_TYPE_Q8_0;
        cp.type_v = GGML_TYPE_Q8_0;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    } else if (strcmp(kv, "f16")) {
        die("--kv must be f32, f16 or q8_0");
    }
    if (n_ids + n_gen > (int)cp.n_ctx) die("sequence longer than the context");
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context");
    double *lp = malloc(sizeof(double) * n_vocab);

    if (!strcmp(mode, "bench") && parallel > 1) {
        bench_parallel(ctx, ids, n_ids, n_gen, parallel, n_vocab, t_load);
    } else if (!strcmp(mode, "bench")) {
        // Prefill the prompt in one batch, then decode greedily; the first
        // token comes from the prefill's logits, so decode times n_gen−1
        // forward passes.
        struct llama_batch batch;
        double t0 = now();
        for (int lo = 0; lo < n_ids; lo += (int)cp.n_batch) {
            int n = n_ids - lo < (int)cp.n_batch ? n_ids - lo : (int)cp.n_batch;
            batch = llama_batch_get_one(ids + lo, n);
            if (llama_decode(ctx, batch)) die("llama_decode failed");
        }
        double t_prefill = now() - t0;
        llama_token tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        printf("{\"ok\":true,\"load_seconds\":%.6f,\"prompt_tokens\":%d,\"prefill_seconds\":%.6f,\"tokens\":[%d", t_load, n_ids, t_prefill, tok);
        t0 = now();
        for (int step = 1; step < n_gen; step++) {
            batch = llama_batch_get_one(&tok, 1);
            if (llama_decode(ctx, batch)) die("llama_decode failed");
            tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
            printf(",%d", tok);
        }
        printf("],\"decode_seconds\":%.6f}\n", now() - t0);
    } else if (!strcmp(mode, "generate")) {
        printf("{\"ok\":true,\"prompt_len\":%d,\"greedy\":[", n_ids);
        struct llama_batch batch = llama_batch_get_one(ids, n_ids);
        double *chosen = malloc(sizeof(double) * (n_gen > 0 ? n_gen : 1));
        llama_token tok;
        for (int step = 0; step < n_gen; step++) {
            if (llama_decode(ctx, batch)) die("llama_decode failed");
            const float *logits = llama_get_logits_ith(ctx, -1);
            tok = argmax(logits, n_vocab);
            log_softmax(logits, n_vocab, lp);
            chosen[step] = lp[tok];
            printf("%s%d", step ? "," : "", tok);
            batch = llama_batch_get_one(&tok, 1);
        }
        printf("],\"logprobs\":[");
        for (int step = 0; step < n_gen; step++) printf("%s%.9g", step ? "," : "", chosen[step]);
        printf("]}\n");
        free(chosen);
    } else {
        // One batch of every id (the prompt-processing path), or with
        // --sequential one id per llama_decode (the decode path).
        struct llama_batch batch = llama_batch_init(n_ids, 0, 1);
        float *seq_logits = NULL;
        if (sequential) {
            seq_logits = malloc(sizeof(float) * (size_t)n_vocab * n_ids);
            for (int i = 0; i < n_ids; i++) {
                struct llama_batch one = llama_batch_get_one(&ids[i], 1);
                if (llama_decode(ctx, one)) die("llama_decode failed");
                memcpy(seq_logits + (size_t)i * n_vocab, llama_get_logits_ith(ctx, -1), sizeof(float) * n_vocab);
            }
        } else {
            for (int i = 0; i < n_ids; i++) {
                batch.token[i] = ids[i];
                batch.pos[i] = i;
                batch.n_seq_id[i] = 1;
                batch.seq_id[i][0] = 0;
                batch.logits[i] = 1;
            }
            batch.n_tokens = n_ids;
            if (llama_decode(ctx, batch)) die("llama_decode failed");
        }
        FILE *lf = NULL;
        if (logits_out && !(lf = fopen(logits_out, "wb"))) die("cannot open --logits-out");
        printf("{\"ok\":true,\"positions\":[");
        for (int i = 0; i < n_ids; i++) {
            const float *logits = sequential ? seq_logits + (size_t)i * n_vocab : llama_get_logits_ith(ctx, i);
            if (lf) fwrite(logits, sizeof(float), n_vocab, lf);
            log_softmax(logits, n_vocab, lp);
            printf("%s{\"argmax\":%d", i ? "," : "", argmax(logits, n_vocab));
            if (i + 1 < n_ids) printf(",\"next\":%d,\"next_logprob\":%.9g", ids[i + 1], lp[ids[i + 1]]);
            printf(",\"top\":");
            print_top(lp, n_vocab, top);
            printf("}");
        }
        printf("]}\n");
        if (lf) fclose(lf);
        llama_batch_free(batch);
        free(seq_logits);
    }
    free(lp);
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
