package quant

// Activation quantizers: the conversion llama.cpp's CPU backend applies to
// a row of float activations (from_float of the weight's vec_dot_type)
// before dotting weight rows with it.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
)

// activationQuantizers maps each activation type to the haswell backend's
// converter and to the portable one compiled beside it.
var activationQuantizers = map[gguf.Type]struct{ simd, generic quantizeRowFunc }{
	gguf.TypeF32:  {quantizeRowF32, quantizeRowF32},
	gguf.TypeF16:  {quantizeRowF16F16C, quantizeRowF16},
	gguf.TypeBF16: {quantizeRowBF16, quantizeRowBF16},
	gguf.TypeQ8_0: {quantizeRowQ8_0AVX2, quantizeRowQ8_0},
	gguf.TypeQ8_1: {quantizeRowQ8_1AVX2, quantizeRowQ8_1},
	gguf.TypeQ8_K: {quantizeRowQ8_K, quantizeRowQ8_K}, // quantize_row_q8_K is the reference on x86
}

// QuantizeActivations appends x, one row of activations, converted to vt
// as llama.cpp's haswell CPU backend does before a matrix multiplication:
// quantize_row_q8_0, quantize_row_q8_1 and quantize_row_q8_K from
// ggml-cpu/arch/x86/quants.c, ggml_cpu_fp32_to_fp16, ggml_cpu_fp32_to_bf16,
// or a copy for F32, byte for byte. The AVX2 Q8_0 and Q8_1 quantizers
// round half to even and scale by 127/max, unlike the reference.
func QuantizeActivations(dst []byte, vt gguf.Type, x []float32) ([]byte, error) {
	return quantizeActivations(dst, vt, x, false)
}

// QuantizeActivationsGeneric is QuantizeActivations with the portable C
// llama.cpp compiles beside the SIMD code (quantize_row_q8_0_generic and
// friends, which are the *_ref quantizers, and ggml_fp32_to_fp16_row).
func QuantizeActivationsGeneric(dst []byte, vt gguf.Type, x []float32) ([]byte, error) {
	return quantizeActivations(dst, vt, x, true)
}

func quantizeActivations(dst []byte, vt gguf.Type, x []float32, generic bool) ([]byte, error) {
	q, ok := activationQuantizers[vt]
	if !ok {
		return dst, fmt.Errorf("quant: %s is not an activation type", vt)
	}
	if bs := int(vt.BlockSize()); len(x)%bs != 0 {
		return dst, fmt.Errorf("quant: %d activations are not whole %s blocks of %d", len(x), vt, bs)
	}
	if generic {
		return q.generic(dst, x, nil), nil
	}
	return q.simd(dst, x, nil), nil
}

// quantizeRowF16F16C is ggml_cpu_fp32_to_fp16: VCVTPS2PH on runs of eight
// and then four values, ggml's software conversion on the last one to
// three. The two differ only in the NaNs they write.
func quantizeRowF16F16C(dst []byte, x, _ []float32) []byte {
	hw := len(x) &^ 3
	for _, v := range x[:hw] {
		dst = binary.LittleEndian.AppendUint16(dst, f32ToF16F16C(v))
	}
	return quantizeRowF16(dst, x[hw:], nil)
}

// f32ToF16F16C is VCVTPS2PH: F32ToF16, except that a NaN keeps the top of
// its payload and is made quiet, where ggml's conversion writes 0x7E00.
func f32ToF16F16C(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16)&0x8000 | 0x7E00 | uint16(b>>13)&0x1FF
	}
	return F32ToF16(f)
}

func quantizeRowQ8_0AVX2(dst []byte, x, _ []float32) []byte {
	for b := 0; b < len(x); b += qk8_0 {
		var q [qk8_0]int32
		d := quantizeBlock8AVX2(&q, x[b:b+qk8_0])
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = appendSaturated(dst, &q)
	}
	return dst
}

// quantizeRowQ8_1AVX2 also stores s, d times the sum of the levels, which
// it takes before they are narrowed to int8 and adds with int32
// wraparound.
func quantizeRowQ8_1AVX2(dst []byte, x, _ []float32) []byte {
	for b := 0; b < len(x); b += qk8_0 {
		var q [qk8_0]int32
		d := quantizeBlock8AVX2(&q, x[b:b+qk8_0])
		var sum int32
		for _, v := range q {
			sum += v
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(float32(d*float32(sum))))
		dst = appendSaturated(dst, &q)
	}
	return dst
}

// quantizeBlock8AVX2 is the part of the AVX2 quantize_row_q8_0 and
// quantize_row_q8_1 they share: the block's largest magnitude by the
// instructions' reduction, which decides which NaN survives, and the
// values scaled by 127/max, rounded half to even and converted to int32.
// It returns d = max/127.
func quantizeBlock8AVX2(q *[qk8_0]int32, x []float32) float32 {
	x = x[:qk8_0]
	var lanes [8]float32 // four registers of eight values, maxed lane by lane
	for l := range lanes {
		m := maxps(abs32(x[l]), abs32(x[8+l]))
		m = maxps(m, abs32(x[16+l]))
		lanes[l] = maxps(m, abs32(x[24+l]))
	}
	var h [4]float32
	for k := range h {
		h[k] = maxps(lanes[4+k], lanes[k])
	}
	amax := maxps(maxps(h[0], h[2]), maxps(h[1], h[3]))
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	for j, v := range x {
		// CVTPS2DQ of a rounded value: truncating it changes nothing.
		q[j] = cvttss2si(float32(math.RoundToEven(float64(float32(v * id)))))
	}
	return amax / 127
}

// appendSaturated narrows int32 levels to int8 as PACKSSDW and PACKSSWB
// do: saturating, so the INT_MIN of a NaN becomes −128.
func appendSaturated(dst []byte, q *[qk8_0]int32) []byte {
	for _, v := range q {
		dst = append(dst, byte(int8(max(-128, min(127, v)))))
	}
	return dst
}

// quantizeRowQ8_1 is quantize_row_q8_1_ref: Q8_0's reference levels plus
// s = d times the sum of the stored int8 levels.
func quantizeRowQ8_1(dst []byte, x, _ []float32) []byte {
	for b := 0; b < len(x); b += qk8_0 {
		xb := x[b : b+qk8_0]
		var amax float32
		for _, v := range xb {
			if a := abs32(v); !(amax > a) { // MAX(amax, fabsf(v)) as ggml writes it
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var q [qk8_0]byte
		var sum int32
		for j, v := range xb {
			l := int8(cvttss2si(roundf(float32(v * id))))
			q[j] = byte(l)
			sum += int32(l)
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(float32(float32(sum)*d)))
		dst = append(dst, q[:]...)
	}
	return dst
}

// maxps is MAXPS/MAXSS: a if a > b, else b, so that a NaN in b is kept
// and a NaN in a dropped.
func maxps(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// cvttss2si is CVTTSS2SI, C's float to int conversion on x86: truncation,
// with NaN and values outside int32 giving INT_MIN.
func cvttss2si(f float32) int32 {
	if f >= -2147483648 && f < 2147483648 {
		return int32(f)
	}
	return math.MinInt32
}
