// ggufrewrite: reads a GGUF with llama.cpp's own GGUF reader and writes it
// back the way llama.cpp's tools write GGUF files (llama_model_quantize:
// gguf_get_meta_data for the header, then each tensor's data padded with
// zeros to the context's alignment), through the gguf_* API of the pinned
// libggml-base. Tests use it to check that gguftool reads, packs and
// rebuilds files written by llama.cpp byte for byte.
//
//   ggufrewrite IN.gguf OUT.gguf
//
// Why not gguf_write_to_file: in llama.cpp v0.4.0 it crashes on a context
// read from a file (the tensor infos keep an uninitialised buffer pointer),
// and on a new context general.alignment set with gguf_set_val_u32 changes
// the key but not the layout, giving a file llama.cpp itself refuses. A
// context read from a file does carry the file's alignment.
#define TOOL "ggufrewrite"
#include "helpers.h"

#include "gguf.h"

int main(int argc, char **argv) {
    if (argc != 3) die("usage: ggufrewrite IN.gguf OUT.gguf");
    struct ggml_context *ctx = NULL;
    struct gguf_init_params p = {.no_alloc = false, .ctx = &ctx};
    struct gguf_context *g = gguf_init_from_file(argv[1], p);
    if (!g) die("llama.cpp cannot read the input");
    FILE *out = fopen(argv[2], "wb");
    if (!out) die("cannot create the output");
    size_t meta = gguf_get_meta_size(g);
    void *buf = malloc(meta);
    gguf_get_meta_data(g, buf);
    if (fwrite(buf, 1, meta, out) != meta) die("short write");
    size_t align = gguf_get_alignment(g);
    static const char zeros[4096];
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        struct ggml_tensor *t = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
        size_t n = ggml_nbytes(t);
        if (n && fwrite(t->data, 1, n, out) != n) die("short write");
        size_t pad = (align - n % align) % align;
        if (pad && fwrite(zeros, 1, pad, out) != pad) die("short write");
    }
    if (fclose(out)) die("cannot close the output");
    gguf_free(g);
    ggml_free(ctx);
    return 0;
}
