package quant

// Q3_K and Q6_K dot products with Q8_K activations, in the order of
// llama.cpp's haswell AVX2 kernels ggml_vec_dot_q3_K_q8_K and
// ggml_vec_dot_q6_K_q8_K (ggml-cpu/arch/x86/quants.c), which is the order
// vector code can reach at speed.
//
// Both kernels walk a super-block of 256 values as eight chunks of 32,
// one 256-bit register each. VPMADDUBSW multiplies a chunk's unsigned
// levels by its signed q8 and adds neighbouring products into 16 int16s
// (values 2m and 2m+1); VPMADDWD with the sub-block scales then adds
// neighbouring int16s into 8 int32s. So int32 lane t of a chunk holds
//
//	scale(sub-block 2c + t/4) · Σ level[32c+v]·q8[32c+v], v = 4t … 4t+3,
//
// lanes 0–3 covering the chunk's first sub-block of 16 values and lanes
// 4–7 its second. The eight chunks are added lane by lane into sumi. In
// float, lane t accumulates fma(d, float32(sumi[t]), acc[t]) per
// super-block with d = y.d·f16(x.d) rounded to float32, and hsumFloat8
// adds the eight lanes as hsum_float_8 does at the end of the row.
//
// Every int16 above is exact (no VPMADDUBSW saturation can occur: the
// bounds are given per kernel) and every int32 sum is far from
// overflowing, so the integer lanes do not depend on the order in which
// they are summed; the float operations are the C's, one for one.

// vecDotQ3_K is ggml_vec_dot_q3_K_q8_K's AVX2 branch: levels −4…3, each
// the 2 bits of qs minus 4 where the hmask bit is clear, scaled by 6-bit
// sub-block scales minus 32.
func vecDotQ3_K(w, a []byte, nb int) float32 {
	var acc [8]float32
	for i := range nb {
		x, y := w[i*blockQ3K:(i+1)*blockQ3K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		sumi := q3KLanes(x, q8)
		fmaLanes(&acc, float32(yd*f16At(x[108:])), &sumi)
	}
	return hsumFloat8(&acc)
}

// q3KLanes is one Q3_K super-block's sumi. Chunk c = 4j+k takes bits 2k
// and 2k+1 of qs[32j:32j+32] and bit 4j+k of hmask[0:32]. The C computes
// VPMADDUBSW(q3 & 3, q8) − VPMADDUBSW(4·(hmask bit clear), q8): the
// pair sums are at most 2·3·128 and 2·4·128 in magnitude and their
// difference is Σ level·q8 over the pair, exactly.
func q3KLanes(x, q8 []byte) (sumi [8]int32) {
	hm, qs, sc := x[:32], x[32:96], x[96:108]
	for c := range 8 {
		j, k := c/4, c%4
		q3, y := qs[32*j:32*j+32], q8[32*c:32*c+32]
		for t := range 8 {
			var s int32
			for v := 4 * t; v < 4*t+4; v++ {
				level := int32(q3[v]>>(2*k)&3) - 4*int32(^hm[v]>>(4*j+k)&1)
				s += level * int32(int8(y[v]))
			}
			sumi[t] += int32(q3Scale(sc, 2*c+t/4)) * s
		}
	}
	return sumi
}

// vecDotQ6_K is ggml_vec_dot_q6_K_q8_K's AVX2 branch: the unsigned 6-bit
// levels 0…63 are multiplied as they are, and the offset of 32 is taken
// off afterwards through the activations' bsums, as the C does.
func vecDotQ6_K(w, a []byte, nb int) float32 {
	var acc [8]float32
	for i := range nb {
		x, y := w[i*blockQ6K:(i+1)*blockQ6K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, _ := q8K(y)
		sumi := q6KLanes(x, y)
		fmaLanes(&acc, float32(yd*f16At(x[208:])), &sumi)
	}
	return hsumFloat8(&acc)
}

// q6KLanes is one Q6_K super-block's sumi, y its Q8_K block. Chunk
// c = 4j+k takes nibble k/2 of ql[64j+32(k%2):][:32] and bits 2k, 2k+1 of
// qh[32j:32j+32]; the VPMADDUBSW pair sums are at most 2·63·128 < 2^15 in
// magnitude, exact. Then the C subtracts q8sclsub, lane t of
// VPMADDWD(bsums, scales)·32: 32·(bsum[2t]·sc[2t] + bsum[2t+1]·sc[2t+1]),
// read from the bsums bytes whether or not they match qs.
func q6KLanes(x, y []byte) (sumi [8]int32) {
	ql, qh, sc := x[:128], x[128:192], x[192:208]
	_, q8 := q8K(y)
	for c := range 8 {
		j, k := c/4, c%4
		lo, hi, q := ql[64*j+32*(k%2):][:32], qh[32*j:32*j+32], q8[32*c:32*c+32]
		for t := range 8 {
			var s int32
			for v := 4 * t; v < 4*t+4; v++ {
				level := int32(lo[v]>>(4*(k/2))&0xF | (hi[v]>>(2*k)&3)<<4)
				s += level * int32(int8(q[v]))
			}
			sumi[t] += int32(int8(sc[2*c+t/4])) * s
		}
	}
	for t := range sumi {
		sumi[t] -= (bsum(y, 2*t)*int32(int8(sc[2*t])) + bsum(y, 2*t+1)*int32(int8(sc[2*t+1]))) << 5
	}
	return sumi
}
