// File and timing helpers shared by the C drivers of llama.cpp in this
// directory. Each driver defines TOOL (its name, for messages) before
// including this header.
#pragma once
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L // clock_gettime
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ggml.h"

static inline void die(const char *msg) {
    fprintf(stderr, "%s: %s\n", TOOL, msg);
    exit(1);
}

static inline void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open input");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(size > 0 ? size : 1);
    if (size > 0 && fread(buf, 1, size, f) != (size_t)size) die("short read");
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static inline void write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot create output");
    if (n && fwrite(buf, 1, n, f) != n) die("short write");
    fclose(f);
}

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// parse_type reads a ggml type id, refusing retired and unknown ones.
static inline enum ggml_type parse_type(const char *s) {
    int t = atoi(s);
    if (t < 0 || t >= GGML_TYPE_COUNT || ggml_blck_size((enum ggml_type)t) == 0) die("bad type");
    return (enum ggml_type)t;
}
