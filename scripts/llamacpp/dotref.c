// dotref: the dot products and activation quantizers of llama.cpp's CPU
// backend, the haswell variant (libggml-cpu-haswell from the pinned
// node-llama-cpp package, loaded with dlopen), driven from files, as the
// reference for gguftool's quant.VecDot and quant.QuantizeActivations.
//
//   dotref quantize VT VARIANT N_PER_ROW IN.f32 OUT.bin
//       converts IN row by row to the activation type VT, as the backend's
//       from_float does before a matrix multiplication
//   dotref dot TYPE VARIANT N W.bin A.bin OUT.f32
//       for each row of N values of W (type TYPE), its dot product with
//       the same row of A (in TYPE's vec_dot_type); one float per row
//   dotref bench-dot TYPE N W.bin A.bin REPS
//       prints the seconds REPS passes of the simd dot product over all
//       rows took
//   dotref bench-dequantize TYPE IN.bin REPS
//       prints the seconds REPS passes of the type's conversion to float
//       took: ggml-base's to_float (dequantize_row_*), which the CPU
//       backend calls for the quantized types, or the backend's own
//       ggml_cpu_fp16_to_fp32 and ggml_cpu_bf16_to_fp32 for F16 and BF16
//
// VARIANT simd is what the haswell backend runs (ggml_vec_dot_q4_0_q8_0,
// quantize_row_q8_0, ggml_cpu_fp32_to_fp16, …); generic is the portable C
// compiled into the same library (ggml_vec_dot_q4_0_q8_0_generic,
// quantize_row_q8_0_generic, ggml-base's ggml_fp32_to_fp16_row, …). Types
// without an x86 kernel export the generic code under the plain name
// (arch-fallback.h), so for them both variants run it. F32, F16 and BF16
// have no generic dot product.
//
// TYPE and VT are ggml type ids. Errors go to stderr with exit status 1.
#define _GNU_SOURCE // RTLD_DEFAULT
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOOL "dotref"
#include "helpers.h"
#include "ggml-cpu.h"

#ifndef CPU_LIB
#error "build with -DCPU_LIB=\"/path/to/libggml-cpu-haswell.so\""
#endif

static int parse_generic(const char *s) {
    if (!strcmp(s, "simd")) return 0;
    if (!strcmp(s, "generic")) return 1;
    die("VARIANT must be simd or generic");
    return 0;
}

static void *cpu;

static void *sym(const char *name) {
    void *p = dlsym(cpu, name);
    if (!p) {
        fprintf(stderr, "dotref: %s not found\n", name);
        exit(1);
    }
    return p;
}

static void copy_f32(const float *x, void *y, int64_t n) { memcpy(y, x, n * sizeof(float)); }
static void copy_to_f32(const void *x, float *y, int64_t n) { memcpy(y, x, n * sizeof(float)); }

// from_float returns VT's conversion from float.
static ggml_from_float_t from_float(enum ggml_type vt, int generic) {
    char name[64];
    switch (vt) {
    case GGML_TYPE_F32:
        return copy_f32;
    case GGML_TYPE_F16:
        return generic ? (ggml_from_float_t)ggml_fp32_to_fp16_row : (ggml_from_float_t)sym("ggml_cpu_fp32_to_fp16");
    case GGML_TYPE_BF16:
        return generic ? (ggml_from_float_t)ggml_fp32_to_bf16_row_ref : (ggml_from_float_t)sym("ggml_cpu_fp32_to_bf16");
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q8_1:
    case GGML_TYPE_Q8_K:
        snprintf(name, sizeof name, "quantize_row_%s%s", ggml_type_name(vt), generic ? "_generic" : "");
        return (ggml_from_float_t)sym(name);
    default:
        die("not an activation type");
        return NULL;
    }
}

// vec_dot returns TYPE's dot product and sets *vt to its activation type.
static ggml_vec_dot_t vec_dot(enum ggml_type type, int generic, enum ggml_type *vt) {
    const struct ggml_type_traits_cpu *(*traits)(enum ggml_type) = sym("ggml_get_type_traits_cpu");
    const struct ggml_type_traits_cpu *tr = traits(type);
    if (!tr->vec_dot) die("type has no vec_dot");
    *vt = tr->vec_dot_type;
    if (!generic) return tr->vec_dot;
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) die("no generic dot product for float types");
    char name[64];
    snprintf(name, sizeof name, "ggml_vec_dot_%s_%s_generic", ggml_type_name(type), ggml_type_name(*vt));
    void *p = dlsym(cpu, name);
    if (!p) {
        snprintf(name, sizeof name, "ggml_vec_dot_%s_%s", ggml_type_name(type), ggml_type_name(*vt));
        p = sym(name);
    }
    return (ggml_vec_dot_t)p;
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage: dotref quantize|dot|bench-dot|bench-dequantize TYPE ...");
    cpu = dlopen(CPU_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!cpu) {
        fprintf(stderr, "dotref: %s\n", dlerror());
        return 1;
    }
    // Fills the fp16 table the generic kernels read their scales through.
    ((void (*)(void))sym("ggml_cpu_init"))();

    const char *mode = argv[1];
    enum ggml_type type = parse_type(argv[2]);

    if (!strcmp(mode, "quantize")) {
        if (argc < 7) die("quantize needs VT VARIANT N_PER_ROW IN OUT");
        ggml_from_float_t f = from_float(type, parse_generic(argv[3]));
        int64_t n_per_row = atoll(argv[4]);
        size_t nbytes;
        float *src = read_file(argv[5], &nbytes);
        int64_t n = (int64_t)(nbytes / sizeof(float));
        if (n_per_row <= 0 || n % n_per_row || n_per_row % ggml_blck_size(type)) die("input is not whole rows of whole blocks");
        size_t row = ggml_row_size(type, n_per_row);
        // Zeroed, because quantize_row_q8_K leaves an all-zero block's bsums unwritten.
        char *dst = calloc(n / n_per_row, row ? row : 1);
        for (int64_t r = 0; r < n / n_per_row; r++) f(src + r * n_per_row, dst + r * row, n_per_row);
        write_file(argv[6], dst, row * (n / n_per_row));
        return 0;
    }
    if (!strcmp(mode, "dot") || !strcmp(mode, "bench-dot")) {
        int bench = mode[0] == 'b';
        if (argc < 7 + !bench) die("dot needs [VARIANT] N W A OUT|REPS");
        int arg = 3;
        int generic = bench ? 0 : parse_generic(argv[arg++]);
        enum ggml_type vt;
        ggml_vec_dot_t dot = vec_dot(type, generic, &vt);
        int n = atoi(argv[arg++]);
        size_t wb, ab;
        char *w = read_file(argv[arg++], &wb);
        char *a = read_file(argv[arg++], &ab);
        size_t wrow = ggml_row_size(type, n), arow = ggml_row_size(vt, n);
        if (n <= 0 || n % ggml_blck_size(type) || n % ggml_blck_size(vt)) die("N is not a whole number of blocks");
        if (wb % wrow || ab % arow || wb / wrow != ab / arow) die("W and A do not hold the same number of rows");
        size_t rows = wb / wrow;
        float *out = calloc(rows ? rows : 1, sizeof(float));
        if (bench) {
            int reps = atoi(argv[arg]);
            double t0 = now();
            for (int r = 0; r < reps; r++)
                for (size_t i = 0; i < rows; i++) dot(n, &out[i], 0, w + i * wrow, 0, a + i * arow, 0, 1);
            printf("%.9f\n", now() - t0);
            return 0;
        }
        for (size_t i = 0; i < rows; i++) dot(n, &out[i], 0, w + i * wrow, 0, a + i * arow, 0, 1);
        write_file(argv[arg], out, rows * sizeof(float));
        return 0;
    }
    if (!strcmp(mode, "bench-dequantize")) {
        if (argc < 5) die("bench-dequantize needs IN REPS");
        size_t nbytes;
        void *src = read_file(argv[3], &nbytes);
        size_t bs = ggml_type_size(type);
        if (nbytes % bs) die("input is not whole blocks");
        int64_t n = (int64_t)(nbytes / bs) * ggml_blck_size(type);
        float *dst = malloc(sizeof(float) * (n ? n : 1));
        void (*to_float)(const void *, float *, int64_t);
        switch (type) {
        case GGML_TYPE_F32: to_float = copy_to_f32; break;
        case GGML_TYPE_F16: to_float = sym("ggml_cpu_fp16_to_fp32"); break;
        case GGML_TYPE_BF16: to_float = sym("ggml_cpu_bf16_to_fp32"); break;
        default:
            to_float = ggml_get_type_traits(type)->to_float;
            if (!to_float) { // Q8_K: its decoder is exported but not in the traits
                char name[64];
                snprintf(name, sizeof name, "dequantize_row_%s", ggml_type_name(type));
                to_float = dlsym(RTLD_DEFAULT, name);
            }
            if (!to_float) die("type has no to_float");
        }
        int reps = atoi(argv[4]);
        double t0 = now();
        for (int r = 0; r < reps; r++) to_float(src, dst, n);
        printf("%.9f\n", now() - t0);
        return 0;
    }
    die("unknown mode");
    return 1;
}
