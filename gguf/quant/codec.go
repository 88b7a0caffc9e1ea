package quant

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
)

// dequantizeFunc decodes src, which holds whole blocks, appending the
// values to dst (ggml's to_float / dequantize_row_*).
type dequantizeFunc func(dst []float32, src []byte) []float32

// quantizeRowFunc encodes one row x (a whole number of blocks), appending
// to dst. weights is the importance matrix for the row's columns
// (len(weights) == len(x)), or nil for the reference path: exactly what
// ggml_quantize_chunk does for one row.
type quantizeRowFunc func(dst []byte, x, weights []float32) []byte

type codec struct {
	dequantize dequantizeFunc
	quantize   quantizeRowFunc
	// needsImatrix: llama.cpp refuses to quantize to the type without one
	// (ggml_quantize_requires_imatrix).
	needsImatrix bool
}

// codecs maps each type to its codec; a nil function is not supported.
var codecs = map[gguf.Type]codec{
	gguf.TypeF32:     {dequantize: dequantizeF32, quantize: quantizeRowF32},
	gguf.TypeF16:     {dequantize: dequantizeF16, quantize: quantizeRowF16},
	gguf.TypeBF16:    {dequantize: dequantizeBF16, quantize: quantizeRowBF16},
	gguf.TypeQ8_0:    {dequantize: dequantizeQ8_0, quantize: quantizeRowQ8_0},
	gguf.TypeMXFP4:   {dequantize: dequantizeMXFP4, quantize: quantizeRowMXFP4},
	gguf.TypeQ4_0:    {dequantize: dequantizeQ4_0, quantize: quantizeRowQ4_0},
	gguf.TypeQ4_1:    {dequantize: dequantizeQ4_1, quantize: quantizeRowQ4_1},
	gguf.TypeQ5_0:    {dequantize: dequantizeQ5_0, quantize: quantizeRowQ5_0},
	gguf.TypeQ5_1:    {dequantize: dequantizeQ5_1, quantize: quantizeRowQ5_1},
	gguf.TypeQ2_K:    {dequantize: dequantizeQ2_K, quantize: quantizeRowQ2_K},
	gguf.TypeQ3_K:    {dequantize: dequantizeQ3_K, quantize: quantizeRowQ3_K},
	gguf.TypeQ4_K:    {dequantize: dequantizeQ4_K, quantize: quantizeRowQ4_K},
	gguf.TypeQ5_K:    {dequantize: dequantizeQ5_K, quantize: quantizeRowQ5_K},
	gguf.TypeQ6_K:    {dequantize: dequantizeQ6_K, quantize: quantizeRowQ6_K},
	gguf.TypeQ8_K:    {dequantize: dequantizeQ8_K, quantize: quantizeRowQ8_K},
	gguf.TypeIQ1_S:   {dequantize: dequantizeIQ1_S, needsImatrix: true},
	gguf.TypeIQ1_M:   {dequantize: dequantizeIQ1_M, needsImatrix: true},
	gguf.TypeIQ2_XXS: {dequantize: dequantizeIQ2_XXS, needsImatrix: true},
	gguf.TypeIQ2_XS:  {dequantize: dequantizeIQ2_XS, needsImatrix: true},
	gguf.TypeIQ2_S:   {dequantize: dequantizeIQ2_S},
	gguf.TypeIQ3_XXS: {dequantize: dequantizeIQ3_XXS},
	gguf.TypeIQ3_S:   {dequantize: dequantizeIQ3_S},
	gguf.TypeIQ4_NL:  {dequantize: dequantizeIQ4_NL, quantize: quantizeRowIQ4_NL},
	gguf.TypeIQ4_XS:  {dequantize: dequantizeIQ4_XS, quantize: quantizeRowIQ4_XS},
	gguf.TypeTQ1_0:   {dequantize: dequantizeTQ1_0},
	gguf.TypeTQ2_0:   {dequantize: dequantizeTQ2_0},
	gguf.TypeNVFP4:   {dequantize: dequantizeNVFP4},
	gguf.TypeQ1_0:    {dequantize: dequantizeQ1_0},
	gguf.TypeQ2_0:    {dequantize: dequantizeQ2_0},
}

// CanQuantize reports whether Quantize supports type t.
func CanQuantize(t gguf.Type) bool { return codecs[t].quantize != nil }

// CanDequantize reports whether Dequantize supports type t.
func CanDequantize(t gguf.Type) bool { return codecs[t].dequantize != nil }

// RequiresImatrix reports whether llama.cpp quantizes to t only with an
// importance matrix.
func RequiresImatrix(t gguf.Type) bool { return codecs[t].needsImatrix }

// Quantize appends the reference encoding of x as type t to dst, as
// ggml_quantize_chunk does without an importance matrix. len(x) must be a
// multiple of t's block size.
func Quantize(dst []byte, t gguf.Type, x []float32) ([]byte, error) {
	return QuantizeRows(dst, t, x, len(x), nil)
}

// QuantizeRows appends the encoding of x, which holds rows of nPerRow
// values, as type t, weighted by imatrix (one value per column) when it
// is not nil: ggml_quantize_chunk(t, x, dst, 0, len(x)/nPerRow, nPerRow,
// imatrix), byte for byte.
func QuantizeRows(dst []byte, t gguf.Type, x []float32, nPerRow int, imatrix []float32) ([]byte, error) {
	c := codecs[t]
	if c.quantize == nil {
		return dst, fmt.Errorf("quant: quantizing to %s is not supported", t)
	}
	bs := int(t.BlockSize())
	switch {
	case nPerRow <= 0 && len(x) > 0, nPerRow > 0 && len(x)%nPerRow != 0:
		return dst, fmt.Errorf("quant: %d values are not whole rows of %d", len(x), nPerRow)
	case nPerRow%bs != 0:
		return dst, fmt.Errorf("quant: a row of %d values is not a whole number of %s blocks of %d", nPerRow, t, bs)
	case imatrix != nil && len(imatrix) != nPerRow:
		return dst, fmt.Errorf("quant: importance matrix has %d values for rows of %d", len(imatrix), nPerRow)
	case imatrix == nil && c.needsImatrix:
		return dst, fmt.Errorf("quant: %s needs an importance matrix", t)
	}
	for r := 0; r < len(x); r += nPerRow {
		dst = c.quantize(dst, x[r:r+nPerRow], imatrix)
	}
	return dst, nil
}

// Dequantize decodes src, which must hold whole blocks of type t,
// appending the values to dst.
func Dequantize(dst []float32, t gguf.Type, src []byte) ([]float32, error) {
	c := codecs[t]
	if c.dequantize == nil {
		return dst, fmt.Errorf("quant: dequantizing %s is not supported", t)
	}
	bb := t.BlockBytes()
	if int64(len(src))%bb != 0 {
		return dst, fmt.Errorf("quant: %d bytes are not a whole number of %s blocks of %d bytes", len(src), t, bb)
	}
	return c.dequantize(dst, src), nil
}
