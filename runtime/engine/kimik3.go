package engine

import (
	"context"
	"math"
)

// Kimi-K3's pieces: Kimi delta attention (KDA), the latent MoE, the situ
// activation and the cross-layer residual attention, as llama.cpp's
// src/models/kimi-k3.cpp builds them.

// kda is one Kimi delta-attention layer over the normalised input in
// s.as: q, k and v each through their own causal convolution (carrying
// their last ConvKernel−1 inputs) and SiLU, q and k L2-normalised, then
// the delta rule with a decay per channel, each head's output
// RMS-normalised and gated by σ(ssm_g·h). It returns T rows of heads ×
// head dim for the output projection.
func (s *Session) kda(il int, in Input, T int) (Tensor, error) {
	be, h, k := s.be, s.m.Hparams, s.m.Hparams.KDA
	kl := s.m.layers[il].kda
	H, Sd := k.Heads, k.HeadDim
	inner := H * Sd
	third := (k.ConvKernel - 1) * inner
	rec, err := s.recurrentState(il, 3*third, H*Sd*Sd)
	if err != nil {
		return Tensor{}, err
	}
	// q, k and v, each T × inner after its own convolution, one after
	// the other.
	qkv := s.step.Tensor(3 * T * inner)
	x := s.step.Tensor(T * inner)
	for i, p := range []struct {
		w    *matrix
		conv *vector
	}{{&kl.wq, &kl.convQ}, {&kl.wk, &kl.convK}, {&kl.wv, &kl.convV}} {
		be.MulMat(x, p.w, in)
		be.ConvSiLU(s.step, qkv.Slice(i*T*inner, (i+1)*T*inner), rec.Conv().Slice(i*third, (i+1)*third), p.conv, x, inner, k.ConvKernel, T)
	}
	be.L2Norm(qkv, h.RMSEps, 2*T*H, Sd) // the queries' and keys' heads
	g := s.kdaDecay(kl, in, T)
	beta := s.step.Tensor(T * H)
	be.MulMat(beta, &kl.wbeta, in)
	be.Sigmoid(beta, T*H)
	gate := s.step.Tensor(T * inner)
	be.MulMat(gate, &kl.wg, in)
	out := s.step.Tensor(T * inner)
	be.KDA(s.step, rec.SSM(), DeltaJob{Conv: qkv, G: g, Beta: beta, Out: out, Rows: T, Heads: H, KeyHeads: H, Size: Sd,
		ConvStride: inner, QOff: 0, KOff: T * inner, VOff: 2 * T * inner, OutStride: inner})
	be.RMSNorm(out, out, &kl.oNorm, h.RMSEps, T*H, Sd)
	be.GateSigmoid(out, gate, T*inner)
	return out, nil
}

// kdaDecay is the per-channel decay gate g of T tokens: f_b·(f_a·h) plus
// the dt bias, then lower_bound·σ(exp(A_log)·…) when the model sets a
// lower bound (Kimi-K3), else −exp(A_log)·softplus(…).
func (s *Session) kdaDecay(kl *kdaLayer, in Input, T int) Tensor {
	be, k := s.be, s.m.Hparams.KDA
	inner := k.Heads * k.HeadDim
	fa := s.step.Tensor(T * k.HeadDim)
	be.MulMat(fa, &kl.fa, in)
	g := s.step.Tensor(T * inner)
	be.MulMat(g, &kl.fb, be.Input(s.step, fa, k.HeadDim, T))
	be.KDADecay(g, &kl.dtBias, &kl.a, k.GateLowerBound, T, k.Heads, k.HeadDim)
	return g
}

// deltaStepKDA is deltaStep with a decay per channel: row j of the state
// (S[·][j]) is multiplied by exp(g) channel by channel. scratch holds
// 2·len(q) values.
func deltaStepKDA(state, q, k, v, g []float32, beta float32, out, scratch []float32) {
	n := len(q)
	decay := scratch[:n]
	for i, gi := range g {
		decay[i] = expf(gi)
	}
	for j := range n {
		row := state[j*n : (j+1)*n]
		for i := range row {
			row[i] *= decay[i]
		}
	}
	deltaUpdate(state, q, k, v, beta, out, scratch[n:2*n])
}

// latentMoE is Kimi-K3's MoE block over the normalised input hbuf (in,
// prepared for products): the router scores the full-width input, the
// routed experts run on its projection to the latent width, their sum is
// RMS-normalised (when the layer has the norm) and projected back, and
// the shared experts' output (full width, or empty) is added.
func (s *Session) latentMoE(ctx context.Context, il int, in Input, hbuf, shared Tensor, T int) (Tensor, error) {
	be, h := s.be, s.m.Hparams
	lp := s.m.layers[il].latent
	lat := h.ExpertLatent
	x := s.step.Tensor(T * lat)
	be.MulMat(x, &lp.down, in)
	sum := s.step.Tensor(T * lat)
	if err := s.moe(ctx, il, in, x, Tensor{}, sum, T); err != nil {
		return Tensor{}, err
	}
	if lp.norm.present() {
		be.RMSNorm(sum, sum, &lp.norm, h.RMSEps, T, lat)
	}
	out := s.step.Tensor(T * h.Embd)
	be.MulMat(out, &lp.up, be.Input(s.step, sum, lat, T))
	if shared.Len() > 0 {
		be.Add(out, out, shared, T*h.Embd)
	}
	return out, nil
}

// situ writes Kimi-K3's activation of gate and up to dst as ggml computes
// it: (tanh(g·(1/β))·β)·σ(g), times lb·tanh(u·(1/lb)) or u itself when
// lb ≤ 0.
func (a *situ) apply(dst, gate, up []float32) {
	inv, invLin := 1/a.beta, 1/a.linearBeta
	for i, g := range gate {
		t := float32(math.Tanh(float64(g*inv))) * a.beta
		t *= sigmoid(g)
		u := up[i]
		if a.linearBeta > 0 {
			u = float32(math.Tanh(float64(u*invLin))) * a.linearBeta
		}
		dst[i] = t * u
	}
}

// residualLayers runs every layer with Kimi-K3's cross-layer residual
// attention, leaving in x the final mix the output norm reads. Every
// ResBlockSize-th layer banks its raw input as a checkpoint and restarts
// the running sum from its attention output; before each attention, each
// FFN and the output, the input is a softmax-weighted mix of the
// checkpoints and the running sum.
func (s *Session) residualLayers(ctx context.Context, x, buf Tensor, T int) error {
	be, h := s.be, s.m.Hparams
	D := h.Embd
	// The checkpoints cross layers, so they are taken before the mark
	// each layer rewinds to: one per block of ResBlockSize layers.
	checkpoints := s.scratch.stack[:0]
	for range (len(s.m.layers) + h.ResBlockSize - 1) / h.ResBlockSize {
		checkpoints = append(checkpoints, s.step.Tensor(T*D))
	}
	s.scratch.stack = checkpoints
	stack := checkpoints[:0] // those banked so far, each T × D
	prefix := x
	cur := s.step.Tensor(T * D)
	mark := s.step.Mark()
	for il := range s.m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.step.Rewind(mark) // the last layer's activations are done with
		L := &s.m.layers[il]
		be.ResMix(s.step, cur, prefix, stack, &L.attnRes, h.RMSEps, T, D)
		banked := il%h.ResBlockSize == 0
		if banked {
			ck := checkpoints[len(stack)]
			be.Copy(ck, 0, T*D, prefix, 0, T*D, T*D, 1)
			stack = append(stack, ck)
		}
		be.RMSNorm(buf, cur, &L.attnNorm, h.RMSEps, T, D)
		a, err := s.attnOut(il, buf, T)
		if err != nil {
			return err
		}
		if banked {
			be.Copy(prefix, 0, T*D, a, 0, T*D, T*D, 1)
		} else {
			be.Add(prefix, prefix, a, T*D)
		}
		be.ResMix(s.step, cur, prefix, stack, &L.ffnRes, h.RMSEps, T, D)
		be.RMSNorm(buf, cur, &L.ffnNorm, h.RMSEps, T, D)
		f, err := s.ffnOut(ctx, il, buf, T)
		if err != nil {
			return err
		}
		be.Add(prefix, prefix, f, T*D)
		if err := s.checkLayer(prefix, T, il, s.n); err != nil {
			return err
		}
	}
	be.ResMix(s.step, cur, prefix, stack, &s.m.outRes, h.RMSEps, T, D)
	be.Copy(x, 0, T*D, cur, 0, T*D, T*D, 1)
	return nil
}
