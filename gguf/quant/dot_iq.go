package quant

// Dot products of the codebook i-quants (IQ1_S … IQ3_S) with Q8_K
// activations, following ggml_vec_dot_iq*_q8_K_generic. The grids and
// sign tables are those of iqtables.go.

import "encoding/binary"

// vecDotIQ2_XXS: per 32 values, four 8-bit grid indices, then four 7-bit
// sign indices and a 4-bit scale in one uint32.
func vecDotIQ2_XXS(w, a []byte, nb int) float32 {
	return iqSum(w, a, nb, blockIQ2XX, 0.125, func(x, q8 []byte) int32 {
		var bsum int32
		for ib := range qkIQ / 32 {
			q := x[2+8*ib : 10+8*ib]
			aux := binary.LittleEndian.Uint32(q[4:])
			var sumi int32
			for l := range 4 {
				sumi += dotSignedGrid(iq2xxsGrid[q[l]], ksignsIQ2XS[aux>>(7*l)&127], q8[32*ib+8*l:])
			}
			bsum += sumi * int32(2*(aux>>28)+1)
		}
		return bsum
	})
}

// vecDotIQ2_XS: uint16 entries of a 9-bit grid index and a 7-bit sign
// index, and a 4-bit scale per 16 values.
func vecDotIQ2_XS(w, a []byte, nb int) float32 {
	return iqSum(w, a, nb, blockIQ2XS, 0.125, func(x, q8 []byte) int32 {
		var bsum int32
		for ib := range qkIQ / 32 {
			for half := range 2 {
				var sumi int32
				for l := 2 * half; l < 2*half+2; l++ {
					q := binary.LittleEndian.Uint16(x[2+8*ib+2*l:])
					sumi += dotSignedGrid(iq2xsGrid[q&511], ksignsIQ2XS[q>>9], q8[32*ib+8*l:])
				}
				bsum += sumi * int32(2*(x[66+ib]>>(4*half)&15)+1)
			}
		}
		return bsum
	})
}

// vecDotIQ2_S: 10-bit grid indices (low bits in qs, high in qh), literal
// sign bytes, a 4-bit scale per 16 values.
func vecDotIQ2_S(w, a []byte, nb int) float32 {
	return iqSum(w, a, nb, blockIQ2S, 0.125, func(x, q8 []byte) int32 {
		qs, signs, qh, scales := x[2:34], x[34:66], x[66:74], x[74:82]
		var bsum int32
		for ib := range qkIQ / 32 {
			var sumi [2]int32
			for l := range 4 {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				sumi[l/2] += dotSignedGrid(iq2sGrid[idx], signs[4*ib+l], q8[32*ib+8*l:])
			}
			bsum += int32(2*(scales[ib]&15)+1)*sumi[0] + int32(2*(scales[ib]>>4)+1)*sumi[1]
		}
		return bsum
	})
}

// vecDotIQ3_XXS: pairs of 8-bit indices into a grid of 4-byte entries, and
// per 32 values a uint32 of four sign indices and a 4-bit scale.
func vecDotIQ3_XXS(w, a []byte, nb int) float32 {
	return iqSum(w, a, nb, blockIQ3XX, 0.25, func(x, q8 []byte) int32 {
		qs, gas := x[2:66], x[66:98]
		var bsum int32
		for ib := range qkIQ / 32 {
			aux := binary.LittleEndian.Uint32(gas[4*ib:])
			var sumi int32
			for l := range 4 {
				grid := iq3Pair(iq3xxsGrid[qs[8*ib+2*l]], iq3xxsGrid[qs[8*ib+2*l+1]])
				sumi += dotSignedGrid(grid, ksignsIQ2XS[aux>>(7*l)&127], q8[32*ib+8*l:])
			}
			bsum += sumi * int32(2*(aux>>28)+1)
		}
		return bsum
	})
}

// vecDotIQ3_S: 9-bit indices into a grid of 4-byte entries (the ninth bit
// in qh), literal sign bytes, a 4-bit scale per 32 values.
func vecDotIQ3_S(w, a []byte, nb int) float32 {
	return iqSum(w, a, nb, blockIQ3S, 1, func(x, q8 []byte) int32 {
		qs, qh, signs, scales := x[2:66], x[66:74], x[74:106], x[106:110]
		var bsum int32
		for ib := range qkIQ / 32 {
			var sumi int32
			for l := range 4 {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				sumi += dotSignedGrid(iq3Pair(iq3sGrid[i1], iq3sGrid[i2]), signs[4*ib+l], q8[32*ib+8*l:])
			}
			bsum += sumi * int32(2*(scales[ib/2]>>(4*(ib%2))&15)+1)
		}
		return bsum
	})
}

// iqSum is the float part the IQ2 and IQ3 kernels share: each block's
// integer sum, from blockSum, scaled by d·yd into the row's sum, which is
// multiplied by scale at the end (1 for IQ3_S, whose C has no factor).
func iqSum(w, a []byte, nb, blockBytes int, scale float32, blockSum func(x, q8 []byte) int32) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockBytes:(i+1)*blockBytes], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		sumf = fmaf(float32(f16At(x)*yd), float32(blockSum(x, q8)), sumf)
	}
	return float32(scale * sumf)
}

func vecDotIQ1_S(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockIQ1S:(i+1)*blockIQ1S], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		qs := x[2:34]
		var sumi, sumi1 int32
		for ib := range qkIQ / 32 {
			qh := binary.LittleEndian.Uint16(x[34+2*ib:])
			ls := int32(2*(qh>>12&7) + 1)
			var lsum int32
			for l := range 4 {
				lsum += dotIQ1Grid(iq1sGrid[int(qs[4*ib+l])|int(qh>>(3*l)&7)<<8], q8[32*ib+8*l:])
			}
			delta := int32(1)
			if qh&0x8000 != 0 {
				delta = -1
			}
			sumi += ls * lsum
			sumi1 += ls * delta * (bsum(y, 2*ib) + bsum(y, 2*ib+1))
		}
		sumf = fmaf(float32(f16At(x)*yd), iq1Total(sumi, sumi1), sumf)
	}
	return sumf
}

func vecDotIQ1_M(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockIQ1M:(i+1)*blockIQ1M], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		qs, qh := x[0:32], x[32:48]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(x[48+2*k:])
		}
		d := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00F0 | sc[2]>>4&0x0F00 | sc[3]&0xF000)
		var sumi1, sumi2 int32
		for ib := range qkIQ / 32 {
			var sum1, sum2 [2]int32
			for l := range 4 {
				h := qh[2*ib+l/2] >> (4 * (l % 2)) // this group's nibble: grid bits and delta sign
				q := q8[32*ib+8*l : 32*ib+8*l+8]
				sum1[l/2] += dotIQ1Grid(iq1sGrid[int(qs[4*ib+l])|int(h&7)<<8], q)
				lsum2 := dotI8Sum(q)
				if h&8 != 0 {
					lsum2 = -lsum2
				}
				sum2[l/2] += lsum2
			}
			shift := 6 * (ib % 2)
			ls1 := int32(2*(sc[ib/2]>>shift&7) + 1)
			ls2 := int32(2*(sc[ib/2]>>(shift+3)&7) + 1)
			sumi1 += sum1[0]*ls1 + sum1[1]*ls2
			sumi2 += sum2[0]*ls1 + sum2[1]*ls2
		}
		sumf = fmaf(float32(d*yd), iq1Total(sumi1, sumi2), sumf)
	}
	return sumf
}

// iq1Total is sumi + IQ1S_DELTA·sumi1; the product is exact, so GCC's
// fused form rounds the same.
func iq1Total(sumi, sumi1 int32) float32 {
	return float32(float32(sumi) + float32(iq1sDelta*float32(sumi1)))
}

// dotSignedGrid is Σ grid[j]·q8[j] over the 8 bytes of grid, negated
// where bit j of signs is set.
func dotSignedGrid(grid uint64, signs uint8, q8 []byte) int32 {
	q8 = q8[:8]
	var s int32
	for j, q := range q8 {
		neg := -int32(signs >> j & 1) // all ones where the sign is set: random signs mispredict branches
		s += (int32(uint8(grid>>(8*j)))*int32(int8(q)) ^ neg) - neg
	}
	return s
}

// dotIQ1Grid is Σ grid[j]·q8[j] over the 8 int8 bytes of an iq1sGrid entry.
func dotIQ1Grid(grid uint64, q8 []byte) int32 {
	q8 = q8[:8]
	var s int32
	for j, q := range q8 {
		s += int32(int8(grid>>(8*j))) * int32(int8(q))
	}
	return s
}

// dotI8Sum is Σ q8[j].
func dotI8Sum(q8 []byte) int32 {
	var s int32
	for _, q := range q8 {
		s += int32(int8(q))
	}
	return s
}

// iq3Pair joins two 4-byte IQ3 grid entries into the 8 bytes they cover.
func iq3Pair(lo, hi uint32) uint64 { return uint64(lo) | uint64(hi)<<32 }
