//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// Vector dequantizers (ggml's to_float) for the types that resident tiers
// and GPU backends convert most, bit for bit the Go dequantizers they
// replace in the codec table: levels convert exactly to float32, F16
// scales exactly with VCVTPH2PS, and every product and difference is the
// reference's single rounded VMULPS or VSUBPS (never fused).

//go:noescape
func dequantQ8_0AVX2(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ4_0AVX2(dst *float32, src *byte, nb int)

//go:noescape
func dequantMXFP4AVX2(dst *float32, src *byte, nb int, levels *[16]int8, scales *[256]float32)

//go:noescape
func dequantIQ4_XSAVX2(dst *float32, src *byte, nb int, levels *[16]int8)

//go:noescape
func dequantQ4_KAVX2(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ5_KAVX2(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ6_KAVX2(dst *float32, src *byte, nb int)

// dequantBlocks grows dst by the values of src's whole blocks (bb bytes,
// n values each) and has kernel write them; it returns dst unchanged when
// src has no block.
func dequantBlocks(dst []float32, src []byte, bb, n int, kernel func(out *float32, in *byte, nb int)) []float32 {
	nb := len(src) / bb
	if nb == 0 {
		return dst
	}
	_ = src[nb*bb-1]
	dst, out := growFloats(dst, nb*n)
	kernel(unsafe.SliceData(out), unsafe.SliceData(src), nb)
	return dst
}

// dequantizeQ8_0AVX2 is dequantizeQ8_0.
func dequantizeQ8_0AVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockQ8_0, 32, dequantQ8_0AVX2)
}

// dequantizeQ4_0AVX2 is dequantizeQ4_0.
func dequantizeQ4_0AVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockQ4_0, 32, dequantQ4_0AVX2)
}

// dequantizeMXFP4AVX2 is dequantizeMXFP4.
func dequantizeMXFP4AVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockMXFP4, 32, func(out *float32, in *byte, nb int) {
		dequantMXFP4AVX2(out, in, nb, &kvaluesMXFP4, &e8m0Half)
	})
}

// dequantizeIQ4_XSAVX2 is dequantizeIQ4_XS.
func dequantizeIQ4_XSAVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockIQ4XS, qkIQ, func(out *float32, in *byte, nb int) {
		dequantIQ4_XSAVX2(out, in, nb, &kvaluesIQ4NL)
	})
}

// dequantizeQ4_KAVX2 is dequantizeQ4_K.
func dequantizeQ4_KAVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockQ4K, qkK, dequantQ4_KAVX2)
}

// dequantizeQ5_KAVX2 is dequantizeQ5_K.
func dequantizeQ5_KAVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockQ5K, qkK, dequantQ5_KAVX2)
}

// dequantizeQ6_KAVX2 is dequantizeQ6_K.
func dequantizeQ6_KAVX2(dst []float32, src []byte) []float32 {
	return dequantBlocks(dst, src, blockQ6K, qkK, dequantQ6_KAVX2)
}

// vectorDequantizers are this file's dequantizers, by type.
var vectorDequantizers = map[gguf.Type]dequantizeFunc{
	gguf.TypeQ8_0:   dequantizeQ8_0AVX2,
	gguf.TypeQ4_0:   dequantizeQ4_0AVX2,
	gguf.TypeMXFP4:  dequantizeMXFP4AVX2,
	gguf.TypeIQ4_XS: dequantizeIQ4_XSAVX2,
	gguf.TypeQ4_K:   dequantizeQ4_KAVX2,
	gguf.TypeQ5_K:   dequantizeQ5_KAVX2,
	gguf.TypeQ6_K:   dequantizeQ6_KAVX2,
}

// init puts the vector dequantizers in the codec table.
func init() {
	if !useAVX2() {
		return
	}
	for t, f := range vectorDequantizers {
		c := codecs[t]
		c.dequantize = f
		codecs[t] = c
	}
}
