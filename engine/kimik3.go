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
func (s *Session) kda(il, T int) ([]float32, error) {
	m, h, k := s.m, s.m.Hparams, s.m.Hparams.KDA
	kl := m.layers[il].kda
	H, Sd := k.Heads, k.HeadDim
	inner := H * Sd
	rec := &s.state[il].rec
	if err := rec.alloc(3*(k.ConvKernel-1)*inner, H*Sd*Sd); err != nil {
		return nil, err
	}
	third := (k.ConvKernel - 1) * inner
	qkv := make([][]float32, 3)
	for i, p := range []struct {
		w    *matrix
		conv []float32
	}{{&kl.wq, kl.convQ}, {&kl.wk, kl.convK}, {&kl.wv, kl.convV}} {
		x := make([]float32, T*inner)
		m.work.mulMat(p.w, s.as.get(p.w.vt), x)
		qkv[i] = convolve(rec.conv[i*third:(i+1)*third], p.conv, x, inner, k.ConvKernel, T)
	}
	for t := range T {
		for hd := range H {
			l2Norm(qkv[0][t*inner+hd*Sd:][:Sd], h.RMSEps)
			l2Norm(qkv[1][t*inner+hd*Sd:][:Sd], h.RMSEps)
		}
	}
	g := s.kdaDecay(kl, T)
	beta := make([]float32, T*H)
	m.work.mulMat(&kl.wbeta, s.as.get(kl.wbeta.vt), beta)
	for i, v := range beta {
		beta[i] = sigmoid(v)
	}
	gate := make([]float32, T*inner)
	m.work.mulMat(&kl.wg, s.as.get(kl.wg.vt), gate)
	out := make([]float32, T*inner)
	m.work.forEach(H, 1, func(lo, hi int) {
		scratch := make([]float32, 2*Sd)
		for hd := lo; hd < hi; hd++ {
			state := rec.ssm[hd*Sd*Sd : (hd+1)*Sd*Sd]
			for t := range T {
				at := t*inner + hd*Sd
				deltaStepKDA(state, qkv[0][at:at+Sd], qkv[1][at:at+Sd], qkv[2][at:at+Sd], g[at:at+Sd], beta[t*H+hd], out[at:at+Sd], scratch)
			}
		}
	})
	for t := range T {
		for hd := range H {
			o := out[t*inner+hd*Sd:][:Sd]
			rmsNorm(o, o, kl.oNorm, h.RMSEps)
			for i, v := range gate[t*inner+hd*Sd:][:Sd] {
				o[i] *= sigmoid(v)
			}
		}
	}
	return out, nil
}

// kdaDecay is the per-channel decay gate g of T tokens: f_b·(f_a·h) plus
// the dt bias, then lower_bound·σ(exp(A_log)·…) when the model sets a
// lower bound (Kimi-K3), else −exp(A_log)·softplus(…).
func (s *Session) kdaDecay(kl *kdaLayer, T int) []float32 {
	m, k := s.m, s.m.Hparams.KDA
	inner := k.Heads * k.HeadDim
	fa := make([]float32, T*k.HeadDim)
	m.work.mulMat(&kl.fa, s.as.get(kl.fa.vt), fa)
	var sub actSet
	sub.reset(fa, k.HeadDim, T)
	g := make([]float32, T*inner)
	m.work.mulMat(&kl.fb, sub.get(kl.fb.vt), g)
	bounded := !math.IsInf(float64(k.GateLowerBound), -1)
	for i := range g {
		a := kl.a[(i%inner)/k.HeadDim]
		v := g[i] + kl.dtBias[i%inner]
		if bounded {
			y := (v * a) * -1 // ggml_scale(g, −1): exp(A_log)·(…)
			g[i] = sigmoid(y) * k.GateLowerBound
		} else {
			g[i] = softplus(v) * a
		}
	}
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

// latentMoE is Kimi-K3's MoE block over the normalised input hbuf (also
// in s.as): the router scores the full-width input, the routed experts run
// on its projection to the latent width, their sum is RMS-normalised (when
// the layer has the norm) and projected back, and the shared experts'
// output (full width, or nil) is added.
func (s *Session) latentMoE(ctx context.Context, il int, hbuf, shared []float32, T int) ([]float32, error) {
	m, h := s.m, s.m.Hparams
	lp := m.layers[il].latent
	lat := h.ExpertLatent
	in := make([]float32, T*lat)
	m.work.mulMat(&lp.down, s.as.get(lp.down.vt), in)
	sum := make([]float32, T*lat)
	if err := s.moe(ctx, il, hbuf, in, nil, sum, T); err != nil {
		return nil, err
	}
	if lp.norm != nil {
		for t := range T {
			r := sum[t*lat : (t+1)*lat]
			rmsNorm(r, r, lp.norm, h.RMSEps)
		}
	}
	var sub actSet
	sub.reset(sum, lat, T)
	out := make([]float32, T*h.Embd)
	m.work.mulMat(&lp.up, sub.get(lp.up.vt), out)
	for i, v := range shared {
		out[i] += v
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
func (s *Session) residualLayers(ctx context.Context, x, buf []float32, T int) error {
	m, h := s.m, s.m.Hparams
	D := h.Embd
	var stack [][]float32 // checkpoints, each T × D
	prefix := x
	cur := make([]float32, T*D)
	for il := range m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		L := &m.layers[il]
		resMix(cur, prefix, stack, L.attnRes, T, D, h.RMSEps)
		banked := il%h.ResBlockSize == 0
		if banked {
			stack = append(stack, append([]float32(nil), prefix...))
		}
		for t := range T {
			rmsNorm(buf[t*D:(t+1)*D], cur[t*D:(t+1)*D], L.attnNorm, h.RMSEps)
		}
		a, err := s.attnOut(il, buf, T)
		if err != nil {
			return err
		}
		if banked {
			copy(prefix, a)
		} else {
			for i := range prefix {
				prefix[i] += a[i]
			}
		}
		resMix(cur, prefix, stack, L.ffnRes, T, D, h.RMSEps)
		for t := range T {
			rmsNorm(buf[t*D:(t+1)*D], cur[t*D:(t+1)*D], L.ffnNorm, h.RMSEps)
		}
		f, err := s.ffnOut(ctx, il, buf, T)
		if err != nil {
			return err
		}
		for i := range prefix {
			prefix[i] += f[i]
		}
		if err := s.checkLayer(prefix, T, il, s.n); err != nil {
			return err
		}
	}
	resMix(cur, prefix, stack, m.outRes, T, D, h.RMSEps)
	copy(x, cur)
	return nil
}

// resMix writes to dst the residual attention's mix of the checkpoints and
// the running sum cur, as llama.cpp's res_mix: each is scored by the sum
// of its RMS-normalised values times score (summed in double), the scores
// softmaxed, and the raw values summed with those weights, checkpoints in
// order, then the running sum. With no checkpoint yet it is cur itself.
func resMix(dst, cur []float32, stack [][]float32, score []float32, T, D int, eps float32) {
	if len(stack) == 0 {
		copy(dst, cur)
		return
	}
	n := len(stack)
	norm := make([]float32, D)
	p := make([]float32, n+1)
	scoreOf := func(v []float32) float32 {
		rmsNorm(norm, v, score, eps)
		var sum float64
		for _, x := range norm {
			sum += float64(x)
		}
		return float32(sum)
	}
	for t := range T {
		for c, ck := range stack {
			p[c] = scoreOf(ck[t*D : (t+1)*D])
		}
		p[n] = scoreOf(cur[t*D : (t+1)*D])
		softmax(p)
		out := dst[t*D : (t+1)*D]
		for d := range out {
			var sum float32
			for c, ck := range stack {
				sum += ck[t*D+d] * p[c]
			}
			out[d] = sum + cur[t*D+d]*p[n]
		}
	}
}
