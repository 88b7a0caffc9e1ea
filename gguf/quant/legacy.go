package quant

// The legacy 32-element block types Q4_0, Q4_1, Q5_0 and Q5_1: reference
// and importance-weighted quantizers and dequantizers.

import (
	"encoding/binary"
	"math"
)

const (
	qkLegacy  = 32
	blockQ4_0 = 18 // d, qs[16]
	blockQ4_1 = 20 // d, m, qs[16]
	blockQ5_0 = 22 // d, qh[4], qs[16]
	blockQ5_1 = 24 // d, m, qh[4], qs[16]
)

// legacyPacker appends a block's 32 levels after its scale (and min).
type legacyPacker func(dst []byte, L *[qkLegacy]uint8) []byte

func quantizeRowQ4_0(dst []byte, x, weights []float32) []byte {
	return quantizeRowSymmetric(dst, x, weights, 8, appendQ4)
}

func quantizeRowQ5_0(dst []byte, x, weights []float32) []byte {
	return quantizeRowSymmetric(dst, x, weights, 16, appendQ5)
}

func quantizeRowQ4_1(dst []byte, x, weights []float32) []byte {
	return quantizeRowAffine(dst, x, weights, 15, 15, appendQ4)
}

// quantizeRowQ5_1: the reference converts straight to uint8_t without a
// clamp, keeping the low byte of the truncated value; a limit of 127
// never binds on an int8, so uint8(int8(·)) keeps the same byte.
func quantizeRowQ5_1(dst []byte, x, weights []float32) []byte {
	return quantizeRowAffine(dst, x, weights, 31, math.MaxInt8, appendQ5)
}

// quantizeRowSymmetric is quantize_row_q{4,5}_0_ref, or with weights
// quantize_row_q{4,5}_0_impl: x ≈ d·(L − nmax).
func quantizeRowSymmetric(dst []byte, x, weights []float32, nmax int, pack legacyPacker) []byte {
	var sigma2 float32
	if weights != nil {
		sigma2 = sumSquares(x) / float32(len(x))
	}
	var L [qkLegacy]uint8
	var Li [qkLegacy]int8
	var w [qkLegacy]float32
	for i := 0; i < len(x); i += qkLegacy {
		xb := x[i : i+qkLegacy]
		var d float32
		if weights == nil {
			mx, _ := signedMax(xb)
			d = mx / float32(-nmax)
			var id float32
			if d != 0 {
				id = 1 / d
			}
			off := float32(nmax) + 0.5
			limit := int8(2*nmax - 1)
			for j, v := range xb {
				L[j] = uint8(min(limit, int8(int32(float32(v*id)+off))))
			}
		} else {
			importanceWeights(w[:], weights[i:i+qkLegacy], xb, sigma2)
			d = makeQxQuants(nmax, xb, Li[:], w[:])
			for j, l := range Li {
				L[j] = uint8(l)
			}
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = pack(dst, &L)
	}
	return dst
}

// quantizeRowAffine is quantize_row_q{4,5}_1_ref, or with weights
// quantize_row_q{4,5}_1_impl: x ≈ d·L + m, L ∈ 0…nmax. The reference
// clamps its truncated int8 levels to limit.
func quantizeRowAffine(dst []byte, x, weights []float32, nmax int, limit int8, pack legacyPacker) []byte {
	var sigma2 float32
	if weights != nil {
		sigma2 = sumSquares(x) / float32(len(x))
	}
	var L, laux [qkLegacy]uint8
	var w [qkLegacy]float32
	for i := 0; i < len(x); i += qkLegacy {
		xb := x[i : i+qkLegacy]
		var d, m float32
		if weights == nil {
			mn, mx := float32(math.MaxFloat32), float32(-math.MaxFloat32)
			for _, v := range xb {
				if v < mn {
					mn = v
				}
				if v > mx {
					mx = v
				}
			}
			d, m = (mx-mn)/float32(nmax), mn
			var id float32
			if d != 0 {
				id = 1 / d
			}
			for j, v := range xb {
				L[j] = uint8(min(limit, int8(int32(float32((v-mn)*id)+0.5))))
			}
		} else {
			importanceWeights(w[:], weights[i:i+qkLegacy], xb, sigma2)
			var theMin float32
			d, theMin = makeQkxQuants(nmax, xb, w[:], L[:], laux[:], -0.9, 0.05, 36, false)
			m = -theMin
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(m))
		dst = pack(dst, &L)
	}
	return dst
}

// appendQ4 packs element j in the low nibble of byte j and element j+16
// in its high nibble.
func appendQ4(dst []byte, L *[qkLegacy]uint8) []byte {
	for j := range qkLegacy / 2 {
		dst = append(dst, L[j]|L[j+qkLegacy/2]<<4)
	}
	return dst
}

// appendQ5 stores the fifth bits in qh (a little-endian uint32, bit j for
// element j), then the low nibbles as appendQ4 does.
func appendQ5(dst []byte, L *[qkLegacy]uint8) []byte {
	var qh uint32
	for j := range qkLegacy / 2 {
		qh |= uint32(L[j]&0x10) >> 4 << j
		qh |= uint32(L[j+qkLegacy/2]&0x10) >> 4 << (j + qkLegacy/2)
	}
	dst = binary.LittleEndian.AppendUint32(dst, qh)
	for j := range qkLegacy / 2 {
		dst = append(dst, L[j]&0x0F|(L[j+qkLegacy/2]&0x0F)<<4)
	}
	return dst
}

func dequantizeQ4_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ4_0 {
		d := F16ToF32(binary.LittleEndian.Uint16(src[b:]))
		var y []float32
		dst, y = grow(dst, qkLegacy)
		for j, q := range src[b+2 : b+blockQ4_0] {
			y[j] = float32(int(q&0x0F)-8) * d
			y[j+qkLegacy/2] = float32(int(q>>4)-8) * d
		}
	}
	return dst
}

func dequantizeQ4_1(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ4_1 {
		d := F16ToF32(binary.LittleEndian.Uint16(src[b:]))
		m := F16ToF32(binary.LittleEndian.Uint16(src[b+2:]))
		var y []float32
		dst, y = grow(dst, qkLegacy)
		for j, q := range src[b+4 : b+blockQ4_1] {
			y[j] = float32(float32(q&0x0F)*d) + m
			y[j+qkLegacy/2] = float32(float32(q>>4)*d) + m
		}
	}
	return dst
}

func dequantizeQ5_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ5_0 {
		d := F16ToF32(binary.LittleEndian.Uint16(src[b:]))
		qh := binary.LittleEndian.Uint32(src[b+2:])
		var y []float32
		dst, y = grow(dst, qkLegacy)
		for j, q := range src[b+6 : b+blockQ5_0] {
			lo, hi := q5Levels(q, qh, j)
			y[j] = float32(lo-16) * d
			y[j+qkLegacy/2] = float32(hi-16) * d
		}
	}
	return dst
}

func dequantizeQ5_1(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ5_1 {
		d := F16ToF32(binary.LittleEndian.Uint16(src[b:]))
		m := F16ToF32(binary.LittleEndian.Uint16(src[b+2:]))
		qh := binary.LittleEndian.Uint32(src[b+4:])
		var y []float32
		dst, y = grow(dst, qkLegacy)
		for j, q := range src[b+8 : b+blockQ5_1] {
			lo, hi := q5Levels(q, qh, j)
			y[j] = float32(float32(lo)*d) + m
			y[j+qkLegacy/2] = float32(float32(hi)*d) + m
		}
	}
	return dst
}

// q5Levels returns the 5-bit levels of elements j and j+16 from qs byte q.
func q5Levels(q byte, qh uint32, j int) (lo, hi int) {
	lo = int(q&0x0F) | int(qh>>j<<4&0x10)
	hi = int(q>>4) | int(qh>>(j+12)&0x10)
	return lo, hi
}

// grow extends dst by n values and returns it with the new tail, for
// decoders that write their block out of order.
func grow(dst []float32, n int) (all, tail []float32) {
	l := len(dst)
	dst = append(dst, make([]float32, n)...)
	return dst, dst[l:]
}
