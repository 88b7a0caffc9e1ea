package quant

// Q4_K and Q5_K dot products with Q8_K activations, in the order of
// llama.cpp's haswell AVX2 kernels ggml_vec_dot_q4_K_q8_K and
// ggml_vec_dot_q5_K_q8_K (arch/x86/quants.c), which define the result.
//
// A block holds eight sub-blocks of 32 levels, sub-block j with the
// 6-bit scale sc[j] and min m[j]; value v = d·sc·level − dmin·m, so the
// dot product with Q8_K's q8 splits into Σ d·sc[j]·level·q8 and
// −dmin·Σ m[j]·(sum of q8 over sub-block j), the latter read from the
// activations' bsums.
//
// The scaled part lives in eight int32 lanes, one per 4-byte group of a
// 32-byte vector: VPMADDUBSW multiplies levels by q8 and adds adjacent
// pairs into 16 int16s, VPMADDWD with a broadcast scale adds adjacent
// int16s into 8 int32s, so lane l of sub-block j gets
// sc[j]·Σ level·q8 over its values 4l … 4l+3. Lane l sums that over the
// eight sub-blocks, and each block adds its lanes, converted to float, to
// eight float accumulators with one fused multiply-add by d. The sums
// cannot overflow or saturate (levels ≤ 31, |q8| ≤ 128, scales ≤ 63), so
// any order of the integer additions gives the same lanes.
//
// The mins part pairs bsums with VPHADDW, which wraps in int16: pair k
// is bsums[2k]+bsums[2k+1] (the sum of sub-block k's q8 when the bsums
// are honest), and VPMADDWD with the mins gives four int32 lanes,
// m[2k]·pair[2k] + m[2k+1]·pair[2k+1]. Q4_K keeps four float
// accumulators of them (fused multiply-add by dmin); Q5_K adds the four
// into one int32 and that, times dmin, into one float (contracted by GCC
// into a fused multiply-add).

import "encoding/binary"

// vecDotQ4_K is ggml_vec_dot_q4_K_q8_K's AVX2 branch: the levels of
// sub-blocks 2c and 2c+1 are the low and high nibbles of qs[32c:32c+32].
func vecDotQ4_K(w, a []byte, nb int) float32 {
	var acc [8]float32
	var accM [4]float32
	for i := range nb {
		x, y := w[i*blockQ4K:(i+1)*blockQ4K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		d := float32(yd * f16At(x))
		dmin := float32(-yd * f16At(x[2:]))
		mins := q45KMinLanes(x[4:16], y)
		for k, v := range mins {
			accM[k] = fmaf(dmin, float32(v), accM[k])
		}
		var sumi [8]int32
		for j := range 8 {
			sc, _ := scaleMinK4(x[4:16], j)
			qs, q := (*[32]byte)(x[16+32*(j/2):]), (*[32]byte)(q8[32*j:])
			shift := uint(4 * (j % 2))
			for l := range sumi {
				var s int32
				for b := 4 * l; b < 4*l+4; b++ {
					s += int32(qs[b]>>shift&0xF) * int32(int8(q[b]))
				}
				sumi[l] += int32(sc) * s
			}
		}
		fmaLanes(&acc, d, &sumi)
	}
	// acc_m's reduction: lanes 0+2 and 1+3 (MOVHLPS), then those two (MOVSHDUP).
	m := float32(float32(accM[0]+accM[2]) + float32(accM[1]+accM[3]))
	return float32(hsumFloat8(&acc) + m)
}

// vecDotQ5_K is ggml_vec_dot_q5_K_q8_K's AVX2 branch: Q4_K's nibbles
// plus 16 where bit j of qh[b] is set, for value b of sub-block j.
func vecDotQ5_K(w, a []byte, nb int) float32 {
	var acc [8]float32
	var summs float32
	for i := range nb {
		x, y := w[i*blockQ5K:(i+1)*blockQ5K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		d := float32(yd * f16At(x))
		dmin := float32(-yd * f16At(x[2:]))
		mins := q45KMinLanes(x[4:16], y)
		// VPHADDD twice: (lane 0 + lane 1) + (lane 2 + lane 3), wrapping.
		summs = fmaf(dmin, float32((mins[0]+mins[1])+(mins[2]+mins[3])), summs)
		qh := (*[32]byte)(x[16:48])
		var sumi [8]int32
		for j := range 8 {
			sc, _ := scaleMinK4(x[4:16], j)
			qs, q := (*[32]byte)(x[48+32*(j/2):]), (*[32]byte)(q8[32*j:])
			shift := uint(4 * (j % 2))
			for l := range sumi {
				var s int32
				for b := 4 * l; b < 4*l+4; b++ {
					level := qs[b]>>shift&0xF + q5KHigh(qh[b], 1<<j)
					s += int32(level) * int32(int8(q[b]))
				}
				sumi[l] += int32(sc) * s
			}
		}
		fmaLanes(&acc, d, &sumi)
	}
	return float32(hsumFloat8(&acc) + summs)
}

// q45KMinLanes is the mins' VPMADDWD: lane k is
// m[2k]·pair[2k] + m[2k+1]·pair[2k+1], where pair[s] is
// bsums[2s]+bsums[2s+1] wrapped to int16 as VPHADDW does. scales is the
// block's 12 packed scale bytes, y the Q8_K block.
func q45KMinLanes(scales, y []byte) [4]int32 {
	var lanes [4]int32
	for s := range 8 {
		_, m := scaleMinK4(scales, s)
		b := y[260+4*s : 264+4*s]
		pair := int16(binary.LittleEndian.Uint16(b)) + int16(binary.LittleEndian.Uint16(b[2:]))
		lanes[s/2] += int32(m) * int32(pair)
	}
	return lanes
}
