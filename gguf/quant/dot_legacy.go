package quant

// Dot products of the types paired with Q8_0 or Q8_1 activations (blocks
// of 32 values, a scale, and for Q8_1 the scaled sum s = d·Σq), following
// ggml_vec_dot_*_q8_0_generic and ggml_vec_dot_*_q8_1_generic.

import "encoding/binary"

const blockQ8_1 = 36 // d, s, qs[32]

// Level tables that let the 4-bit types share dotNibbles with the
// non-linear ones.
var (
	levelsQ4_0 = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}
	levelsQ4_1 = [16]int8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

func vecDotQ4_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ4_0:(i+1)*blockQ4_0], a[i*blockQ8_0:(i+1)*blockQ8_0]
		sumi := dotNibbles(&levelsQ4_0, x[2:], y[2:])
		sumf = fmaf(float32(float32(sumi)*f16At(x)), f16At(y), sumf)
	}
	return sumf
}

func vecDotQ4_1(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ4_1:(i+1)*blockQ4_1], a[i*blockQ8_1:(i+1)*blockQ8_1]
		sumi := dotNibbles(&levelsQ4_1, x[4:], y[4:])
		sumf = float32(sumf + affineBlock(x, y, sumi))
	}
	return sumf
}

func vecDotQ5_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ5_0:(i+1)*blockQ5_0], a[i*blockQ8_0:(i+1)*blockQ8_0]
		sumi := dotQ5(x[6:], binary.LittleEndian.Uint32(x[2:]), y[2:], 16)
		sumf = fmaf(float32(f16At(x)*f16At(y)), float32(sumi), sumf)
	}
	return sumf
}

func vecDotQ5_1(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ5_1:(i+1)*blockQ5_1], a[i*blockQ8_1:(i+1)*blockQ8_1]
		sumi := dotQ5(x[8:], binary.LittleEndian.Uint32(x[4:]), y[4:], 0)
		sumf = float32(sumf + affineBlock(x, y, sumi))
	}
	return sumf
}

// affineBlock is a Q4_1/Q5_1 block's term (dx·dy)·sumi + mx·sy: GCC fused
// the first product into the addition and rounded the second.
func affineBlock(x, y []byte, sumi int32) float32 {
	return fmaf(float32(f16At(x)*f16At(y)), float32(sumi), float32(f16At(x[2:])*f16At(y[2:])))
}

func vecDotQ8_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockQ8_0:(i+1)*blockQ8_0], a[i*blockQ8_0:(i+1)*blockQ8_0]
		sumi := dotI8(x[2:], y[2:])
		sumf = fmaf(float32(sumi), float32(f16At(x)*f16At(y)), sumf)
	}
	return sumf
}

func vecDotMXFP4(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockMXFP4:(i+1)*blockMXFP4], a[i*blockQ8_0:(i+1)*blockQ8_0]
		d := float32(f16At(y) * E8M0ToF32Half(x[0]))
		sumf = fmaf(d, float32(dotNibbles(&kvaluesMXFP4, x[1:], y[2:])), sumf)
	}
	return sumf
}

func vecDotIQ4_NL(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x, y := w[i*blockIQ4NL:(i+1)*blockIQ4NL], a[i*blockQ8_0:(i+1)*blockQ8_0]
		d := float32(f16At(y) * f16At(x))
		sumf = fmaf(d, float32(dotNibbles(&kvaluesIQ4NL, x[2:], y[2:])), sumf)
	}
	return sumf
}

// vecDotNVFP4: a block of 64 is four sub-blocks of 16 with their own UE4M3
// scales, two to each Q8_0 block.
func vecDotNVFP4(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x := w[i*blockNVFP4 : (i+1)*blockNVFP4]
		for s := range qkNVFP4 / qkNVFP4Sub {
			y := a[(2*i+s/2)*blockQ8_0:]
			off := 2 + (s%2)*qkNVFP4Sub
			sumi := dotNibbles(&kvaluesMXFP4, x[4+8*s:4+8*s+8], y[off:off+qkNVFP4Sub])
			sumf = fmaf(float32(f16At(y)*ue4m3ToF32Half(x[s])), float32(sumi), sumf)
		}
	}
	return sumf
}

// vecDotQ1_0: a block of 128 signs spans four Q8_0 blocks, whose scaled
// sums are accumulated in float before the block's own scale.
func vecDotQ1_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x := w[i*blockQ1_0 : (i+1)*blockQ1_0]
		var sumi float32
		for k := range 4 {
			y := a[(4*i+k)*blockQ8_0 : (4*i+k+1)*blockQ8_0]
			sumi = fmaf(f16At(y), float32(dotSigns(x[2+4*k:6+4*k], y[2:])), sumi)
		}
		sumf = fmaf(f16At(x), sumi, sumf)
	}
	return sumf
}

// vecDotQ2_0: a block of 64 two-bit levels (−1…2) spans two Q8_0 blocks.
func vecDotQ2_0(w, a []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		x := w[i*blockQ2_0 : (i+1)*blockQ2_0]
		var sumi float32
		for k := range 2 {
			y := a[(2*i+k)*blockQ8_0 : (2*i+k+1)*blockQ8_0]
			sumi = fmaf(f16At(y), float32(dotPairs(x[2+8*k:10+8*k], y[2:])), sumi)
		}
		sumf = fmaf(f16At(x), sumi, sumf)
	}
	return sumf
}

// dotI8 is Σ x[j]·y[j] over int8 bytes.
func dotI8(x, y []byte) int32 {
	y = y[:len(x)]
	var s int32
	for j, q := range x {
		s += int32(int8(q)) * int32(int8(y[j]))
	}
	return s
}

// dotNibbles is Σ tab[lo(qs[j])]·y[j] + tab[hi(qs[j])]·y[j+len(qs)]: the
// low nibbles of qs hold the first half of the values, the high nibbles
// the second.
func dotNibbles(tab *[16]int8, qs, y []byte) int32 {
	lo, hi := y[:len(qs)], y[len(qs):2*len(qs)]
	var s0, s1 int32 // two chains, so the additions overlap
	for j, q := range qs {
		s0 += int32(tab[q&15]) * int32(int8(lo[j]))
		s1 += int32(tab[q>>4]) * int32(int8(hi[j]))
	}
	return s0 + s1
}

// dotQ5 is dotNibbles for 5-bit levels minus off, the fifth bits in qh.
func dotQ5(qs []byte, qh uint32, y []byte, off int32) int32 {
	qs, y = qs[:16], y[:32]
	var s int32
	for j, q := range qs {
		lo, hi := q5Levels(q, qh, j)
		s += (int32(lo)-off)*int32(int8(y[j])) + (int32(hi)-off)*int32(int8(y[j+16]))
	}
	return s
}

// dotSigns is Σ ±y[j], + where bit j of bits is set.
func dotSigns(bits, y []byte) int32 {
	y = y[:8*len(bits)]
	var s int32
	for b, m := range bits {
		for t := range 8 {
			neg := int32(m>>t&1) - 1 // all ones where the bit is clear, without a branch
			s += (int32(int8(y[8*b+t])) ^ neg) - neg
		}
	}
	return s
}

// dotPairs is Σ (level−1)·y over the four two-bit levels of each byte,
// lowest bits first.
func dotPairs(qs, y []byte) int32 {
	y = y[:4*len(qs)]
	var s int32
	for b, q := range qs {
		for t := range 4 {
			s += (int32(q>>(2*t)&3) - 1) * int32(int8(y[4*b+t]))
		}
	}
	return s
}
