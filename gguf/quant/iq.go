package quant

// The i-quants (IQ1_S … IQ4_XS), the ternary types TQ1_0/TQ2_0, NVFP4 and
// the 1- and 2-bit types Q1_0/Q2_0. Each function follows its
// dequantize_row_* or quantize_* counterpart in ggml-quants.c, operation
// for operation; the codebooks are in iqtables.go.

//go:generate go run ./internal/gentables -git $LLAMA_CPP_GIT -o iqtables.go

import (
	"encoding/binary"
	"math"
)

// Block sizes (values) and lengths (bytes) of the types this file codes.
const (
	qkIQ       = 256 // every type here but IQ4_NL, NVFP4, Q1_0 and Q2_0
	blockIQ1S  = 50
	blockIQ1M  = 56
	blockIQ2XX = 66 // IQ2_XXS
	blockIQ2XS = 74
	blockIQ2S  = 82
	blockIQ3XX = 98 // IQ3_XXS
	blockIQ3S  = 110
	blockIQ4XS = 136
	blockTQ1   = 54
	blockTQ2   = 66

	qkIQ4NL    = 32
	blockIQ4NL = 18
	qkNVFP4    = 64
	qkNVFP4Sub = 16
	blockNVFP4 = 36
	qkQ1_0     = 128
	blockQ1_0  = 18
	qkQ2_0     = 64
	blockQ2_0  = 18

	iq1sDelta = 0.125 // IQ1S_DELTA, also IQ1_M's
)

func f16At(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// appendSignedGrid appends the 8 bytes of grid as magnitudes scaled by db,
// element j negated when bit j of signs is set: the inner loop of the
// IQ2 and IQ3 dequantizers (IQ3's two 4-byte entries are passed as one).
func appendSignedGrid(dst []float32, db float32, grid uint64, signs uint8) []float32 {
	for j := range 8 {
		sign := float32(1)
		if signs&kmaskIQ2XS[j] != 0 {
			sign = -1
		}
		dst = append(dst, float32(db*float32(uint8(grid>>(8*j))))*sign)
	}
	return dst
}

// block_iq2_xxs: fp16 d, then per 32 values a u32 of four grid indices
// and a u32 of four 7-bit sign indices with a 4-bit scale on top.
func dequantizeIQ2_XXS(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ2XX {
		d := f16At(src[b:])
		for ib := range qkIQ / 32 {
			q := src[b+2+8*ib:]
			aux := binary.LittleEndian.Uint32(q[4:])
			db := d * (0.5 + float32(aux>>28)) * 0.25
			for l := range 4 {
				dst = appendSignedGrid(dst, db, iq2xxsGrid[q[l]], ksignsIQ2XS[aux>>(7*l)&127])
			}
		}
	}
	return dst
}

// iq2Scales returns the two sub-scales of a 32-block of IQ2_XS and IQ2_S,
// one for each half.
func iq2Scales(d float32, sc byte) [2]float32 {
	return [2]float32{d * (0.5 + float32(sc&15)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25}
}

// block_iq2_xs: fp16 d, u16 qs[32] (9-bit grid index, 7-bit sign index),
// scales[8] (a nibble per 16 values).
func dequantizeIQ2_XS(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ2XS {
		blk := src[b : b+blockIQ2XS]
		d := f16At(blk)
		for ib := range qkIQ / 32 {
			db := iq2Scales(d, blk[66+ib])
			for l := range 4 {
				q := binary.LittleEndian.Uint16(blk[2+8*ib+2*l:])
				dst = appendSignedGrid(dst, db[l/2], iq2xsGrid[q&511], ksignsIQ2XS[q>>9])
			}
		}
	}
	return dst
}

// block_iq2_s: fp16 d, qs[32] (grid index low bits), signs[32] (literal),
// qh[8] (grid index bits 8-9), scales[8].
func dequantizeIQ2_S(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ2S {
		blk := src[b : b+blockIQ2S]
		d := f16At(blk)
		qs, signs, qh, scales := blk[2:34], blk[34:66], blk[66:74], blk[74:82]
		for ib := range qkIQ / 32 {
			db := iq2Scales(d, scales[ib])
			for l := range 4 {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				dst = appendSignedGrid(dst, db[l/2], iq2sGrid[idx], signs[4*ib+l])
			}
		}
	}
	return dst
}

// block_iq3_xxs: fp16 d, qs[64] (grid indices), then per 32 values a u32
// of four sign indices with a 4-bit scale on top.
func dequantizeIQ3_XXS(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ3XX {
		blk := src[b : b+blockIQ3XX]
		d := f16At(blk)
		qs, scalesAndSigns := blk[2:66], blk[66:98]
		for ib := range qkIQ / 32 {
			aux := binary.LittleEndian.Uint32(scalesAndSigns[4*ib:])
			db := d * (0.5 + float32(aux>>28)) * 0.5
			for l := range 4 {
				grid := uint64(iq3xxsGrid[qs[8*ib+2*l]]) | uint64(iq3xxsGrid[qs[8*ib+2*l+1]])<<32
				dst = appendSignedGrid(dst, db, grid, ksignsIQ2XS[aux>>(7*l)&127])
			}
		}
	}
	return dst
}

// block_iq3_s: fp16 d, qs[64] (grid index low bits), qh[8] (bit 8),
// signs[32] (literal), scales[4] (a nibble per 32 values).
func dequantizeIQ3_S(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ3S {
		blk := src[b : b+blockIQ3S]
		d := f16At(blk)
		qs, qh, signs, scales := blk[2:66], blk[66:74], blk[74:106], blk[106:110]
		for ib := range qkIQ / 32 {
			db := d * float32(1+2*int(scales[ib/2]>>(4*(ib%2))&15))
			for l := range 4 {
				k := 8*ib + 2*l
				i0 := int(qs[k]) | int(qh[ib])<<(8-2*l)&256
				i1 := int(qs[k+1]) | int(qh[ib])<<(7-2*l)&256
				dst = appendSignedGrid(dst, db, uint64(iq3sGrid[i0])|uint64(iq3sGrid[i1])<<32, signs[4*ib+l])
			}
		}
	}
	return dst
}

// appendIQ1Group appends dl·(v+delta) for the 8 int8 values v of an
// iq1sGrid entry.
func appendIQ1Group(dst []float32, dl, delta float32, grid uint64) []float32 {
	for j := range 8 {
		dst = append(dst, dl*(float32(int8(grid>>(8*j)))+delta))
	}
	return dst
}

// iq1Delta is the shift of an IQ1 group: negative when its flag bit is set.
func iq1Delta(negative bool) float32 {
	if negative {
		return -iq1sDelta
	}
	return iq1sDelta
}

// block_iq1_s: fp16 d, qs[32] (grid index low bits), then per 32 values a
// u16 of four 3-bit index tops, a 3-bit scale and the δ sign.
func dequantizeIQ1_S(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ1S {
		blk := src[b : b+blockIQ1S]
		d := f16At(blk)
		qs := blk[2:34]
		for ib := range qkIQ / 32 {
			qh := binary.LittleEndian.Uint16(blk[34+2*ib:])
			dl := d * float32(2*int(qh>>12&7)+1)
			delta := iq1Delta(qh&0x8000 != 0)
			for l := range 4 {
				idx := int(qs[4*ib+l]) | int(qh>>(3*l)&7)<<8
				dst = appendIQ1Group(dst, dl, delta, iq1sGrid[idx])
			}
		}
	}
	return dst
}

// block_iq1_m: qs[32] (grid index low bits), qh[16] (a nibble per group:
// 3 index bits and the δ sign), scales[8] (3-bit scales and the fp16 d).
func dequantizeIQ1_M(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ1M {
		blk := src[b : b+blockIQ1M]
		qs, qh := blk[0:32], blk[32:48]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(blk[48+2*k:])
		}
		// The fp16 super-block scale is spread over the top nibbles of the
		// four scale words.
		d := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00F0 | sc[2]>>4&0x0F00 | sc[3]&0xF000)
		for ib := range qkIQ / 32 {
			shift := 6 * (ib % 2)
			dl := [2]float32{
				d * float32(2*int(sc[ib/2]>>shift&7)+1),
				d * float32(2*int(sc[ib/2]>>(shift+3)&7)+1),
			}
			for l := range 4 {
				h := qh[2*ib+l/2] >> (4 * (l % 2)) // this group's nibble
				idx := int(qs[4*ib+l]) | int(h&7)<<8
				dst = appendIQ1Group(dst, dl[l/2], iq1Delta(h&8 != 0), iq1sGrid[idx])
			}
		}
	}
	return dst
}

// appendIQ4 appends the 32 values of 16 IQ4 nibble pairs, low nibbles
// first, scaled by d.
func appendIQ4(dst []float32, d float32, qs []byte) []float32 {
	for _, q := range qs[:16] {
		dst = append(dst, d*float32(kvaluesIQ4NL[q&15]))
	}
	for _, q := range qs[:16] {
		dst = append(dst, d*float32(kvaluesIQ4NL[q>>4]))
	}
	return dst
}

func dequantizeIQ4_NL(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ4NL {
		dst = appendIQ4(dst, f16At(src[b:]), src[b+2:b+blockIQ4NL])
	}
	return dst
}

// block_iq4_xs: fp16 d, u16 scales_h (2 high bits per 32 values),
// scales_l[4] (4 low bits per 32 values), qs[128].
func dequantizeIQ4_XS(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockIQ4XS {
		blk := src[b : b+blockIQ4XS]
		d := f16At(blk)
		sh := binary.LittleEndian.Uint16(blk[2:])
		for ib := range qkIQ / 32 {
			ls := int(blk[4+ib/2]>>(4*(ib%2))&15) | int(sh>>(2*ib)&3)<<4
			dst = appendIQ4(dst, d*float32(ls-32), blk[8+16*ib:])
		}
	}
	return dst
}

// pow3 multiplies a TQ1_0 byte so that its next trit lands in the top of
// the byte; the uint8 wraparound is the point.
var pow3 = [5]uint8{1, 3, 9, 27, 81}

// appendTrits appends, for n = 0 … trits−1, trit n of every byte of qs.
func appendTrits(dst []float32, d float32, qs []byte, trits int) []float32 {
	for n := range trits {
		for _, q := range qs {
			t := int16(uint16(q*pow3[n]) * 3 >> 8)
			dst = append(dst, float32(t-1)*d)
		}
	}
	return dst
}

// block_tq1_0: qs[48] (5 trits a byte), qh[4] (4 trits a byte), fp16 d.
func dequantizeTQ1_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockTQ1 {
		blk := src[b : b+blockTQ1]
		d := f16At(blk[52:])
		dst = appendTrits(dst, d, blk[0:32], 5)
		dst = appendTrits(dst, d, blk[32:48], 5)
		dst = appendTrits(dst, d, blk[48:52], 4)
	}
	return dst
}

// block_tq2_0: qs[64] (4 values a byte), fp16 d.
func dequantizeTQ2_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockTQ2 {
		blk := src[b : b+blockTQ2]
		d := f16At(blk[64:])
		for j := 0; j < 64; j += 32 {
			for l := range 4 {
				for _, q := range blk[j : j+32] {
					dst = append(dst, float32(int(q>>(2*l)&3)-1)*d)
				}
			}
		}
	}
	return dst
}

// ue4m3ToF32Half is ggml_ue4m3_to_fp32: the NVFP4 sub-block scale, halved
// like E8M0ToF32Half because the e2m1 table is doubled. The sign bit is
// ignored and 0x7F (NaN in E4M3) reads as zero.
func ue4m3ToF32Half(x uint8) float32 {
	if x == 0 || x == 0x7F {
		return 0
	}
	// Each exponent below carries a −1 for the halving.
	exp, man := int(x>>3&15), float64(x&7)
	if exp == 0 {
		return float32(math.Ldexp(man, -9-1)) // man·2^−9
	}
	return float32(math.Ldexp(8+man, exp-7-3-1)) // (1+man/8)·2^(exp−7)
}

// block_nvfp4: d[4] (UE4M3, one per 16 values), qs[32].
func dequantizeNVFP4(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockNVFP4 {
		blk := src[b : b+blockNVFP4]
		for s := range qkNVFP4 / qkNVFP4Sub {
			d := ue4m3ToF32Half(blk[s])
			qs := blk[4+8*s : 4+8*s+8]
			for _, q := range qs {
				dst = append(dst, float32(kvaluesMXFP4[q&15])*d)
			}
			for _, q := range qs {
				dst = append(dst, float32(kvaluesMXFP4[q>>4])*d)
			}
		}
	}
	return dst
}

// block_q1_0: fp16 d, qs[16]: bit j, LSB first, is +d or −d.
func dequantizeQ1_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ1_0 {
		d := f16At(src[b:])
		for _, q := range src[b+2 : b+blockQ1_0] {
			for j := range 8 {
				if q>>j&1 != 0 {
					dst = append(dst, d)
				} else {
					dst = append(dst, -d)
				}
			}
		}
	}
	return dst
}

// block_q2_0: fp16 d, qs[16]: 2 bits a value, LSB first, q−1 times d.
func dequantizeQ2_0(dst []float32, src []byte) []float32 {
	for b := 0; b < len(src); b += blockQ2_0 {
		d := f16At(src[b:])
		for _, q := range src[b+2 : b+blockQ2_0] {
			for j := range 4 {
				dst = append(dst, float32(int(q>>(2*j)&3)-1)*d)
			}
		}
	}
	return dst
}

func quantizeRowIQ4_NL(dst []byte, x, weights []float32) []byte {
	for b := 0; b < len(x); b += qkIQ4NL {
		xb := x[b : b+qkIQ4NL]
		d := iq4SubScale(xb, blockWeights(weights, b, qkIQ4NL), iq4Sigma2(xb))
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var L [qkIQ4NL]uint8
		iq4Indices(L[:], xb, id)
		dst = appendIQ4Nibbles(dst, L[:])
	}
	return dst
}

func quantizeRowIQ4_XS(dst []byte, x, weights []float32) []byte {
	for b := 0; b < len(x); b += qkIQ {
		xs := x[b : b+qkIQ]
		qw := blockWeights(weights, b, qkIQ)
		sigma2 := iq4Sigma2(xs)
		var scales [qkIQ / 32]float32
		var maxScale, amaxScale float32
		for ib := range scales {
			scales[ib] = iq4SubScale(xs[32*ib:32*ib+32], blockWeights(qw, 32*ib, 32), sigma2)
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var L [qkIQ]uint8
		var sh uint16
		var sl [4]uint8
		for ib, s := range scales {
			l := max(-32, min(31, nearestInt(float32(id*s))))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			iq4Indices(L[32*ib:32*ib+32], xs[32*ib:32*ib+32], idl)
			l += 32
			sl[ib/2] |= uint8(l&15) << (4 * (ib % 2))
			sh |= uint16(l>>4) << (2 * ib)
		}
		dst = binary.LittleEndian.AppendUint16(dst, F32ToF16(d))
		dst = binary.LittleEndian.AppendUint16(dst, sh)
		dst = append(dst, sl[:]...)
		for ib := 0; ib < qkIQ; ib += 32 {
			dst = appendIQ4Nibbles(dst, L[ib:ib+32])
		}
	}
	return dst
}

// blockWeights returns weights[b:b+n], or nil when there are no weights.
func blockWeights(weights []float32, b, n int) []float32 {
	if weights == nil {
		return nil
	}
	return weights[b : b+n]
}

// iq4Sigma2 is quantize_row_iq4_nl_impl's sigma2: twice the mean square
// of the super-block.
func iq4Sigma2(x []float32) float32 { return sumSquares(x) * (2 / float32(len(x))) }

// iq4SubScale returns the scale of a 32-value sub-block that
// quantize_row_iq4_nl_impl picks (with ntry = 7): it starts from the one
// that maps the largest magnitude onto the first level, refits the scale
// by weighted least squares, and keeps the best of 15 nudged tries.
// qw is the sub-block's importance weights, or nil.
func iq4SubScale(xb, qw []float32, sigma2 float32) float32 {
	var weight [32]float32
	for j, v := range xb {
		if qw != nil {
			weight[j] = qw[j] * sqrtf(sigma2+float32(v*v))
		} else {
			weight[j] = v * v
		}
	}
	var amax, xmax float32
	for _, v := range xb {
		if a := abs32(v); a > amax {
			amax, xmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	// sums returns Σw·q·x and Σw·q·q over the levels q chosen at id·x.
	sums := func(id float32) (sumqx, sumq2 float32) {
		for j, v := range xb {
			q := float32(kvaluesIQ4NL[bestIndexInt8(float32(id*v))])
			wq := float32(weight[j] * q)
			sumqx += float32(wq * v)
			sumq2 += float32(wq * q)
		}
		return sumqx, sumq2
	}
	d := -xmax / float32(kvaluesIQ4NL[0])
	sumqx, sumq2 := sums(1 / d)
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := float32(d * sumqx)
	for itry := -7; itry <= 7; itry++ {
		sumqx, sumq2 := sums(float32(itry+int(kvaluesIQ4NL[0])) / xmax)
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = float32(d * sumqx)
		}
	}
	return d
}

// iq4Indices sets L[j] to the level nearest id·x[j].
func iq4Indices(L []uint8, x []float32, id float32) {
	for j, v := range x {
		L[j] = uint8(bestIndexInt8(float32(id * v)))
	}
}

// appendIQ4Nibbles packs 32 level indices, the first 16 in the low
// nibbles.
func appendIQ4Nibbles(dst []byte, L []uint8) []byte {
	for j := range 16 {
		dst = append(dst, L[j]|L[16+j]<<4)
	}
	return dst
}

// bestIndexInt8 is best_index_int8 over kvaluesIQ4NL: the index of the
// level nearest x, the upper one on a tie, found by bisection (so a NaN
// lands on the last level).
func bestIndexInt8(x float32) int {
	val := &kvaluesIQ4NL
	n := len(val)
	if x <= float32(val[0]) {
		return 0
	}
	if x >= float32(val[n-1]) {
		return n - 1
	}
	ml, mu := 0, n-1
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(val[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(val[mu-1]) < float32(val[mu])-x {
		return mu - 1
	}
	return mu
}
