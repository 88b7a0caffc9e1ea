// Package quant holds the ggml block codecs: scalar conversions (F16,
// BF16, E8M0) and per-type row quantizers and dequantizers that match
// llama.cpp's reference implementations (ggml/src/ggml-quants.c) byte for
// byte.
//
// Products are written with explicit float32 conversions so the Go
// compiler cannot fuse them into FMA instructions, which would change
// rounding and break byte equality with the C reference.
package quant
