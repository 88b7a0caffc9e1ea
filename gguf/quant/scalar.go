package quant

import "math"

// F32ToF16 converts to IEEE binary16 with round-to-nearest-even,
// subnormals kept, and NaN mapped to a quiet NaN with the sign kept; the
// bit trick is ggml's ggml_compute_fp32_to_fp16.
func F32ToF16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)
	scaleToZero := math.Float32frombits(0x08800000)
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1 := w + w
	sign := w & 0x80000000
	bias := shl1 & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits((bias>>1)+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007C00
	mantBits := bits & 0x00000FFF
	nonsign := expBits + mantBits
	if shl1 > 0xFF000000 {
		nonsign = 0x7E00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

// F16ToF32 converts IEEE binary16 to float32 exactly. Subnormal halves
// are renormalised with one float subtraction, which is exact, instead of
// a loop: this conversion is the inner loop of every F16 dot product.
func F16ToF32(h uint16) float32 {
	const expMask = 0x7C00 << 13
	o := uint32(h&0x7FFF) << 13
	exp := o & expMask
	o += (127 - 15) << 23
	switch exp {
	case expMask: // Inf or NaN: all exponent bits set
		o += (128 - 16) << 23
	case 0: // zero or subnormal
		o += 1 << 23
		o = math.Float32bits(math.Float32frombits(o) - math.Float32frombits(113<<23))
	}
	return math.Float32frombits(o | uint32(h&0x8000)<<16)
}

// F32ToBF16 converts to bfloat16 with round-to-nearest-even; NaNs become
// quiet (ggml_compute_fp32_to_bf16).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7FFFFFFF > 0x7F800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7FFF + ((u >> 16) & 1))) >> 16)
}

// BF16ToF32 converts bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// E8M0ToF32Half is ggml's ggml_e8m0_to_fp32_half: 2^(e−128), the MXFP4
// block scale for ggml's doubled e2m1 value table.
func E8M0ToF32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ 0x80000000) }

// roundf is C's roundf: half away from zero.
func roundf(f float32) float32 { return float32(math.Round(float64(f))) }
