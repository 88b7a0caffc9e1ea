// quantref: llama.cpp's own block codecs (libggml-base from the pinned
// node-llama-cpp package), driven from files, as the reference for
// gguftool's gguf/quant package.
//
//   quantref quantize TYPE N_PER_ROW IN.f32 OUT.bin [IMATRIX.f32]
//       ggml_quantize_chunk over IN's rows (with the importance matrix, one
//       float per column, when given)
//   quantref dequantize TYPE IN.bin OUT.f32
//       the type's to_float over all of IN
//   quantref validate TYPE IN.bin
//       ggml_validate_row_data; prints 1 (valid) or 0
//   quantref bench-dequantize TYPE IN.bin REPS
//       prints the seconds REPS passes of to_float took
//   quantref bench-quantize TYPE N_PER_ROW IN.f32 REPS
//       prints the seconds REPS passes of ggml_quantize_chunk took
//
// TYPE is a ggml type id. Errors go to stderr with exit status 1.
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOOL "quantref"
#include "helpers.h"

// Q8_K is ggml's activation format: ggml_quantize_chunk and the type
// traits do not handle it, but libggml-base exports its reference codecs.
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void dequantize_row_q8_K(const void *x, float *y, int64_t k);

int main(int argc, char **argv) {
    if (argc < 3) die("usage: quantref quantize|dequantize|validate|bench-* TYPE ...");
    const char *mode = argv[1];
    enum ggml_type type = parse_type(argv[2]);
    const struct ggml_type_traits *tr = ggml_get_type_traits(type);

    if (!strcmp(mode, "quantize") || !strcmp(mode, "bench-quantize")) {
        int bench = mode[0] == 'b';
        if (argc < 5 + bench) die("quantize needs N_PER_ROW IN OUT");
        int64_t n_per_row = atoll(argv[3]);
        size_t nbytes;
        float *src = read_file(argv[4], &nbytes);
        int64_t n = (int64_t)(nbytes / sizeof(float));
        if (n_per_row <= 0 || n % n_per_row) die("input is not whole rows");
        int64_t nrows = n / n_per_row;
        float *imatrix = NULL;
        if (!bench && argc > 6) {
            size_t ib;
            imatrix = read_file(argv[6], &ib);
            if (ib != (size_t)n_per_row * sizeof(float)) die("imatrix must hold one float per column");
        }
        size_t out_size = ggml_row_size(type, n_per_row) * nrows;
        void *dst = malloc(out_size ? out_size : 1);
        if (bench) {
            int reps = atoi(argv[5]);
            double t0 = now();
            for (int r = 0; r < reps; r++) ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, NULL);
            printf("%.9f\n", now() - t0);
            return 0;
        }
        size_t got = type == GGML_TYPE_Q8_K ? (quantize_row_q8_K_ref(src, dst, n), out_size)
                                            : ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, imatrix);
        if (got != out_size) die("ggml_quantize_chunk wrote an unexpected size");
        write_file(argv[5], dst, out_size);
        return 0;
    }
    if (!strcmp(mode, "dequantize") || !strcmp(mode, "bench-dequantize")) {
        if (argc < 5) die("dequantize needs IN OUT|REPS");
        size_t nbytes;
        void *src = read_file(argv[3], &nbytes);
        size_t bs = ggml_type_size(type);
        if (nbytes % bs) die("input is not whole blocks");
        int64_t n = (int64_t)(nbytes / bs) * ggml_blck_size(type);
        float *dst = malloc(sizeof(float) * (n ? n : 1));
        if (type == GGML_TYPE_F32) {
            memcpy(dst, src, nbytes); // F32 has no to_float: it is the identity
        } else if (type == GGML_TYPE_Q8_K) {
            dequantize_row_q8_K(src, dst, n);
        } else if (!tr->to_float) {
            die("type has no to_float");
        }
        if (mode[0] == 'b') {
            int reps = atoi(argv[4]);
            double t0 = now();
            for (int r = 0; r < reps && type != GGML_TYPE_F32; r++) {
                if (type == GGML_TYPE_Q8_K) dequantize_row_q8_K(src, dst, n);
                else tr->to_float(src, dst, n);
            }
            printf("%.9f\n", now() - t0);
            return 0;
        }
        if (type == GGML_TYPE_Q8_K) dequantize_row_q8_K(src, dst, n);
        else if (type != GGML_TYPE_F32) tr->to_float(src, dst, n);
        write_file(argv[4], dst, sizeof(float) * n);
        return 0;
    }
    if (!strcmp(mode, "validate")) {
        if (argc < 4) die("validate needs IN");
        size_t nbytes;
        void *src = read_file(argv[3], &nbytes);
        printf("%d\n", ggml_validate_row_data(type, src, nbytes) ? 1 : 0);
        return 0;
    }
    die("unknown mode");
    return 1;
}
