package quant

// Q3_K and Q6_K dot products with Q8_K activations.

// The Q3_K … Q6_K kernels unpack a block's levels, then sum level·q8·scale
// per lane: lane l gets the values whose index is l mod 8, as the C's
// aux32[8] does. Each lane is scaled into its own float accumulator, and
// the eight are added up only at the end of the row.

func vecDotQ3_K(w, a []byte, nb int) float32 {
	var sums [8]float32
	var levels [qkK]int8
	for i := range nb {
		x, y := w[i*blockQ3K:(i+1)*blockQ3K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		hm, scales := x[:32], x[96:108]
		for n := range 2 {
			q3 := x[32+32*n : 64+32*n]
			for k := range 4 {
				m := uint8(1) << (4*n + k)
				lv := levels[128*n+32*k:]
				for l, q := range q3 {
					lv[l] = int8(q >> (2 * k) & 3)
					if hm[l]&m == 0 {
						lv[l] -= 4
					}
				}
			}
		}
		var acc [8]int32
		for j := range 16 {
			addLanes(&acc, levels[16*j:16*j+16], q8[16*j:], int32(q3Scale(scales, j)))
		}
		fmaLanes(&sums, float32(f16At(x[108:])*yd), &acc)
	}
	return addUp(0, &sums)
}

func vecDotQ6_K(w, a []byte, nb int) float32 {
	var sums [8]float32
	var levels [qkK]int8
	for i := range nb {
		x, y := w[i*blockQ6K:(i+1)*blockQ6K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		for n := range 2 {
			ql, qh, lv := x[64*n:64*n+64], x[128+32*n:160+32*n], levels[128*n:]
			for l, h := range qh {
				lv[l] = int8(ql[l]&0xF|(h>>0&3)<<4) - 32
				lv[l+32] = int8(ql[l+32]&0xF|(h>>2&3)<<4) - 32
				lv[l+64] = int8(ql[l]>>4|(h>>4&3)<<4) - 32
				lv[l+96] = int8(ql[l+32]>>4|(h>>6&3)<<4) - 32
			}
		}
		var acc [8]int32
		for j := range 16 {
			addLanes(&acc, levels[16*j:16*j+16], q8[16*j:], int32(int8(x[192+j])))
		}
		fmaLanes(&sums, float32(f16At(x[208:])*yd), &acc)
	}
	return addUp(0, &sums)
}
