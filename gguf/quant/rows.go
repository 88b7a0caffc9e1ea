package quant

import (
	"encoding/binary"
	"math"
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

func quantizeRowF32(dst []byte, x, _ []float32) []byte {
	for _, v := range x {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst
}

func quantizeRowF16(dst []byte, x, _ []float32) []byte {
	for _, v := range x {
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(v))
	}
	return dst
}

func quantizeRowBF16(dst []byte, x, _ []float32) []byte {
	for _, v := range x {
		dst = binary.LittleEndian.AppendUint16(dst, F32ToBF16(v))
	}
	return dst
}

// quantizeRowQ8_0 ignores the importance matrix, as llama.cpp does.
func quantizeRowQ8_0(dst []byte, x, _ []float32) []byte {
	for b := 0; b < len(x); b += qk8_0 {
		dst = quantizeBlockQ8_0(dst, x[b:b+qk8_0])
	}
	return dst
}

// quantizeRowMXFP4 ignores the importance matrix, as llama.cpp does. The
// vector kernel, where there is one, quantizes runs of blocks and stops
// at a block it leaves to quantizeBlockMXFP4 (see mxfp4_fast.go).
func quantizeRowMXFP4(dst []byte, x, _ []float32) []byte {
	for b := 0; b < len(x); {
		var n int
		dst, n = quantizeBlocksMXFP4Vec(dst, x[b:])
		if b += n * qkMXFP4; b < len(x) {
			dst = quantizeBlockMXFP4(dst, x[b:b+qkMXFP4])
			b += qkMXFP4
		}
	}
	return dst
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
	e, exact := mxfp4ScaleFromBits(amax)
	if !exact {
		// log2f rounds up just below powers of two; float32(log2(float64))
		// reproduces it, the float's exponent bits do not.
		e = uint8(int32(float32(math.Floor(float64(float32(math.Log2(float64(amax)))))) - 2 + 127))
	}
	g := newMXFP4Grid(e)
	dst = append(dst, e)
	for j := 0; j < qkMXFP4/2; j++ {
		lo := g.index(x[j])
		hi := g.index(x[j+qkMXFP4/2])
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

func dequantizeF32(dst []float32, src []byte) []float32 {
	for i := 0; i < len(src); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(src[i:])))
	}
	return dst
}

func dequantizeF16(dst []float32, src []byte) []float32 {
	for i := 0; i < len(src); i += 2 {
		dst = append(dst, F16ToF32(binary.LittleEndian.Uint16(src[i:])))
	}
	return dst
}

func dequantizeBF16(dst []float32, src []byte) []float32 {
	for i := 0; i < len(src); i += 2 {
		dst = append(dst, BF16ToF32(binary.LittleEndian.Uint16(src[i:])))
	}
	return dst
}

func dequantizeQ8_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ8_0 {
		d := F16ToF32(binary.LittleEndian.Uint16(src[b:]))
		for _, q := range src[b+2 : b+blockQ8_0] {
			dst = append(dst, float32(int8(q))*d)
		}
	}
	return dst
}

func dequantizeMXFP4(dst []float32, src []byte) []float32 {
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
	return dst
}
