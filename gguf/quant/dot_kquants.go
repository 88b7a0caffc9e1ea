package quant

// Dot products of the 256-value super-block types paired with Q8_K
// activations (a float32 scale d, int8 qs[256] and int16 bsums[16], the
// sums of each 16 values), following ggml_vec_dot_*_q8_K_generic.

import "encoding/binary"

// q8K splits a Q8_K block into its scale and quants.
func q8K(y []byte) (d float32, qs []byte) { return f32At(y), y[4:260] }

// bsum is a Q8_K block's sum of values 16j … 16j+15.
func bsum(y []byte, j int) int32 { return int32(int16(binary.LittleEndian.Uint16(y[260+2*j:]))) }

func vecDotQ2_K(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ2K:(i+1)*blockQ2K], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		sc := x[:16]
		var summs int32
		for j := range 16 {
			summs += bsum(y, j) * int32(sc[j]>>4)
		}
		var isum int32
		for j := range 16 { // sub-block j: 16 values at bit pair j/2%4 of qs half j/8
			q2 := x[16+32*(j/8)+16*(j%2):]
			isum += int32(sc[j]&0xF) * dotCrumbs(q2[:16], uint(2*(j/2%4)), q8[16*j:], 0)
		}
		dall, dmin := float32(yd*f16At(x[80:])), float32(yd*f16At(x[82:]))
		sumf = float32(sumf + fmaf(dall, float32(isum), -float32(dmin*float32(summs))))
	}
	return sumf
}

// vecDotTQ1_0: base-3 digits, five per byte of qs[0:48] and four per byte
// of qh[48:52], in the order dequantizeTQ1_0 writes them.
func vecDotTQ1_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockTQ1:(i+1)*blockTQ1], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		sum := dotTrits(x[0:32], 5, q8[0:160]) + dotTrits(x[32:48], 5, q8[160:240]) + dotTrits(x[48:52], 4, q8[240:256])
		sumf = fmaf(float32(sum), float32(f16At(x[52:])*yd), sumf)
	}
	return sumf
}

// vecDotTQ2_0: Σ (q−1)·y as llama.cpp's SIMD kernels form it, Σ q·y less
// the activations' stored bsums (the generic C's sum wherever the bsums
// are the quants' sums, as QuantizeActivations makes them); exact int32.
func vecDotTQ2_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockTQ2:(i+1)*blockTQ2], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		var sumi int32
		for j := 0; j < 64; j += 32 {
			for l := range 4 {
				sumi += dotCrumbs(x[j:j+32], uint(2*l), q8[4*j+32*l:], 0)
			}
		}
		for j := range qkK / 16 {
			sumi -= bsum(y, j)
		}
		sumf = fmaf(float32(sumi), float32(yd*f16At(x[64:])), sumf)
	}
	return sumf
}

func vecDotIQ4_XS(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockIQ4XS:(i+1)*blockIQ4XS], a[i*blockQ8K:(i+1)*blockQ8K]
		yd, q8 := q8K(y)
		d4d8 := float32(f16At(x) * yd)
		h := binary.LittleEndian.Uint16(x[2:])
		for ib := range qkK / 32 {
			ls := int32(x[4+ib/2]>>(4*(ib%2))&0xF) | int32(h>>(2*ib)&3)<<4
			dl := float32(d4d8 * float32(ls-32))
			sumi := dotNibbles(&kvaluesIQ4NL, x[8+16*ib:24+16*ib], q8[32*ib:])
			sumf = fmaf(dl, float32(sumi), sumf)
		}
	}
	return sumf
}

// fmaLanes scales each lane's integer sum by d into its accumulator.
func fmaLanes(sums *[8]float32, d float32, acc *[8]int32) {
	for l, v := range acc {
		sums[l] = fmaf(d, float32(v), sums[l])
	}
}

// dotCrumbs is Σ (bits shift…shift+1 of qs[j] − off)·q8[j].
func dotCrumbs(qs []byte, shift uint, q8 []byte, off int32) int32 {
	q8 = q8[:len(qs)]
	var s int32
	for j, q := range qs {
		s += (int32(q>>shift&3) - off) * int32(int8(q8[j]))
	}
	return s
}

// dotTrits is Σ (trit−1)·q8 where trit n of byte j of qs (n < trits)
// pairs with q8[n·len(qs)+j]. Multiplying by 3^n brings trit n to the top
// of the byte (wrapping), and ×3>>8 reads it off.
func dotTrits(qs []byte, trits int, q8 []byte) int32 {
	var s int32
	for n := range trits {
		y := q8[n*len(qs) : (n+1)*len(qs)]
		for j, q := range qs {
			t := int32(uint16(q*pow3[n]) * 3 >> 8)
			s += (t - 1) * int32(int8(y[j]))
		}
	}
	return s
}

// hsumFloat8 adds eight lane accumulators as llama.cpp's hsum_float_8
// does: the upper half onto the lower, then (0+2)+(1+3).
func hsumFloat8(a *[8]float32) float32 {
	r0, r1, r2, r3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return float32(r0+r2) + float32(r1+r3)
}
