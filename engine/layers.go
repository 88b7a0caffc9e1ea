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
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    matrix
	bq, bk, bv, bo    []float32 // nil when absent
	qNorm, kNorm      []float32 // nil unless the layer normalises q and k
	sinks             []float32 // per-head sink logits (gpt-oss), or nil
	window            int       // sliding attention window; 0 attends to everything
	ropeBase          float32
	mla               *mlaLayer

	dense  *ffnWeights // a leading dense block's FFN; nil for MoE blocks
	shared *ffnWeights // the shared experts, or nil

	router     matrix
	routerBias []float32 // added to the router's logits (gpt-oss), or nil
	probsBias  []float32 // exp_probs_b: added to the scores that select experts only, or nil
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
	wqA, wqB   matrix    // the query LoRA (wq holds the direct projection when there is none)
	qANorm     []float32 // RMSNorm between wqA and wqB
	wkvA       matrix    // x → [latent | shared RoPE key]
	kvANorm    []float32 // RMSNorm of the latent
	wkB, wvB   matrix    // absorbed layout: per head, [nope → latent] and [latent → value]
	wkvB       matrix    // legacy layout: latent → per head [key nope | value]
	qRowFloats int       // floats of one token's query: heads × (nope + rope)
}

// isMoE says whether block il routes to experts (the others are dense).
func (h *Hparams) isMoE(il int) bool { return il >= h.DenseLeading && il < h.Layers }

// layerLoader loads one block's tensors, collecting every error.
type layerLoader struct {
	l    *loader
	p    string // "blk.N."
	errs []error
}

func (ll *layerLoader) vec(dst *[]float32, name string, n int, optional bool) {
	var err error
	if optional {
		*dst, err = ll.l.optionalVector(ll.p+name, n)
	} else {
		*dst, err = ll.l.vector(ll.p+name, n)
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
	if h.MLA != nil {
		m.loadMLA(ll, L)
	} else {
		m.loadAttention(ll, L)
	}
	if !h.isMoE(i) {
		L.dense = ll.ffn("ffn", "", D, h.DenseFF)
		return errors.Join(ll.errs...)
	}
	ll.mat(&L.router, "ffn_gate_inp.weight", D, E, 0)
	ll.vec(&L.routerBias, "ffn_gate_inp.bias", E, h.Arch != "gpt-oss")
	ll.vec(&L.probsBias, "exp_probs_b.bias", E, h.Arch != "glm4moe")
	if h.SharedExperts > 0 {
		L.shared = ll.ffn("ffn", "_shexp", D, h.ExpertFF*h.SharedExperts)
	}
	if err := errors.Join(ll.errs...); err != nil {
		return err
	}
	return L.expertShapes(h, m.experts.Layout(i), ll.p)
}

// loadAttention loads ordinary multi-head attention.
func (m *Model) loadAttention(ll *layerLoader, L *layer) {
	h := m.Hparams
	D, HD := h.Embd, h.HeadDim
	qDim, kvDim := h.Heads*HD, h.HeadsKV*HD
	ll.mat(&L.wq, "attn_q.weight", D, qDim, 0)
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
	} else {
		ll.mat(&ml.wkvB, "attn_kv_b.weight", a.KVLoraRank, H*(a.NoPE+a.Value), 0)
	}
	ll.mat(&L.wo, "attn_output.weight", H*a.Value, D, 0)
}

// expertShapes describes one expert's matrices from the source's layout.
func (L *layer) expertShapes(h *Hparams, layout ExpertLayout, p string) error {
	D, F := h.Embd, h.ExpertFF
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
