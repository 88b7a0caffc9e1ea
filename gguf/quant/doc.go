// Package quant holds the ggml block codecs: scalar conversions (F16,
// BF16, E8M0) and per-type row quantizers and dequantizers that match
// llama.cpp's reference implementations (ggml/src/ggml-quants.c) byte for
// byte.
//
// Dotter multiplies weight rows with activation rows quantized as ggml
// quantizes them (QuantizeActivations): one row pair (Dot), four weight
// rows against one activation row (Dot4), four against eight (DotTile) or
// against up to 32 (DotTileSpan), at the kernel level picked at start-up
// (Kernels: generic Go, avx2, avx512). Every kernel at every level returns
// the Go reference's bits for every pair of rows, so a batch's results
// are each row's own.
//
// Products are written with explicit float32 conversions so the Go
// compiler cannot fuse them into FMA instructions, which would change
// rounding and break byte equality with the C reference.
package quant
