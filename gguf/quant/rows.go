package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
)

// Block sizes of the types this file codes.
const (
	qk8_0      = 32
	blockQ8_0  = 34
	qkMXFP4    = 32
	blockMXFP4 = 17
)

// kvaluesMXFP4 is ggml's e2m1 table, doubled (ggml-common.h).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// CanQuantize reports whether Quantize supports type t.
func CanQuantize(t gguf.Type) bool {
	switch t {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeMXFP4:
		return true
	}
	return false
}

// Quantize appends the encoding of x as type t to dst. len(x) must be a
// multiple of t's block size.
func Quantize(dst []byte, t gguf.Type, x []float32) ([]byte, error) {
	if bs := t.BlockSize(); bs == 0 || int64(len(x))%bs != 0 {
		return dst, fmt.Errorf("quant: %d values are not a whole number of %s blocks", len(x), t)
	}
	le := binary.LittleEndian
	switch t {
	case gguf.TypeF32:
		for _, v := range x {
			dst = le.AppendUint32(dst, math.Float32bits(v))
		}
	case gguf.TypeF16:
		for _, v := range x {
			dst = le.AppendUint16(dst, F32ToF16(v))
		}
	case gguf.TypeBF16:
		for _, v := range x {
			dst = le.AppendUint16(dst, F32ToBF16(v))
		}
	case gguf.TypeQ8_0:
		for b := 0; b < len(x); b += qk8_0 {
			dst = quantizeBlockQ8_0(dst, x[b:b+qk8_0])
		}
	case gguf.TypeMXFP4:
		for b := 0; b < len(x); b += qkMXFP4 {
			dst = quantizeBlockMXFP4(dst, x[b:b+qkMXFP4])
		}
	default:
		return dst, fmt.Errorf("quant: quantizing to %s is not supported", t)
	}
	return dst, nil
}

// quantizeBlockQ8_0 is quantize_row_q8_0_ref for one block.
func quantizeBlockQ8_0(dst []byte, x []float32) []byte {
	var amax float32
	for _, v := range x {
		a := abs32(v)
		if !(amax > a) { // MAX(amax, a) as ggml writes it, NaN included
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
	for _, v := range x {
		dst = append(dst, byte(int8(roundf(float32(v*id)))))
	}
	return dst
}

// quantizeBlockMXFP4 is quantize_row_mxfp4_ref for one block.
func quantizeBlockMXFP4(dst []byte, x []float32) []byte {
	var amax float32
	for _, v := range x {
		if amax < abs32(v) {
			amax = abs32(v)
		}
	}
	var e uint8
	if amax > 0 {
		// log2f rounds up just below powers of two; float32(log2(float64))
		// reproduces it, the float's exponent bits do not.
		e = uint8(int32(float32(math.Floor(float64(float32(math.Log2(float64(amax)))))) - 2 + 127))
	}
	d := E8M0ToF32Half(e)
	dst = append(dst, e)
	for j := 0; j < qkMXFP4/2; j++ {
		lo := bestIndexMXFP4(x[j], d)
		hi := bestIndexMXFP4(x[j+qkMXFP4/2], d)
		dst = append(dst, lo|hi<<4)
	}
	return dst
}

func bestIndexMXFP4(x, e float32) byte {
	best := 0
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*e) - x)
	for i := 1; i < 16; i++ {
		err := abs32(float32(float32(kvaluesMXFP4[i])*e) - x)
		if err < bestErr {
			best, bestErr = i, err
		}
	}
	return byte(best)
}

// Dequantize decodes src, which holds whole blocks of type t, appending
// the values to dst.
func Dequantize(dst []float32, t gguf.Type, src []byte) ([]float32, error) {
	bb := t.BlockBytes()
	if bb == 0 || int64(len(src))%bb != 0 {
		return dst, fmt.Errorf("quant: %d bytes are not a whole number of %s blocks", len(src), t)
	}
	le := binary.LittleEndian
	switch t {
	case gguf.TypeF32:
		for i := 0; i < len(src); i += 4 {
			dst = append(dst, math.Float32frombits(le.Uint32(src[i:])))
		}
	case gguf.TypeF16:
		for i := 0; i < len(src); i += 2 {
			dst = append(dst, F16ToF32(le.Uint16(src[i:])))
		}
	case gguf.TypeBF16:
		for i := 0; i < len(src); i += 2 {
			dst = append(dst, BF16ToF32(le.Uint16(src[i:])))
		}
	case gguf.TypeQ8_0:
		for b := 0; b < len(src); b += blockQ8_0 {
			d := F16ToF32(le.Uint16(src[b:]))
			for _, q := range src[b+2 : b+blockQ8_0] {
				dst = append(dst, float32(int8(q))*d)
			}
		}
	case gguf.TypeMXFP4:
		for b := 0; b < len(src); b += blockMXFP4 {
			d := E8M0ToF32Half(src[b])
			qs := src[b+1 : b+blockMXFP4]
			for _, q := range qs {
				dst = append(dst, float32(kvaluesMXFP4[q&15])*d)
			}
			for _, q := range qs {
				dst = append(dst, float32(kvaluesMXFP4[q>>4])*d)
			}
		}
	default:
		return dst, fmt.Errorf("quant: dequantizing %s is not supported", t)
	}
	return dst, nil
}
