package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf/quant"
)

// The vectorised exponential llama.cpp's haswell CPU backend uses in SiLU
// and softmax (ggml_v_expf and ggml_v_silu in ggml-cpu/vec.h, AVX2 + FMA),
// one lane at a time: it differs from expf in the last bits, and those
// bits decide how activations round when they are quantized to Q8_0
// before the next product.

const (
	expRound = 0x1.8p23
	expLog2e = 0x1.715476p+0
	expLn2Hi = 0x1.62e4p-1
	expLn2Lo = 0x1.7f7d1cp-20
	expC5    = 0x1.0e4020p-7
	expC4    = 0x1.573e2ep-5
	expC3    = 0x1.555e66p-3
	expC2    = 0x1.fffdb6p-2
	expC1    = 0x1.ffffecp-1
)

// vExpf is one lane of ggml_v_expf.
func vExpf(x float32) float32 {
	fma := quant.FMA32
	z := fma(x, expLog2e, expRound)
	n := z - expRound
	b := fma(-n, expLn2Lo, fma(-n, expLn2Hi, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma(fma(fma(expC5, b, expC4), u, fma(expC3, b, expC2)), u, float32(expC1*b))
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fma(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma(s2, j, s2) * s1
}

// swiglu writes silu(g)·u to y as ggml_vec_swiglu_f32: ggml_v_silu on
// runs of eight, x/(1+expf(−x)) on the rest.
func swiglu(y, g, u []float32) {
	n8 := len(y) &^ 7
	if vecSwigluRuns != nil {
		vecSwigluRuns(y[:n8], g[:n8], u[:n8])
	} else {
		for i := range n8 {
			y[i] = vSilu(g[i]) * u[i]
		}
	}
	for i := n8; i < len(y); i++ {
		y[i] = silu(g[i]) * u[i]
	}
}

// siluInto writes silu(x) to y as ggml_vec_silu_f32 does.
func siluInto(y, x []float32) {
	n8 := len(y) &^ 7
	if vecSiluRuns != nil {
		vecSiluRuns(y[:n8], x[:n8])
	} else {
		for i := range n8 {
			y[i] = vSilu(x[i])
		}
	}
	for i := n8; i < len(y); i++ {
		y[i] = silu(x[i])
	}
}

// vSilu is one lane of ggml_v_silu: x/(1+v_expf(−x)).
func vSilu(x float32) float32 { return x / (1 + vExpf(0-x)) }

// softmax replaces x with its softmax as ggml_soft_max does on haswell:
// v_expf(x − max) on runs of eight, each run's lanes added as
// (l0+l4 + l2+l6) + (l1+l5 + l3+l7) and accumulated in double, expf on
// the rest, then every value scaled by the float reciprocal of the sum.
func softmax(x []float32) { softmaxOf(x, 0, false) }

// softmaxSink is softmax with an attention sink (gpt-oss): a logit with
// no value that joins the maximum and the denominator, as
// ggml_soft_max_ext does with its sinks argument.
func softmaxSink(x []float32, sink float32) { softmaxOf(x, sink, true) }

func softmaxOf(x []float32, sink float32, hasSink bool) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	if hasSink {
		m = max(m, sink)
	}
	var sum float64
	n8 := len(x) &^ 7
	if vecSoftmaxRuns != nil {
		sum = vecSoftmaxRuns(x[:n8], m)
	} else {
		for i := 0; i < n8; i += 8 {
			v := x[i : i+8 : i+8]
			for l := range v {
				v[l] = vExpf(v[l] - m)
			}
			a0, a1, a2, a3 := v[4]+v[0], v[5]+v[1], v[6]+v[2], v[7]+v[3]
			sum += float64((a0 + a2) + (a1 + a3))
		}
	}
	for i := n8; i < len(x); i++ {
		e := expf(x[i] - m)
		x[i] = e
		sum += float64(e)
	}
	if hasSink {
		sum += float64(expf(sink - m))
	}
	inv := float32(1 / sum)
	i0 := 0
	if vecScale != nil {
		vecScale(x[:n8], inv)
		i0 = n8
	}
	for i := i0; i < len(x); i++ {
		x[i] *= inv
	}
}
