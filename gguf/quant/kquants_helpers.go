package quant

import "math"

// The level and scale searches of ggml-quants.c shared by the legacy and
// K-quant quantizers. Each follows its C original operation by operation:
// the same accumulation order, strict comparisons (which decide ties and
// NaN) and integer truncations, so that the chosen levels are identical.

// groupMaxEps is GROUP_MAX_EPS: groups whose largest magnitude is below it
// quantize to zero.
const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: adding 1.5·2^23 leaves the rounded
// (half to even) value in the low mantissa bits. It is used beyond the
// range the C asserts (|f| ≤ 2^22−1), for Inf, NaN and huge values too,
// where the trick's bits decide the result.
func nearestInt(f float32) int {
	// The conversion keeps a caller's product from fusing into the add.
	v := float32(f) + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// sqrtf is C's sqrtf: the float64 root of a float32 rounds to the
// correctly rounded float32 root.
func sqrtf(f float32) float32 { return float32(math.Sqrt(float64(f))) }

func sumSquares(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += float32(v * v)
	}
	return s
}

func sum32(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}

// importanceWeights sets w = qw·sqrt(σ² + x²), the imatrix weighting of the
// *_impl quantizers.
func importanceWeights(w, qw, x []float32, sigma2 float32) {
	// Callers divide by 256 for sigma2, which the compiler turns into a
	// product; the conversion keeps it from fusing into the add.
	sigma2 = float32(sigma2)
	for j, v := range x {
		w[j] = qw[j] * sqrtf(sigma2+float32(v*v))
	}
}

// signedMax returns the value of largest magnitude, the first on ties
// (NaN never wins), and that magnitude.
func signedMax(x []float32) (mx, amax float32) {
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, mx = ax, v
		}
	}
	return mx, amax
}

// makeQxQuants is make_qx_quants with rmse_type 1: symmetric levels
// L = l+nmax, l ∈ [−nmax, nmax−1], weighted by qw, or by x² when qw is nil.
// It returns the scale. len(x) ≤ 32.
func makeQxQuants(nmax int, x []float32, L []int8, qw []float32) float32 {
	mx, amax := signedMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / mx
	sumlx, suml2 := qxLevels(nmax, iscale, x, qw, L)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	var try [32]int8
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / mx
		sumlx, suml2 = qxLevels(nmax, iscale, x, qw, try[:len(x)])
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			copy(L, try[:len(x)])
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// qxLevels sets L for iscale and returns make_qx_quants' weighted sums.
func qxLevels(nmax int, iscale float32, x, qw []float32, L []int8) (sumlx, suml2 float32) {
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l + nmax)
		var w float32
		if qw != nil {
			w = qw[i]
		} else {
			w = v * v
		}
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	return sumlx, suml2
}

// makeQ3Quants is make_q3_quants with do_rmse: x²-weighted symmetric
// levels refined one element at a time.
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	mx, amax := signedMax(x)
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l)
		w := float32(v * v)
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newL := max(-nmax, min(nmax-1, nearestInt(float32(v*sl2)/slx)))
				if newL != int(L[i]) {
					fl := float32(newL)
					slx += float32(float32(w*v) * fl)
					sl2 += float32(float32(w*fl) * fl)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed = true
					}
				}
			}
		}
		if !changed {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQkxQuants is make_qkx2_quants, and make_qkx3_quants with weights:
// levels 0…nmax for x ≈ scale·L − theMin, searching nstep+1 candidate
// scales (rmin + rdelta·k + nmax)/(max − min) for the least weighted
// squared (or, with useMad, absolute) error. qkx3's degenerate test
// max <= min is qkx2's max == min: min is at most max unless both are NaN.
func makeQkxQuants(nmax int, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < len(x); i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L[:len(x)])
		return 0, -mn
	}
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	qkxLevels(nmax, iscale, mn, x, L)
	best := qkxError(scale, mn, x, weights, L, useMad)
	laux = laux[:len(x)]
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (mx - mn)
		qkxLevels(nmax, iscale, mn, x, laux)
		var sumL, sumL2, sumXL float32
		for i, l := range laux {
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			if cur := qkxError(thisScale, thisMin, x, weights, laux, useMad); cur < best {
				copy(L, laux)
				best = cur
				scale, mn = thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

func qkxLevels(nmax int, iscale, mn float32, x []float32, L []uint8) {
	for i, v := range x {
		L[i] = uint8(max(0, min(nmax, nearestInt(iscale*(v-mn)))))
	}
}

func qkxError(scale, mn float32, x, weights []float32, L []uint8, useMad bool) float32 {
	var e float32
	for i, v := range x {
		diff := float32(float32(scale*float32(L[i]))+mn) - v
		if useMad {
			diff = abs32(diff)
		} else {
			diff = diff * diff
		}
		e += float32(weights[i] * diff)
	}
	return e
}

// makeQpQuants is make_qp_quants: levels 0…nmax for the non-negative
// sub-block scales or mins x, weighted by qw. Negative levels wrap in L as
// they do in the C's uint8_t array, and the refinement reads them back
// wrapped.
func makeQpQuants(nmax int, x []float32, L []uint8, qw []float32) float32 {
	var mx float32
	for _, v := range x {
		if !(mx > v) { // MAX(max, x[i]) as ggml writes it, NaN included
			mx = v
		}
	}
	if mx < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(nmax) / mx
	for i, v := range x {
		L[i] = uint8(nearestInt(iscale * v))
	}
	scale := 1 / iscale
	var best float32
	for i, v := range x {
		diff := v - float32(scale*float32(L[i]))
		best += float32(float32(qw[i]*diff) * diff)
	}
	for is := -4; is <= 4; is++ {
		if is == 0 {
			continue
		}
		iscaleIs := (float32(0.1*float32(is)) + float32(nmax)) / mx
		scaleIs := 1 / iscaleIs
		var mse float32
		for i, v := range x {
			l := min(nmax, nearestInt(iscaleIs*v))
			diff := v - float32(scaleIs*float32(l))
			mse += float32(float32(qw[i]*diff) * diff)
		}
		if mse < best {
			best = mse
			iscale = iscaleIs
		}
	}
	var sumlx, suml2 float32
	for i, v := range x {
		l := min(nmax, nearestInt(iscale*v))
		L[i] = uint8(l)
		w := qw[i]
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := qw[i]
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			sl2 := suml2 - float32(float32(w*li)*li)
			if slx > 0 && sl2 > 0 {
				newL := min(nmax, nearestInt(float32(v*sl2)/slx))
				if newL != int(L[i]) {
					fl := float32(newL)
					slx += float32(float32(w*v) * fl)
					sl2 += float32(float32(w*fl) * fl)
					if float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = uint8(newL)
						sumlx, suml2 = slx, sl2
						changed = true
					}
				}
			}
		}
		if !changed {
			break
		}
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}
