package quant

// Q4_K and Q5_K dot products with Q8_K activations.

func vecDotQ4_K(w, a []byte, nb int) float32 {
	return vecDotQ45_K(w, a, nb, blockQ4K, func(x []byte, levels *[qkK]int8) {
		for j := range 4 {
			for l, q := range x[16+32*j : 48+32*j] {
				levels[64*j+l] = int8(q & 0xF)
				levels[64*j+32+l] = int8(q >> 4)
			}
		}
	})
}

func vecDotQ5_K(w, a []byte, nb int) float32 {
	return vecDotQ45_K(w, a, nb, blockQ5K, func(x []byte, levels *[qkK]int8) {
		qh := x[16:48]
		for j := range 4 {
			for l, q := range x[48+32*j : 80+32*j] {
				levels[64*j+l] = int8(q&0xF + q5KHigh(qh[l], 1<<(2*j)))
				levels[64*j+32+l] = int8(q>>4 + q5KHigh(qh[l], 2<<(2*j)))
			}
		}
	})
}

// vecDotQ45_K is the kernel Q4_K and Q5_K share, given their level
// unpacking: eight sub-blocks of 32 with 6-bit scales and mins.
func vecDotQ45_K(w, a []byte, nb, blockBytes int, unpack func(x []byte, levels *[qkK]int8)) float32 {
	var sumf float32
	var sums [8]float32
	var levels [qkK]int8
	for i := range nb {
		x, y := w[i*blockBytes:(i+1)*blockBytes], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		unpack(x, &levels)
		var acc [8]int32
		var sumi int32
		for j := range 8 {
			sc, m := scaleMinK4(x[4:16], j)
			sumi += (bsum(y, 2*j) + bsum(y, 2*j+1)) * int32(m)
			addLanes(&acc, levels[32*j:32*j+32], q8[32*j:], int32(sc))
		}
		fmaLanes(&sums, float32(f16At(x)*yd), &acc)
		sumf = fmaf(-float32(f16At(x[2:])*yd), float32(sumi), sumf)
	}
	return addUp(sumf, &sums)
}
