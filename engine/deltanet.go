package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf/quant"
)

// deltaNet is one gated delta-net layer (qwen35moe's linear attention)
// over the normalised input in s.as, as llama.cpp computes it with its
// fused ggml_gated_delta_net: a causal convolution of [q | k | v] that
// carries its last ConvKernel−1 inputs across calls, SiLU, L2-normalised
// queries and keys, then per value head the recurrence
//
//	S ← S·exp(g);  δ = (v − S·k)·β;  S ← S + δ⊗k;  o = S·q / √d
//
// over the session's state, token by token, so a batch and the same
// tokens one at a time leave the same state. Each head's output is
// RMS-normalised and gated by silu(z). It returns T rows of the value
// width, for the layer's output projection.
func (s *Session) deltaNet(il, T int) ([]float32, error) {
	m, h, d := s.m, s.m.Hparams, s.m.Hparams.DeltaNet
	dl := m.layers[il].delta
	C, Hv, Sd := d.convDim(), d.ValueHeads, d.StateSize
	mixed := make([]float32, T*C)
	z := make([]float32, T*d.valueDim())
	beta := make([]float32, T*Hv)
	alpha := make([]float32, T*Hv)
	m.work.mulMat(&dl.wqkv, s.as.get(dl.wqkv.vt), mixed)
	m.work.mulMat(&dl.wgate, s.as.get(dl.wgate.vt), z)
	m.work.mulMat(&dl.wbeta, s.as.get(dl.wbeta.vt), beta)
	m.work.mulMat(&dl.walph, s.as.get(dl.walph.vt), alpha)
	for i, v := range beta {
		beta[i] = sigmoid(v)
	}
	for i, v := range alpha {
		hd := i % Hv
		alpha[i] = softplus(v+dl.dtBias[hd]) * dl.a[hd] // the decay gate g
	}
	rec := &s.state[il].rec
	if err := rec.alloc((d.ConvKernel-1)*C, Hv*Sd*Sd); err != nil {
		return nil, err
	}
	conv := s.convolveQKV(il, mixed, T)
	out := make([]float32, T*d.valueDim())
	kd := d.keyDim()
	m.work.forEach(Hv, 1, func(lo, hi int) {
		scratch := make([]float32, Sd)
		for hv := lo; hv < hi; hv++ {
			kh := hv % d.KeyHeads // ggml_gated_delta_net pairs value head h with key head h mod H_k
			state := rec.ssm[hv*Sd*Sd : (hv+1)*Sd*Sd]
			for t := range T {
				row := conv[t*C : (t+1)*C]
				q := row[kh*Sd : (kh+1)*Sd]
				k := row[kd+kh*Sd : kd+(kh+1)*Sd]
				v := row[2*kd+hv*Sd : 2*kd+(hv+1)*Sd]
				deltaStep(state, q, k, v, alpha[t*Hv+hv], beta[t*Hv+hv], out[t*d.valueDim()+hv*Sd:][:Sd], scratch)
			}
		}
	})
	for t := range T {
		for hv := range Hv {
			o := out[t*d.valueDim()+hv*Sd:][:Sd]
			zg := z[t*d.valueDim()+hv*Sd:][:Sd]
			rmsNorm(o, o, dl.norm, h.RMSEps)
			siluInto(zg, zg)
			for i := range o {
				o[i] *= zg[i]
			}
		}
	}
	return out, nil
}

// convolveQKV runs a delta-net layer's convolution over its [q | k | v]
// rows and L2-normalises each key head's queries and keys; deltaNet
// allocated the state.
func (s *Session) convolveQKV(il int, mixed []float32, T int) []float32 {
	h, d := s.m.Hparams, s.m.Hparams.DeltaNet
	C, K := d.convDim(), d.ConvKernel
	out := convolve(s.state[il].rec.conv, s.m.layers[il].delta.conv, mixed, C, K, T)
	for t := range T {
		o := out[t*C : (t+1)*C]
		for kh := range 2 * d.KeyHeads {
			l2Norm(o[kh*d.StateSize:(kh+1)*d.StateSize], h.RMSEps)
		}
	}
	return out
}

// convolve runs a causal convolution of K taps per channel (kernel:
// channel by channel) over T rows of C channels, preceded by the K−1 rows
// kept in state from earlier calls (zeros at first), keeps the last K−1
// rows in state, and returns silu of the result: ggml_ssm_conv, a float
// sum in tap order, then ggml_silu.
func convolve(state, kernel, x []float32, C, K, T int) []float32 {
	// window holds the K−1 kept rows, then the T new ones: position-major.
	window := append(append(make([]float32, 0, (K-1+T)*C), state...), x...)
	out := make([]float32, T*C)
	for t := range T {
		o := out[t*C : (t+1)*C]
		for c := range C {
			var sum float32
			for i, w := range kernel[c*K : (c+1)*K] {
				sum += window[(t+i)*C+c] * w
			}
			o[c] = sum
		}
		siluInto(o, o)
	}
	copy(state, window[T*C:])
	return out
}

// deltaStep advances one head's state by one token with a scalar decay
// and writes its output, with the operations of ggml's CPU kernel: the
// state is stored with row j holding S[·][j], so each row is decayed,
// dotted with k, updated by a multiply-add and dotted with q. delta is
// scratch of len(q).
func deltaStep(state, q, k, v []float32, g, beta float32, out, delta []float32) {
	decay := expf(g)
	for i := range state {
		state[i] *= decay
	}
	deltaUpdate(state, q, k, v, beta, out, delta)
}

// deltaUpdate is the delta rule on a decayed state: δ = (v − S·k)·β,
// S += δ⊗k, out = S·q/√n; delta is scratch of len(q).
func deltaUpdate(state, q, k, v []float32, beta float32, out, delta []float32) {
	n := len(q)
	scale := 1 / float32(math.Sqrt(float64(n)))
	for j := range n {
		delta[j] = (v[j] - quant.DotFloat32(state[j*n:(j+1)*n], k)) * beta
	}
	for j := range n {
		row := state[j*n : (j+1)*n]
		i0 := 0
		if vecMad != nil {
			i0 = n &^ 7
			vecMad(row[:i0], k[:i0], delta[j])
		}
		for i := i0; i < n; i++ {
			row[i] = quant.FMA32(k[i], delta[j], row[i])
		}
	}
	for j := range n {
		out[j] = quant.DotFloat32(state[j*n:(j+1)*n], q) * scale
	}
}

// l2Norm scales x to unit length as ggml_l2_norm: the squares summed in
// double, divided by max(√sum, eps).
func l2Norm(x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / max(float32(math.Sqrt(float64(float32(sum)))), eps)
	for i := range x {
		x[i] *= scale
	}
}

// softplus is ggml's: log(1 + eˣ), or x above 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + expf(x))))
}
