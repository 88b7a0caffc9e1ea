package engine

import (
	"errors"
	"fmt"

	"github.com/gguftool/gguftool/gguf"
)

// layer is one transformer block's resident weights. Which fields are set
// depends on the architecture: ordinary attention (wq, wk, wv) or
// DeepSeek's latent attention (mla); a dense FFN (dense) or routed
// experts (router and the expert shapes), with or without shared experts.
type layer struct {
	attnNorm, ffnNorm vector
	wq, wk, wv, wo    matrix
	bq, bk, bv, bo    vector // empty when absent
	qNorm, kNorm      vector // empty unless the layer normalises q and k
	sinks             vector // per-head sink logits (gpt-oss), or empty
	window            int    // sliding attention window; 0 attends to everything
	ropeBase          float32
	mla               *mlaLayer
	delta             *deltaNetLayer // a gated delta-net (linear attention) layer, or nil
	kda               *kdaLayer      // a Kimi delta-attention layer, or nil
	attnGate          matrix         // kimi-k3: x → sigmoid gate on the attention output; empty if none
	// attnRes and ffnRes score the banked checkpoints of kimi-k3's
	// residual attention before the attention and the FFN; nil without it.
	attnRes, ffnRes vector

	dense      *ffnWeights // a leading dense block's FFN; nil for MoE blocks
	shared     *ffnWeights // the shared experts, or nil
	sharedGate matrix      // qwen35moe: one row giving the shared expert's sigmoid gate; empty if none
	latent     *latentProj // kimi-k3: the projections around latent routed experts, or nil

	router     matrix
	routerBias vector // added to the router's logits (gpt-oss), or empty
	probsBias  vector // exp_probs_b: added to the scores that select experts only, or empty
	layout     ExpertLayout
	// One expert's gate, up and down matrices without their bytes, which
	// the expert source supplies per fetch; gate is unused (zero) when
	// the layer has none.
	gateExp, upExp, downExp matrix
}

// ffnWeights is a SwiGLU feed-forward network: down(silu(gate·x)·up·x).
type ffnWeights struct{ gate, up, down matrix }

// mlaLayer is one block of multi-head latent attention.
type mlaLayer struct {
	wqA, wqB   matrix   // the query LoRA (wq holds the direct projection when there is none)
	qANorm     vector   // RMSNorm between wqA and wqB
	wkvA       matrix   // x → [latent | shared RoPE key]
	kvANorm    vector   // RMSNorm of the latent
	wkB, wvB   matrix   // absorbed layout: per head, [nope → latent] and [latent → value]
	wkBH, wvBH []matrix // the same, one matrix per head
	wkvB       matrix   // legacy layout: latent → per head [key nope | value]
	qRowFloats int      // floats of one token's query: heads × (nope + rope)
}

// deltaNetLayer is one gated delta-net layer's weights. Its output
// projection (ssm_out) is the layer's wo.
type deltaNetLayer struct {
	wqkv, wgate  matrix // x → [q | k | v] before the convolution; x → z, the output gate
	wbeta, walph matrix // x → β and α, one per value head
	conv         vector // the convolution kernel: channel by channel, ConvKernel taps each
	dtBias, a    vector // per value head: α's bias and the decay rate A (negative)
	norm         vector // RMSNorm of each head's output, [value head width]
}

// kdaLayer is one Kimi delta-attention layer's weights; its output
// projection is the layer's wo.
type kdaLayer struct {
	wq, wk, wv          matrix // x → q, k, v before their convolutions
	convQ, convK, convV vector // per channel, ConvKernel taps
	fa, fb              matrix // the decay gate's low-rank projection, x → head dim → heads × head dim
	wbeta               matrix // x → β per head
	a                   vector // per head: −exp(A_log)
	dtBias              vector // heads × head dim
	wg                  matrix // x → the output gate, heads × head dim
	oNorm               vector // RMSNorm of each head's output
}

// latentProj are kimi-k3's projections into and out of the latent width
// the routed experts run at.
type latentProj struct {
	down, up matrix
	norm     vector // RMSNorm of the routed sum before up, or empty
}

// isMoE says whether block il routes to experts (the others are dense).
func (h *Hparams) isMoE(il int) bool { return il >= h.DenseLeading && il < h.Layers }

// MoELayers is the number of layers that route to experts.
func (h *Hparams) MoELayers() int { return max(0, h.Layers-h.DenseLeading) }

// layerLoader loads one block's tensors, collecting every error.
type layerLoader struct {
	l    *loader
	p    string // "blk.N."
	errs []error
}

func (ll *layerLoader) vec(dst *vector, name string, n int, optional bool) {
	var err error
	if optional {
		dst.f, err = ll.l.optionalVector(ll.p+name, n)
	} else {
		dst.f, err = ll.l.vector(ll.p+name, n)
	}
	ll.errs = append(ll.errs, err)
}

func (ll *layerLoader) mat(dst *matrix, name string, cols, rows, n int) {
	var err error
	*dst, err = ll.l.matrix(ll.p+name, cols, rows, n)
	ll.errs = append(ll.errs, err)
}

func (ll *layerLoader) ffn(prefix, suffix string, D, F int) *ffnWeights {
	f := &ffnWeights{}
	ll.mat(&f.gate, prefix+"_gate"+suffix+".weight", D, F, 0)
	ll.mat(&f.up, prefix+"_up"+suffix+".weight", D, F, 0)
	ll.mat(&f.down, prefix+"_down"+suffix+".weight", F, D, 0)
	return f
}

func (m *Model) loadLayer(l *loader, i int) error {
	h := m.Hparams
	D, E := h.Embd, h.Experts
	L := &m.layers[i]
	ll := &layerLoader{l: l, p: fmt.Sprintf("blk.%d.", i)}
	ll.vec(&L.attnNorm, "attn_norm.weight", D, false)
	ll.vec(&L.ffnNorm, h.ffnNormName+".weight", D, false)
	L.ropeBase = h.RopeBase
	if h.swaPeriod > 0 && i%h.swaPeriod < h.swaPeriod-1 {
		L.window, L.ropeBase = h.SlidingWindow, h.ropeBaseSWA
	}
	recurrent := h.Recurrent != nil && h.Recurrent[i]
	switch {
	case recurrent && h.KDA != nil:
		m.loadKDA(ll, L)
	case recurrent:
		m.loadDeltaNet(ll, L)
	case h.MLA != nil:
		m.loadMLA(ll, L)
	default:
		m.loadAttention(ll, L)
	}
	if h.ResBlockSize > 0 {
		ll.vec(&L.attnRes, "attn_res_score.weight", D, false)
		ll.vec(&L.ffnRes, "ffn_res_score.weight", D, false)
	}
	if !h.isMoE(i) {
		L.dense = ll.ffn("ffn", "", D, h.DenseFF)
		return errors.Join(ll.errs...)
	}
	ll.mat(&L.router, "ffn_gate_inp.weight", D, E, 0)
	ll.vec(&L.routerBias, "ffn_gate_inp.bias", E, h.Arch != "gpt-oss")
	ll.vec(&L.probsBias, "exp_probs_b.bias", E, h.Arch != "glm4moe" && h.Arch != "kimi-k3")
	if h.ExpertLatent > 0 {
		L.latent = &latentProj{}
		ll.mat(&L.latent.down, "ffn_routed_down.weight", D, h.ExpertLatent, 0)
		ll.mat(&L.latent.up, "ffn_routed_up.weight", h.ExpertLatent, D, 0)
		ll.vec(&L.latent.norm, "ffn_routed_norm.weight", h.ExpertLatent, true)
	}
	switch {
	case h.Arch == "qwen35moe":
		L.shared = ll.ffn("ffn", "_shexp", D, h.sharedFF)
		ll.mat(&L.sharedGate, "ffn_gate_inp_shexp.weight", D, 1, 0)
	case h.Arch == "kimi-k3":
		// Optional in Kimi-K3's loader, width F × max(shared count, 1).
		if _, _, ok := ll.l.tab.find(ll.p + "ffn_gate_shexp.weight"); ok {
			L.shared = ll.ffn("ffn", "_shexp", D, h.ExpertFF*max(h.SharedExperts, 1))
		}
	case h.SharedExperts > 0:
		L.shared = ll.ffn("ffn", "_shexp", D, h.ExpertFF*h.SharedExperts)
	}
	if err := errors.Join(ll.errs...); err != nil {
		return err
	}
	return L.expertShapes(h, i, m.experts.Layout(i), ll.p)
}

// loadAttention loads ordinary multi-head attention.
func (m *Model) loadAttention(ll *layerLoader, L *layer) {
	h := m.Hparams
	D, HD := h.Embd, h.HeadDim
	qDim, kvDim := h.Heads*HD, h.HeadsKV*HD
	qRows := qDim
	if h.gatedAttn {
		qRows = 2 * qDim // each head's query, then its output gate
	}
	ll.mat(&L.wq, "attn_q.weight", D, qRows, 0)
	ll.mat(&L.wk, "attn_k.weight", D, kvDim, 0)
	ll.mat(&L.wv, "attn_v.weight", D, kvDim, 0)
	ll.mat(&L.wo, "attn_output.weight", qDim, D, 0)
	ll.vec(&L.bq, "attn_q.bias", qDim, true)
	ll.vec(&L.bk, "attn_k.bias", kvDim, true)
	ll.vec(&L.bv, "attn_v.bias", kvDim, true)
	ll.vec(&L.bo, "attn_output.bias", D, true)
	switch h.qkNorm {
	case qkNormPerHead:
		optional := h.Arch == "glm4moe" // GLM-4.5 has them, GLM-4.5-Air not
		ll.vec(&L.qNorm, "attn_q_norm.weight", HD, optional)
		ll.vec(&L.kNorm, "attn_k_norm.weight", HD, optional)
	case qkNormWhole:
		ll.vec(&L.qNorm, "attn_q_norm.weight", qDim, false)
		ll.vec(&L.kNorm, "attn_k_norm.weight", kvDim, false)
	}
	if h.sinks {
		ll.vec(&L.sinks, "attn_sinks.weight", h.Heads, false)
	}
}

// loadDeltaNet loads a gated delta-net layer.
func (m *Model) loadDeltaNet(ll *layerLoader, L *layer) {
	h, d := m.Hparams, m.Hparams.DeltaNet
	D := h.Embd
	dl := &deltaNetLayer{}
	L.delta = dl
	ll.mat(&dl.wqkv, "attn_qkv.weight", D, d.convDim(), 0)
	ll.mat(&dl.wgate, "attn_gate.weight", D, d.valueDim(), 0)
	ll.mat(&dl.wbeta, "ssm_beta.weight", D, d.ValueHeads, 0)
	ll.mat(&dl.walph, "ssm_alpha.weight", D, d.ValueHeads, 0)
	ll.floats(&dl.conv, "ssm_conv1d.weight", d.ConvKernel, d.convDim())
	ll.vec(&dl.dtBias, "ssm_dt.bias", d.ValueHeads, false)
	ll.vec(&dl.a, "ssm_a", d.ValueHeads, false)
	ll.vec(&dl.norm, "ssm_norm.weight", d.StateSize, false)
	ll.mat(&L.wo, "ssm_out.weight", d.valueDim(), D, 0)
}

// floats loads a small [cols, rows] tensor of any type as float32s.
func (ll *layerLoader) floats(dst *vector, name string, cols, rows int) {
	var err error
	dst.f, err = ll.l.floats(ll.p+name, cols, rows)
	ll.errs = append(ll.errs, err)
}

// loadMLA loads DeepSeek's latent attention in either layout.
func (m *Model) loadMLA(ll *layerLoader, L *layer) {
	h, a := m.Hparams, m.Hparams.MLA
	D, H := h.Embd, h.Heads
	ml := &mlaLayer{qRowFloats: H * (a.NoPE + a.RoPE)}
	L.mla = ml
	if a.QLoraRank > 0 {
		ll.mat(&ml.wqA, "attn_q_a.weight", D, a.QLoraRank, 0)
		ll.vec(&ml.qANorm, "attn_q_a_norm.weight", a.QLoraRank, false)
		ll.mat(&ml.wqB, "attn_q_b.weight", a.QLoraRank, ml.qRowFloats, 0)
	} else {
		ll.mat(&L.wq, "attn_q.weight", D, ml.qRowFloats, 0)
	}
	ll.mat(&ml.wkvA, "attn_kv_a_mqa.weight", D, a.KVLoraRank+a.RoPE, 0)
	ll.vec(&ml.kvANorm, "attn_kv_a_norm.weight", a.KVLoraRank, false)
	if a.Absorbed {
		ll.mat(&ml.wkB, "attn_k_b.weight", a.NoPE, a.KVLoraRank, H)
		ll.mat(&ml.wvB, "attn_v_b.weight", a.KVLoraRank, a.Value, H)
		if ml.wkB.data != nil && ml.wvB.data != nil {
			for hd := range H {
				ml.wkBH = append(ml.wkBH, ml.wkB.slice(hd))
				ml.wvBH = append(ml.wvBH, ml.wvB.slice(hd))
			}
		}
	} else {
		ll.mat(&ml.wkvB, "attn_kv_b.weight", a.KVLoraRank, H*(a.NoPE+a.Value), 0)
	}
	ll.mat(&L.wo, "attn_output.weight", H*a.Value, D, 0)
	if h.Arch == "kimi-k3" {
		if _, _, ok := ll.l.tab.find(ll.p + "attn_gate.weight"); ok {
			ll.mat(&L.attnGate, "attn_gate.weight", D, H*a.Value, 0)
		}
	}
}

// loadKDA loads a Kimi delta-attention layer.
func (m *Model) loadKDA(ll *layerLoader, L *layer) {
	h, k := m.Hparams, m.Hparams.KDA
	D, inner := h.Embd, k.Heads*k.HeadDim
	kl := &kdaLayer{}
	L.kda = kl
	ll.mat(&kl.wq, "attn_q.weight", D, inner, 0)
	ll.mat(&kl.wk, "attn_k.weight", D, inner, 0)
	ll.mat(&kl.wv, "attn_v.weight", D, inner, 0)
	for _, c := range []struct {
		dst  *vector
		name string
	}{{&kl.convQ, "ssm_conv1d_q.weight"}, {&kl.convK, "ssm_conv1d_k.weight"}, {&kl.convV, "ssm_conv1d_v.weight"}} {
		// [d_conv, 1, d_inner] or, quantized, [d_conv, d_inner]: the same floats.
		var err error
		c.dst.f, err = ll.l.floats(ll.p+c.name, k.ConvKernel, inner)
		if err != nil {
			c.dst.f, err = ll.l.floats(ll.p+c.name, k.ConvKernel, 1, inner)
		}
		ll.errs = append(ll.errs, err)
	}
	ll.mat(&kl.fa, "ssm_f_a.weight", D, k.HeadDim, 0)
	ll.mat(&kl.fb, "ssm_f_b.weight", k.HeadDim, inner, 0)
	ll.mat(&kl.wbeta, "ssm_beta.weight", D, k.Heads, 0)
	ll.vec(&kl.a, "ssm_a", k.Heads, false)
	ll.vec(&kl.dtBias, "ssm_dt.bias", inner, false)
	ll.mat(&kl.wg, "ssm_g.weight", D, inner, 0)
	ll.vec(&kl.oNorm, "ssm_norm.weight", k.HeadDim, false)
	ll.mat(&L.wo, "attn_output.weight", inner, D, 0)
}

// expertShapes describes one expert's matrices from the source's layout.
func (L *layer) expertShapes(h *Hparams, il int, layout ExpertLayout, p string) error {
	D, F := h.expertIn(), h.expertFF(il)
	L.layout = layout
	var err error
	if layout.Gate != gguf.TypeCount {
		if L.gateExp, err = newShape(p+"ffn_gate_exps.weight", layout.Gate, D, F); err != nil {
			return err
		}
	}
	if L.upExp, err = newShape(p+"ffn_up_exps.weight", layout.Up, D, F); err != nil {
		return err
	}
	L.downExp, err = newShape(p+"ffn_down_exps.weight", layout.Down, F, D)
	return err
}
