package quant

// The K-quants (256-element super-blocks): Q2_K … Q6_K with reference and
// importance-weighted quantizers, and Q8_K, the activation format.

import (
	"encoding/binary"
	"math"
)

const (
	qkK      = 256
	blockQ2K = 84  // scales[16], qs[64], d, dmin
	blockQ3K = 110 // hmask[32], qs[64], scales[12], d
	blockQ4K = 144 // d, dmin, scales[12], qs[128]
	blockQ5K = 176 // d, dmin, scales[12], qh[32], qs[128]
	blockQ6K = 210 // ql[128], qh[64], scales[16], d
	blockQ8K = 292 // f32 d, qs[256], bsums[16]
)

// quantizeKBlocks encodes x block by block, passing encode the block's
// importance weights, or nil for the reference path.
func quantizeKBlocks(dst []byte, x, weights []float32, encode func(dst []byte, x, qw []float32) []byte) []byte {
	for i := 0; i < len(x); i += qkK {
		var qw []float32
		if weights != nil {
			qw = weights[i : i+qkK]
		}
		dst = encode(dst, x[i:i+qkK], qw)
	}
	return dst
}

func quantizeRowQ2_K(dst []byte, x, weights []float32) []byte {
	return quantizeKBlocks(dst, x, weights, quantizeBlockQ2_K)
}

func quantizeRowQ3_K(dst []byte, x, weights []float32) []byte {
	return quantizeKBlocks(dst, x, weights, quantizeBlockQ3_K)
}

func quantizeRowQ4_K(dst []byte, x, weights []float32) []byte {
	return quantizeKBlocks(dst, x, weights, quantizeBlockQ4_K)
}

func quantizeRowQ5_K(dst []byte, x, weights []float32) []byte {
	return quantizeKBlocks(dst, x, weights, quantizeBlockQ5_K)
}

// quantizeRowQ6_K: quantize_row_q6_K_ref is quantize_row_q6_K_impl
// without weights.
func quantizeRowQ6_K(dst []byte, x, weights []float32) []byte {
	return quantizeKBlocks(dst, x, weights, quantizeBlockQ6_K)
}

// quantizeRowQ8_K ignores the importance matrix, as llama.cpp does.
func quantizeRowQ8_K(dst []byte, x, _ []float32) []byte {
	return quantizeKBlocks(dst, x, nil, quantizeBlockQ8_K)
}

// quantizeBlockQ2_K is quantize_row_q2_K_ref, or quantize_row_q2_K_impl
// with weights: 16 sub-blocks of 16, levels 0…3, 4-bit scales and mins.
func quantizeBlockQ2_K(dst []byte, x, qw []float32) []byte {
	var b [blockQ2K]byte
	var L [qkK]uint8
	var laux [16]uint8
	var w, scales, mins [16]float32
	sc := b[:16]
	var d, dmin uint16
	if qw == nil {
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				w[l] = abs32(v)
			}
			scales[j], mins[j] = makeQkxQuants(3, xs, w[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range sc {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			d = F32ToF16(maxScale / 15)
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range sc {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			dmin = F32ToF16(maxMin / 15)
		}
	} else {
		sigma2 := sumSquares(x) / qkK
		var sw [16]float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			importanceWeights(w[:], qw[16*j:16*j+16], xs, sigma2)
			sw[j] = sum32(w[:])
			scales[j], mins[j] = makeQkxQuants(3, xs, w[:], L[16*j:16*j+16], laux[:], -0.9, 0.05, 36, false)
		}
		var ls, lm [16]uint8
		d = F32ToF16(makeQpQuants(15, scales[:], ls[:], sw[:]))
		dmin = F32ToF16(makeQpQuants(15, mins[:], lm[:], sw[:]))
		for j := range sc {
			sc[j] = ls[j] | lm[j]<<4
		}
	}
	binary.LittleEndian.PutUint16(b[80:], d)
	binary.LittleEndian.PutUint16(b[82:], dmin)
	df, mf := F16ToF32(d), F16ToF32(dmin)
	for j := range 16 {
		dj := df * float32(sc[j]&0xF)
		if dj == 0 {
			continue
		}
		mj := float32(mf * float32(sc[j]>>4))
		for i := 16 * j; i < 16*j+16; i++ {
			L[i] = uint8(max(0, min(3, nearestInt((x[i]+mj)/dj))))
		}
	}
	pack2Bits(b[16:80], &L)
	return append(dst, b[:]...)
}

// quantizeBlockQ3_K is quantize_row_q3_K_ref, or quantize_row_q3_K_impl
// with weights: 16 sub-blocks of 16, levels −4…3, 6-bit signed scales.
func quantizeBlockQ3_K(dst []byte, x, qw []float32) []byte {
	var b [blockQ3K]byte
	var L [qkK]int8
	var scales [16]float32
	sc := b[96:108]
	var d uint16
	if qw == nil {
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				// The C stores nearest_int in an int8_t before clamping.
				l := int8(nearestInt(iscale * scales[j]))
				putQ3Scale(sc, j, max(-32, min(31, int(l)))+32)
			}
			d = F32ToF16(1 / iscale)
		}
	} else {
		sigma2 := 2 * sumSquares(x) / qkK
		var w, sw [16]float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			importanceWeights(w[:], qw[16*j:16*j+16], xs, sigma2)
			sw[j] = sum32(w[:])
			scales[j] = makeQxQuants(4, xs, L[16*j:16*j+16], w[:])
		}
		var ls [16]int8
		d = F32ToF16(makeQxQuants(32, scales[:], ls[:], sw[:]))
		for j, l := range ls {
			putQ3Scale(sc, j, int(l))
		}
	}
	binary.LittleEndian.PutUint16(b[108:], d)
	df := F16ToF32(d)
	for j := range 16 {
		dj := df * float32(q3Scale(sc, j))
		if dj == 0 {
			continue
		}
		for i := 16 * j; i < 16*j+16; i++ {
			L[i] = int8(max(-4, min(3, nearestInt(x[i]/dj))) + 4)
		}
	}
	// The high bit of element j goes to bit j/32 of hmask[j%32].
	hmask := b[:32]
	for j := range L {
		if L[j] > 3 {
			hmask[j%32] |= 1 << (j / 32)
			L[j] -= 4
		}
	}
	pack2Bits(b[32:96], &L)
	return append(dst, b[:]...)
}

// putQ3Scale stores the 6-bit scale l of sub-block j: low nibbles in
// scales[0:8], high bit pairs in scales[8:12].
func putQ3Scale(sc []byte, j, l int) {
	if j < 8 {
		sc[j] = byte(l & 0xF)
	} else {
		sc[j-8] |= byte((l & 0xF) << 4)
	}
	sc[j%4+8] |= byte(l >> 4 << (2 * (j / 4)))
}

// q3Scale is sub-block j's scale, −32…31.
func q3Scale(sc []byte, j int) int8 {
	lo := sc[j%8]
	if j >= 8 {
		lo >>= 4
	}
	return int8(lo&0xF|(sc[8+j%4]>>(2*(j/4))&3)<<4) - 32
}

// pack2Bits packs 2-bit levels: byte l of each 32-byte half n holds
// elements 128n+l, +32, +64 and +96 from the low bits up.
func pack2Bits[T int8 | uint8](qs []byte, L *[qkK]T) {
	for j := 0; j < qkK; j += 128 {
		for l := range 32 {
			qs[j/4+l] = uint8(L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6)
		}
	}
}

// kParams are the Q4_K/Q5_K reference search settings and level range.
type kParams struct {
	nmax         int
	rmin, rdelta float32
	nstep        int
	// clampImatrix: quantize_row_q5_K_impl clamps make_qp_quants' levels
	// to 63, quantize_row_q4_K_impl does not.
	clampImatrix bool
}

var (
	q4KParams = kParams{nmax: 15, rmin: -1, rdelta: 0.1, nstep: 20}
	q5KParams = kParams{nmax: 31, rmin: -0.5, rdelta: 0.1, nstep: 15, clampImatrix: true}
)

// quantizeBlockQ4_K is quantize_row_q4_K_ref, or quantize_row_q4_K_impl
// with weights.
func quantizeBlockQ4_K(dst []byte, x, qw []float32) []byte {
	var b [blockQ4K]byte
	var L [qkK]uint8
	quantizeSubBlocksK(b[:16], &L, x, qw, q4KParams)
	qs := b[16:]
	for j := 0; j < qkK; j += 64 {
		for l := range 32 {
			qs[j/2+l] = L[j+l] | L[j+l+32]<<4
		}
	}
	return append(dst, b[:]...)
}

// quantizeBlockQ5_K is quantize_row_q5_K_ref, or quantize_row_q5_K_impl
// with weights.
func quantizeBlockQ5_K(dst []byte, x, qw []float32) []byte {
	var b [blockQ5K]byte
	var L [qkK]uint8
	quantizeSubBlocksK(b[:16], &L, x, qw, q5KParams)
	qh, qs := b[16:48], b[48:]
	for n := 0; n < qkK/64; n++ {
		for j := range 32 {
			l1, l2 := L[64*n+j], L[64*n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= 1 << (2 * n)
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= 2 << (2 * n)
			}
			qs[32*n+j] = l1 | l2<<4
		}
	}
	return append(dst, b[:]...)
}

// quantizeSubBlocksK chooses the 6-bit scales and mins of a Q4_K/Q5_K
// block's eight sub-blocks of 32, writes them with d and dmin to head
// (the block's first 16 bytes), and sets L to levels 0…nmax.
func quantizeSubBlocksK(head []byte, L *[qkK]uint8, x, qw []float32, p kParams) {
	var scales, mins [8]float32
	var w [32]float32
	var laux [32]uint8
	var ls, lm [8]uint8
	var d, dmin float32
	if qw == nil {
		var maxScale, maxMin float32
		for j := range 8 {
			xs := x[32*j : 32*j+32]
			avX := sqrtf(sumSquares(xs) / 32)
			for l, v := range xs {
				w[l] = avX + abs32(v)
			}
			scales[j], mins[j] = makeQkxQuants(p.nmax, xs, w[:], L[32*j:32*j+32], laux[:], p.rmin, p.rdelta, p.nstep, false)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		for j := range 8 {
			ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
			lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
		}
		d, dmin = maxScale/63, maxMin/63
	} else {
		sigma2 := 2 * sumSquares(x) / qkK
		var sw [8]float32
		for j := range 8 {
			xs := x[32*j : 32*j+32]
			importanceWeights(w[:], qw[32*j:32*j+32], xs, sigma2)
			sw[j] = sum32(w[:])
			scales[j], mins[j] = makeQkxQuants(p.nmax, xs, w[:], L[32*j:32*j+32], laux[:], -0.9, 0.05, 36, false)
		}
		d = makeQpQuants(63, scales[:], ls[:], sw[:])
		dmin = makeQpQuants(63, mins[:], lm[:], sw[:])
		if p.clampImatrix {
			for j := range 8 {
				ls[j], lm[j] = min(63, ls[j]), min(63, lm[j])
			}
		}
	}
	sc := head[4:16]
	for j := range 8 {
		if j < 4 {
			sc[j], sc[j+4] = ls[j], lm[j]
		} else {
			sc[j+4] = ls[j]&0xF | lm[j]&0xF<<4
			sc[j-4] |= ls[j] >> 4 << 6
			sc[j] |= lm[j] >> 4 << 6
		}
	}
	dh, mh := F32ToF16(d), F32ToF16(dmin)
	binary.LittleEndian.PutUint16(head, dh)
	binary.LittleEndian.PutUint16(head[2:], mh)
	df, mf := F16ToF32(dh), F16ToF32(mh)
	for j := range 8 {
		s, m := scaleMinK4(sc, j)
		dj := df * float32(s)
		if dj == 0 {
			continue
		}
		mj := float32(mf * float32(m))
		for i := 32 * j; i < 32*j+32; i++ {
			L[i] = uint8(max(0, min(p.nmax, nearestInt((x[i]+mj)/dj))))
		}
	}
}

// scaleMinK4 is get_scale_min_k4: sub-block j's 6-bit scale and min.
func scaleMinK4(q []byte, j int) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | q[j-4]>>6<<4, q[j+4]>>4 | q[j]>>6<<4
}

// quantizeBlockQ6_K is quantize_row_q6_K_impl, which without weights is
// the reference: 16 sub-blocks of 16, levels −32…31, int8 scales.
func quantizeBlockQ6_K(dst []byte, x, qw []float32) []byte {
	var b [blockQ6K]byte
	var L [qkK]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := range 16 {
		var w []float32
		if qw != nil {
			w = qw[16*ib : 16*ib+16]
		}
		scales[ib] = makeQxQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16], w)
		if a := abs32(scales[ib]); a > maxAbs {
			maxAbs, maxScale = a, scales[ib]
		}
	}
	if maxAbs < groupMaxEps {
		return append(dst, b[:]...)
	}
	iscale := -128 / maxScale
	dh := F32ToF16(1 / iscale)
	binary.LittleEndian.PutUint16(b[208:], dh)
	sc := b[192:208]
	for ib := range sc {
		sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	df := F16ToF32(dh)
	for j := range 16 {
		dj := df * float32(int8(sc[j]))
		if dj == 0 {
			continue
		}
		for i := 16 * j; i < 16*j+16; i++ {
			L[i] = int8(max(-32, min(31, nearestInt(x[i]/dj))) + 32)
		}
	}
	for n := range 2 {
		ql, qh, Ln := b[64*n:], b[128+32*n:], L[128*n:]
		for l := range 32 {
			ql[l] = uint8(Ln[l]&0xF | Ln[l+64]&0xF<<4)
			ql[l+32] = uint8(Ln[l+32]&0xF | Ln[l+96]&0xF<<4)
			qh[l] = uint8(Ln[l]>>4 | Ln[l+32]>>4<<2 | Ln[l+64]>>4<<4 | Ln[l+96]>>4<<6)
		}
	}
	return append(dst, b[:]...)
}

// quantizeBlockQ8_K is quantize_row_q8_K_ref. An all-zero block is left
// all zero; ggml leaves its bsums unwritten.
func quantizeBlockQ8_K(dst []byte, x, _ []float32) []byte {
	var b [blockQ8K]byte
	mx, amax := signedMax(x)
	if amax != 0 {
		iscale := -127 / mx
		qs := b[4:260]
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(iscale*v))))
		}
		for j := range 16 {
			var sum int
			for _, q := range qs[16*j : 16*j+16] {
				sum += int(int8(q))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(1/iscale))
	}
	return append(dst, b[:]...)
}

func dequantizeQ2_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ2K {
		blk := src[b : b+blockQ2K]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[80:]))
		mn := F16ToF32(binary.LittleEndian.Uint16(blk[82:]))
		sc := blk[:16]
		is := 0
		for n := range 2 {
			q := blk[16+32*n : 48+32*n]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					dl := d * float32(sc[is]&0xF)
					ml := float32(mn * float32(sc[is]>>4))
					is++
					for _, v := range q[16*half : 16*half+16] {
						dst = append(dst, float32(dl*float32(v>>shift&3))-ml)
					}
				}
			}
		}
	}
	return dst
}

func dequantizeQ3_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ3K {
		blk := src[b : b+blockQ3K]
		hm, sc := blk[:32], blk[96:108]
		dAll := F16ToF32(binary.LittleEndian.Uint16(blk[108:]))
		is := 0
		m := uint8(1)
		for n := range 2 {
			q := blk[32+32*n : 64+32*n]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					dl := dAll * float32(q3Scale(sc, is))
					is++
					for l := 16 * half; l < 16*half+16; l++ {
						v := int(q[l] >> shift & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						dst = append(dst, dl*float32(v))
					}
				}
				m <<= 1
			}
		}
	}
	return dst
}

func dequantizeQ4_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ4K {
		blk := src[b : b+blockQ4K]
		for c := range 4 {
			d1, m1, d2, m2 := kChunkScales(blk, c)
			q := blk[16+32*c : 48+32*c]
			for _, v := range q {
				dst = append(dst, float32(d1*float32(v&0xF))-m1)
			}
			for _, v := range q {
				dst = append(dst, float32(d2*float32(v>>4))-m2)
			}
		}
	}
	return dst
}

func dequantizeQ5_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ5K {
		blk := src[b : b+blockQ5K]
		qh := blk[16:48]
		for c := range 4 {
			d1, m1, d2, m2 := kChunkScales(blk, c)
			ql := blk[48+32*c : 80+32*c]
			u1, u2 := uint8(1)<<(2*c), uint8(2)<<(2*c)
			for l, v := range ql {
				dst = append(dst, float32(d1*float32(v&0xF+q5KHigh(qh[l], u1)))-m1)
			}
			for l, v := range ql {
				dst = append(dst, float32(d2*float32(v>>4+q5KHigh(qh[l], u2)))-m2)
			}
		}
	}
	return dst
}

func q5KHigh(qh, mask uint8) uint8 {
	if qh&mask != 0 {
		return 16
	}
	return 0
}

// kChunkScales returns the scales and mins of the two sub-blocks of a
// Q4_K/Q5_K block's chunk c: 64 elements, low nibbles then high.
func kChunkScales(blk []byte, c int) (d1, m1, d2, m2 float32) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	mn := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	s, m := scaleMinK4(blk[4:16], 2*c)
	d1, m1 = d*float32(s), float32(mn*float32(m))
	s, m = scaleMinK4(blk[4:16], 2*c+1)
	d2, m2 = d*float32(s), float32(mn*float32(m))
	return d1, m1, d2, m2
}

func dequantizeQ6_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ6K {
		blk := src[b : b+blockQ6K]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		var y []float32
		dst, y = grow(dst, qkK)
		for n := range 2 {
			ql, qh, sc, yn := blk[64*n:], blk[128+32*n:], blk[192+8*n:], y[128*n:]
			for l := range 32 {
				is := l / 16
				q1 := int8(ql[l]&0xF|(qh[l]>>0&3)<<4) - 32
				q2 := int8(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
				q3 := int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				yn[l] = d * float32(int8(sc[is])) * float32(q1)
				yn[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				yn[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				yn[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
	return dst
}

func dequantizeQ8_K(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ8K {
		d := math.Float32frombits(binary.LittleEndian.Uint32(src[b:]))
		for _, q := range src[b+4 : b+260] {
			dst = append(dst, d*float32(int8(q)))
		}
	}
	return dst
}
