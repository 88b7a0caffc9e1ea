package quant

import "math"

// MXFP4 quantization without the reference's search. best_index_mxfp4
// takes the first of the 16 levels k·d (kvaluesMXFP4) with the least
// rounded error |k·d − x|; mxfp4Grid finds the same index from where x
// lies between the levels, and the vector kernel (mxfp4_fast_amd64.s)
// does the same eight values at a time.
//
// Why only two levels need comparing, for a block scale d = 2^(e−128)
// and |x| < 16·d (every finite value of a block whose amax set e, also
// when e wrapped around):
//   - k·d is exact (k has at most four significant bits) or +Inf.
//   - For x > 0 the zero level (index 0) has error x, no more than any
//     negative level's x+|k|·d, and comes first, so the answer is among
//     indices 0–7; for x < 0 symmetrically among 0 and 9–15, where index
//     8+j has the same error as index j has for |x|. Lower magnitudes have
//     lower indices on both sides, so ties go to the lower magnitude.
//   - Two levels on the same side of |x| are at least d apart, while the
//     errors are below 28·d, where a float's ulp is at most 2^−19·d (or
//     2^−149 ≤ 2^−21·d), so rounding cannot make them tie or swap: only
//     the levels just below and just above |x| can be nearest, and of
//     those the reference takes the upper one only when its rounded error
//     is strictly smaller.
//
// NaN and ±Inf, and any |x| ≥ 16·d, go to the reference search.

// mxfp4Mags are the magnitudes of kvaluesMXFP4[0:8], and mxfp4Below[k]
// the index of the largest one at most k, for k = 0…15.
var (
	mxfp4Mags  = [8]float32{0, 1, 2, 3, 4, 6, 8, 12}
	mxfp4Below = [16]uint8{0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7}
)

// mxfp4Scale is what the search needs of a block scale e: d, 1/d as two
// exact power-of-two factors (inv1·inv2; 2^128 for e = 0 is not a
// float32) and lim = 16·d, past which a value goes to the reference.
// The vector kernel reads these four floats in this order.
type mxfp4Scale struct{ d, inv1, inv2, lim float32 }

// mxfp4Scales holds every e's mxfp4Scale.
var mxfp4Scales = func() (s [256]mxfp4Scale) {
	for e := range s {
		d := E8M0ToF32Half(uint8(e))
		s[e] = mxfp4Scale{d: d, inv1: 1, lim: 16 * d}
		switch e {
		case 0:
			s[e].inv1 = 0x1p64
			s[e].inv2 = 0x1p64
		case 255:
			s[e].inv2 = math.Float32frombits(1 << 22) // 2^−127, subnormal
		default:
			s[e].inv2 = math.Float32frombits(uint32(255-e) << 23) // 2^(128−e)
		}
	}
	return s
}()

// mxfp4ScaleFromBits is the block scale floor(log2f(amax))−2+127 read off
// amax's bits, where that is exact: for amax = 0 it is 0, and for a
// normal amax = m·2^E it is E+125 (mod 256) unless m ≥ 2−2^−15, so close
// to 2 that log2f may round up to E+1 (log2 m ≤ 1−2^−15.5 otherwise,
// while float32 spacing below 128 is at most 2^−17). exact is false for
// those, for subnormals and for +Inf, which need the log2.
func mxfp4ScaleFromBits(amax float32) (e uint8, exact bool) {
	b := math.Float32bits(amax)
	exp := b >> 23
	switch {
	case b == 0:
		return 0, true
	case exp == 0 || exp == 255 || b&(1<<23-1) >= 1<<23-1<<8:
		return 0, false
	}
	return uint8(exp - 2), true
}

// mxfp4Grid is one block's levels: lev[j] = mxfp4Mags[j]·d and lev[8…] =
// +Inf (nothing above 12·d; 16 entries so that a masked index needs no
// bounds check), with the block's mxfp4Scale.
type mxfp4Grid struct {
	lev [16]float32
	mxfp4Scale
}

// newMXFP4Grid is the grid of the block scale e.
func newMXFP4Grid(e uint8) mxfp4Grid {
	g := mxfp4Grid{mxfp4Scale: mxfp4Scales[e]}
	for j, m := range mxfp4Mags {
		g.lev[j] = m * g.d
	}
	for j := len(mxfp4Mags); j < len(g.lev); j++ {
		g.lev[j] = float32(math.Inf(1))
	}
	return g
}

// index is bestIndexMXFP4(x, g.d), without a data-dependent branch where
// |x| < 16·d: the errors are non-negative floats (or +Inf), which compare
// as their bits do, so the sign of the bits' difference says whether the
// upper level is strictly nearer.
func (g *mxfp4Grid) index(x float32) byte {
	a := abs32(x)
	if !(a < g.lim) {
		return bestIndexMXFP4(x, g.d)
	}
	// Both products are exact where the result is at least 2^−126, and
	// below that its floor is 0 anyway; it is below 16, so k is the floor
	// of a/d.
	k := int32(a * g.inv1 * g.inv2)
	j := uint32(mxfp4Below[k&15])
	errLo := math.Float32bits(a - g.lev[j&15])
	errHi := math.Float32bits(g.lev[(j+1)&15] - a)
	j += (errHi - errLo) >> 31
	neg := math.Float32bits(x) >> 31
	j |= neg & ((j + 7) >> 3) << 3 // 8+j for x < 0, but 0 stays 0
	return byte(j)
}
