package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf/quant"
)

// deltaNet is one gated delta-net layer (qwen35moe's linear attention)
// over the normalised input in, as llama.cpp computes it with its
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
func (s *Session) deltaNet(il int, in Input, T int) (Tensor, error) {
	be, h, d := s.be, s.m.Hparams, s.m.Hparams.DeltaNet
	dl := s.m.layers[il].delta
	C, Hv, Sd, V := d.convDim(), d.ValueHeads, d.StateSize, d.valueDim()
	rec, err := s.recurrentState(il, (d.ConvKernel-1)*C, Hv*Sd*Sd)
	if err != nil {
		return Tensor{}, err
	}
	mixed, z := s.step.Tensor(T*C), s.step.Tensor(T*V)
	beta, alpha := s.step.Tensor(T*Hv), s.step.Tensor(T*Hv)
	be.MulMat(mixed, &dl.wqkv, in)
	be.MulMat(z, &dl.wgate, in)
	be.MulMat(beta, &dl.wbeta, in)
	be.MulMat(alpha, &dl.walph, in)
	be.DeltaGates(beta, alpha, &dl.dtBias, &dl.a, T, Hv)
	conv := s.step.Tensor(T * C)
	be.ConvSiLU(s.step, conv, rec.Conv(), &dl.conv, mixed, C, d.ConvKernel, T)
	// Each row's queries and keys, 2·KeyHeads heads of StateSize at its
	// start, are L2-normalised.
	kd := d.keyDim()
	qk := s.step.Tensor(T * 2 * kd)
	be.Copy(qk, 0, 2*kd, conv, 0, C, 2*kd, T)
	be.L2Norm(qk, h.RMSEps, T*2*d.KeyHeads, Sd)
	be.Copy(conv, 0, C, qk, 0, 2*kd, 2*kd, T)
	out := s.step.Tensor(T * V)
	be.DeltaNet(s.step, rec.SSM(), DeltaJob{Conv: conv, G: alpha, Beta: beta, Out: out, Rows: T, Heads: Hv,
		KeyHeads: d.KeyHeads, Size: Sd, ConvStride: C, QOff: 0, KOff: kd, VOff: 2 * kd, OutStride: V})
	// Each head's output, RMS-normalised, gated by silu(z).
	be.RMSNorm(out, out, &dl.norm, h.RMSEps, T*Hv, Sd)
	be.SiLU(z, z, T*Hv, Sd)
	be.Mul(out, out, z, T*V)
	return out, nil
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
