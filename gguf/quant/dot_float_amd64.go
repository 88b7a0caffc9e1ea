//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// Vector kernels for the 16-bit float types: their dot products
// (ggml_vec_dot_f16/bf16) and their conversions to float32
// (ggml_cpu_fp16_to_fp32, ggml_cpu_bf16_to_fp32), bit for bit the Go
// kernels they replace.

//go:noescape
func dotF16AVX2(x, y *byte, n int) float32

//go:noescape
func dotBF16AVX2(x, y *byte, n int) float32

//go:noescape
func f16ToF32AVX2(dst *float32, src *byte, n int)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *byte, n int)

// vecDotF16AVX2 is vecDotF16 on n values (a block is one value).
func vecDotF16AVX2(w, a []byte, n int) float32 {
	if n == 0 {
		return 0
	}
	_ = w[2*n-1]
	_ = a[2*n-1]
	return dotF16AVX2(unsafe.SliceData(w), unsafe.SliceData(a), n)
}

// vecDotBF16AVX2 is vecDotBF16 on n values.
func vecDotBF16AVX2(w, a []byte, n int) float32 {
	if n == 0 {
		return 0
	}
	_ = w[2*n-1]
	_ = a[2*n-1]
	return dotBF16AVX2(unsafe.SliceData(w), unsafe.SliceData(a), n)
}

// dequantizeF16AVX2 is dequantizeF16: the assembly converts the runs of
// eight, F16ToF32 the last few values.
func dequantizeF16AVX2(dst []float32, src []byte) []float32 {
	dst, out := growFloats(dst, len(src)/2)
	hw := len(out) &^ 7
	if hw > 0 {
		f16ToF32AVX2(unsafe.SliceData(out), unsafe.SliceData(src), hw)
	}
	for i := hw; i < len(out); i++ {
		out[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
	return dst
}

// dequantizeBF16AVX2 is dequantizeBF16, the same way.
func dequantizeBF16AVX2(dst []float32, src []byte) []float32 {
	dst, out := growFloats(dst, len(src)/2)
	hw := len(out) &^ 7
	if hw > 0 {
		bf16ToF32AVX2(unsafe.SliceData(out), unsafe.SliceData(src), hw)
	}
	for i := hw; i < len(out); i++ {
		out[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
	return dst
}

// growFloats extends dst by n values and returns it with the new part.
func growFloats(dst []float32, n int) (all, added []float32) {
	all = slices.Grow(dst, n)[:len(dst)+n]
	return all, all[len(dst):]
}

// init registers the F16 and BF16 kernels, and their converters in the
// codec table (Dequantize; DotF32 calls the Go converters directly).
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeF16].fn = vecDotF16AVX2
	dotKernels[gguf.TypeBF16].fn = vecDotBF16AVX2
	for t, f := range map[gguf.Type]dequantizeFunc{gguf.TypeF16: dequantizeF16AVX2, gguf.TypeBF16: dequantizeBF16AVX2} {
		c := codecs[t]
		c.dequantize = f
		codecs[t] = c
	}
}
