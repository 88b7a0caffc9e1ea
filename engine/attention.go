package engine

import (
	"errors"
	"math"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// attention adds one layer's attention block to x (T positions of D).
func (s *Session) attention(il int, x, hbuf []float32, T int) error {
	m, h := s.m, s.m.Hparams
	L := &m.layers[il]
	D := h.Embd
	for t := range T {
		rmsNorm(hbuf[t*D:(t+1)*D], x[t*D:(t+1)*D], L.attnNorm, h.RMSEps)
	}
	o, err := s.attnOut(il, hbuf, T)
	if err != nil {
		return err
	}
	for i := range x[:T*D] {
		x[i] = o[i] + x[i]
	}
	return nil
}

// attnOut is one layer's attention over the normalised input hn (T rows
// of D), through its output projection; the result overwrites hn.
func (s *Session) attnOut(il int, hn []float32, T int) ([]float32, error) {
	m, h := s.m, s.m.Hparams
	L := &m.layers[il]
	D := h.Embd
	s.as.reset(hn, D, T)
	var att []float32
	var err error
	switch {
	case L.delta != nil:
		att, err = s.deltaNet(il, T)
	case L.kda != nil:
		att, err = s.kda(il, T)
	case L.mla == nil:
		att, err = s.mha(il, T)
	case h.MLA.Absorbed:
		att, err = s.mlaAbsorbed(il, T)
	default:
		att, err = s.mlaLegacy(il, T)
	}
	if err != nil {
		return nil, err
	}
	if L.attnGate.rows > 0 {
		// kimi-k3: the output is gated by sigmoid(gate·h) before wo.
		g := make([]float32, len(att))
		m.work.mulMat(&L.attnGate, s.as.get(L.attnGate.vt), g)
		for i, v := range g {
			att[i] *= sigmoid(v)
		}
	}
	s.as.reset(att, L.wo.cols, T)
	o := hn[:T*D]
	m.work.mulMat(&L.wo, s.as.get(L.wo.vt), o)
	addBias(o, L.bo)
	return o, nil
}

// mha is ordinary grouped-query attention over the normalised input in
// s.as; it returns T rows of heads × head dim.
func (s *Session) mha(il, T int) ([]float32, error) {
	q, k, v, gate := s.mhaProject(&s.m.layers[il], T)
	return s.mhaCore(il, q, k, v, gate, T)
}

// mhaProject computes the queries, keys and values (and qwen35moe's output
// gates) of the T rows in s.as: row by row, so a batch of several
// sessions' rows projects in one pass with the same bits.
func (s *Session) mhaProject(L *layer, T int) (q, k, v, gate []float32) {
	m, h := s.m, s.m.Hparams
	qDim, kvDim := h.Heads*h.HeadDim, h.HeadsKV*h.HeadDim
	k, v = make([]float32, T*kvDim), make([]float32, T*kvDim)
	if h.gatedAttn {
		q, gate = s.gatedQuery(L, T)
	} else {
		q = make([]float32, T*qDim)
		m.work.mulMat(&L.wq, s.as.get(L.wq.vt), q)
	}
	m.work.mulMat(&L.wk, s.as.get(L.wk.vt), k)
	m.work.mulMat(&L.wv, s.as.get(L.wv.vt), v)
	addBias(q, L.bq)
	addBias(k, L.bk)
	addBias(v, L.bv)
	return q, k, v, gate
}

// mhaCore is the session's part of grouped-query attention over T rows
// of projections: their norms and rotations at its positions, its cache,
// the attention over it and the output gate.
func (s *Session) mhaCore(il int, q, k, v, gate []float32, T int) ([]float32, error) {
	h := s.m.Hparams
	L := &s.m.layers[il]
	HD := h.HeadDim
	qDim, kvDim := h.Heads*HD, h.HeadsKV*HD
	switch {
	case L.qNorm == nil:
	case h.qkNorm == qkNormPerHead:
		for i := 0; i < len(q); i += HD {
			rmsNorm(q[i:i+HD], q[i:i+HD], L.qNorm, h.RMSEps)
		}
		for i := 0; i < len(k); i += HD {
			rmsNorm(k[i:i+HD], k[i:i+HD], L.kNorm, h.RMSEps)
		}
	case h.qkNorm == qkNormWhole:
		for t := range T {
			rmsNorm(q[t*qDim:(t+1)*qDim], q[t*qDim:(t+1)*qDim], L.qNorm, h.RMSEps)
			rmsNorm(k[t*kvDim:(t+1)*kvDim], k[t*kvDim:(t+1)*kvDim], L.kNorm, h.RMSEps)
		}
	}
	var cs []float32
	for t := range T {
		cs = ropeTable(cs, s.n+t, h.RopeDims, L.ropeBase, &h.rope, h.RopeSections)
		for i := t * qDim; i < (t+1)*qDim; i += HD {
			rope(q[i:i+HD], cs, h.RopeDims, h.ropeNeox)
		}
		for i := t * kvDim; i < (t+1)*kvDim; i += HD {
			rope(k[i:i+HD], cs, h.RopeDims, h.ropeNeox)
		}
	}
	st := &s.state[il]
	if err := errors.Join(st.k.append(k, T), st.v.append(v, T)); err != nil {
		return nil, err
	}
	att := make([]float32, T*qDim)
	s.attend(attnGeom{heads: h.Heads, group: h.Heads / h.HeadsKV, kDim: HD, vDim: HD,
		scale: h.kqScale, window: L.window, sinks: L.sinks}, q, qDim, &st.k, &st.v, T, att)
	for i, g := range gate {
		att[i] *= sigmoid(g) // the output gate: ggml_sigmoid, then ggml_mul
	}
	return att, nil
}

// gatedQuery splits qwen35moe's query projection, which gives each head
// its query and then its output gate, into T rows of queries and of
// gates (heads × head dim each).
func (s *Session) gatedQuery(L *layer, T int) (q, gate []float32) {
	h := s.m.Hparams
	HD, qDim := h.HeadDim, h.Heads*h.HeadDim
	full := make([]float32, T*2*qDim)
	s.m.work.mulMat(&L.wq, s.as.get(L.wq.vt), full)
	q, gate = make([]float32, T*qDim), make([]float32, T*qDim)
	for t := range T {
		for hd := range h.Heads {
			src := full[t*2*qDim+hd*2*HD:]
			copy(q[t*qDim+hd*HD:][:HD], src[:HD])
			copy(gate[t*qDim+hd*HD:][:HD], src[HD:2*HD])
		}
	}
	return q, gate
}

// attnGeom is the shape of one attention: how queries find their keys
// and values in the cache.
type attnGeom struct {
	heads, group int // query heads, and query heads per key-value head
	kDim, vDim   int // one head's key and value widths
	scale        float32
	window       int       // attend to the last window positions only; 0 for all
	sinks        []float32 // per query head sink logits, or nil
}

// attend computes softmax(q·k·scale)·v for T new positions, causally, as
// ggml_soft_max_ext and the two matrix products do: q holds qStride
// floats per position (heads × kDim), k and v are the layer's caches
// (v may be k itself, its first vDim values of a row being the value:
// MLA's latent), out receives heads × vDim.
func (s *Session) attend(g attnGeom, q []float32, qStride int, k, v *kvRows, T int, out []float32) {
	if k.typ == gguf.TypeF32 && v.typ == gguf.TypeF32 {
		s.attendF32(g, q, qStride, k.f32(), k.width, v.f32(), v.width, T, out)
		return
	}
	s.attendTyped(g, q, qStride, k, v, T, out)
}

// attendF32 is attend over an F32 cache of kStride and vStride floats a
// position.
func (s *Session) attendF32(g attnGeom, q []float32, qStride int, kc []float32, kStride int, vc []float32, vStride int, T int, out []float32) {
	vRow := g.heads * g.vDim
	s.m.work.forEach(T*g.heads, 1, func(lo, hi int) {
		scores := make([]float32, s.n+T)
		for i := lo; i < hi; i++ {
			t, hd := i/g.heads, i%g.heads
			first, pos := g.span(s.n + t)
			qh := q[t*qStride+hd*g.kDim : t*qStride+(hd+1)*g.kDim]
			kvh := hd / g.group
			sc := scores[first : pos+1]
			for j := range sc {
				kr := kc[(first+j)*kStride+kvh*g.kDim:]
				sc[j] = quant.DotFloat32(qh, kr[:g.kDim]) * g.scale
			}
			g.softmax(sc, hd)
			o := out[t*vRow+hd*g.vDim : t*vRow+(hd+1)*g.vDim]
			clear(o)
			accumulate(o, vc[first*vStride+kvh*g.vDim:], vStride, sc)
		}
	})
}

// span is the positions a query at pos attends to: all up to it, or the
// last window of them (ggml masks pos − j ≥ window).
func (g *attnGeom) span(pos int) (first, last int) {
	if g.window > 0 {
		return max(0, pos-g.window+1), pos
	}
	return 0, pos
}

// softmax turns query head hd's scores into weights, with its sink when
// the layer has sinks.
func (g *attnGeom) softmax(sc []float32, hd int) {
	if g.sinks != nil {
		softmaxSink(sc, g.sinks[hd])
	} else {
		softmax(sc)
	}
}

// accumulate adds to o each value row (vb, a row every stride floats)
// weighted by its score, summing every output in position order.
func accumulate(o, vb []float32, stride int, sc []float32) {
	if vecAttnAccum != nil && len(o)%8 == 0 {
		vecAttnAccum(o, vb, stride, sc)
		return
	}
	for j, p := range sc {
		vj := vb[j*stride : j*stride+len(o)]
		for d, v := range vj {
			o[d] += float32(v * p)
		}
	}
}

// valueBlock is how many cached value rows attendTyped converts to float
// at a time: the summation order, position by position, does not depend
// on it.
const valueBlock = 64

// attendTyped is attend over a cache of another type than F32: each
// query head converted to the keys' dot type once, as ggml converts src1
// of the key product (ggml_cpu_fp32_to_fp16, quantize_row_q8_0), each
// score a dot product with a cached key row in its own type; the weights
// rounded to F16 for F16 values, as ggml converts them for its product
// with the values; and the values converted to float valueBlock rows at a
// time and accumulated as attendF32 does.
func (s *Session) attendTyped(g attnGeom, q []float32, qStride int, k, v *kvRows, T int, out []float32) {
	vRow := g.heads * g.vDim
	var kdot quant.Dotter
	if k.typ != gguf.TypeF32 {
		var err error
		if kdot, err = quant.NewDotter(k.typ, g.kDim); err != nil {
			panic("engine: " + err.Error()) // checkCacheTypes checked the blocks
		}
	}
	var kc, vc []float32
	if k.typ == gguf.TypeF32 {
		kc = k.f32()
	}
	if v.typ == gguf.TypeF32 {
		vc = v.f32()
	}
	s.m.work.forEach(T*g.heads, 1, func(lo, hi int) {
		scores := make([]float32, s.n+T)
		var qconv []byte
		var vbuf []float32
		if v.typ != gguf.TypeF32 {
			vbuf = make([]float32, valueBlock*g.vDim)
		}
		for i := lo; i < hi; i++ {
			t, hd := i/g.heads, i%g.heads
			first, pos := g.span(s.n + t)
			qh := q[t*qStride+hd*g.kDim : t*qStride+(hd+1)*g.kDim]
			kvh := hd / g.group
			sc := scores[first : pos+1]
			if k.typ == gguf.TypeF32 {
				for j := range sc {
					kr := kc[(first+j)*k.width+kvh*g.kDim:]
					sc[j] = quant.DotFloat32(qh, kr[:g.kDim]) * g.scale
				}
			} else {
				qconv, _ = quant.QuantizeActivations(qconv[:0], k.typ, qh)
				for j := range sc {
					sc[j] = kdot.Dot(k.rowBytesOf(first+j, kvh*g.kDim, g.kDim), qconv) * g.scale
				}
			}
			g.softmax(sc, hd)
			if v.typ == gguf.TypeF16 {
				// ggml converts the weights to F16, the value rows' type,
				// before their product with the values.
				for j, p := range sc {
					sc[j] = quant.F16ToF32(quant.F32ToF16(p))
				}
			}
			o := out[t*vRow+hd*g.vDim : t*vRow+(hd+1)*g.vDim]
			clear(o)
			if v.typ == gguf.TypeF32 {
				accumulate(o, vc[first*v.width+kvh*g.vDim:], v.width, sc)
				continue
			}
			for b := 0; b < len(sc); b += valueBlock {
				n := min(valueBlock, len(sc)-b)
				for j := range n {
					quant.Dequantize(vbuf[j*g.vDim:j*g.vDim], v.typ, v.rowBytesOf(first+b+j, kvh*g.vDim, g.vDim))
				}
				accumulate(o, vbuf, g.vDim, sc[b:b+n])
			}
		}
	})
}

// mlaInputs is latent attention's queries and latent keys for the T rows
// in s.as, rotated at the session's positions.
func (s *Session) mlaInputs(il, T int) (q, kv []float32) {
	L := &s.m.layers[il]
	q, kv = s.mlaProject(L, T)
	s.mlaRope(L, q, kv, T)
	return q, kv
}

// mlaProject is the position-free part of mlaInputs: the query (through
// its LoRA when there is one) and the compressed latent with its RoPE key,
// row by row over the T rows in s.as.
func (s *Session) mlaProject(L *layer, T int) (q, kv []float32) {
	m, h, a := s.m, s.m.Hparams, s.m.Hparams.MLA
	ml := L.mla
	q = make([]float32, T*ml.qRowFloats)
	kv = make([]float32, T*(a.KVLoraRank+a.RoPE))
	if a.QLoraRank > 0 {
		qa := make([]float32, T*a.QLoraRank)
		m.work.mulMat(&ml.wqA, s.as.get(ml.wqA.vt), qa)
		for t := range T {
			r := qa[t*a.QLoraRank : (t+1)*a.QLoraRank]
			rmsNorm(r, r, ml.qANorm, h.RMSEps)
		}
		m.work.mulMat(&ml.wkvA, s.as.get(ml.wkvA.vt), kv)
		var sub actSet
		sub.reset(qa, a.QLoraRank, T)
		m.work.mulMat(&ml.wqB, sub.get(ml.wqB.vt), q)
	} else {
		m.work.mulMat(&L.wq, s.as.get(L.wq.vt), q)
		m.work.mulMat(&ml.wkvA, s.as.get(ml.wkvA.vt), kv)
	}
	return q, kv
}

// mlaRope rotates T rows of queries and RoPE keys at the session's
// positions and normalises their latents.
func (s *Session) mlaRope(L *layer, q, kv []float32, T int) {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	ml := L.mla
	qk, row := a.NoPE+a.RoPE, a.KVLoraRank+a.RoPE
	var cs []float32
	for t := range T {
		r := kv[t*row : (t+1)*row]
		if !h.mlaNoRope { // kimi-k3 carries the RoPE dims unrotated
			cs = ropeTable(cs, s.n+t, a.RoPE, L.ropeBase, &h.rope, nil)
			for hd := range h.Heads {
				i := t*ml.qRowFloats + hd*qk + a.NoPE
				rope(q[i:i+a.RoPE], cs, a.RoPE, false)
			}
			rope(r[a.KVLoraRank:], cs, a.RoPE, false)
		}
		rmsNorm(r[:a.KVLoraRank], r[:a.KVLoraRank], ml.kvANorm, h.RMSEps)
	}
}

// mlaAbsorbed is latent attention with the key decompression absorbed
// into the queries: the cache holds each position's normalised latent and
// RoPE key, one head shared by every query head, the values are the
// latents, and each head's output is decompressed by attn_v_b. This is
// llama.cpp's path for files with attn_k_b and attn_v_b.
func (s *Session) mlaAbsorbed(il, T int) ([]float32, error) {
	q, kv := s.mlaInputs(il, T)
	qa := s.mlaAbsorbQueries(il, q, T)
	lat, err := s.mlaAttendLatent(il, qa, kv, T)
	if err != nil {
		return nil, err
	}
	return s.mlaDecompress(il, lat, T), nil
}

// mlaAbsorbQueries turns each head's query into [attn_k_b·q_nope |
// q_rope], row by row over T rows.
func (s *Session) mlaAbsorbQueries(il int, q []float32, T int) []float32 {
	m, h, a := s.m, s.m.Hparams, s.m.Hparams.MLA
	ml := m.layers[il].mla
	H, nope, kvr, rp := h.Heads, a.NoPE, a.KVLoraRank, a.RoPE
	qk, row := nope+rp, kvr+rp
	qa := make([]float32, T*H*row)
	in := make([]float32, T*nope)
	tmp := make([]float32, T*kvr)
	var sub actSet
	for hd := range H {
		for t := range T {
			copy(in[t*nope:(t+1)*nope], q[t*H*qk+hd*qk:])
		}
		wk := ml.wkB.slice(hd)
		sub.reset(in, nope, T)
		m.work.mulMat(&wk, sub.get(wk.vt), tmp)
		for t := range T {
			dst := qa[t*H*row+hd*row:]
			copy(dst[:kvr], tmp[t*kvr:(t+1)*kvr])
			copy(dst[kvr:row], q[t*H*qk+hd*qk+nope:t*H*qk+(hd+1)*qk])
		}
	}
	return qa
}

// mlaAttendLatent caches T rows of latents and attends over the session's
// cache with the absorbed queries: each head's output latent.
func (s *Session) mlaAttendLatent(il int, qa, kv []float32, T int) ([]float32, error) {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	H, kvr, row := h.Heads, a.KVLoraRank, a.KVLoraRank+a.RoPE
	st := &s.state[il]
	if err := st.k.append(kv, T); err != nil {
		return nil, err
	}
	lat := make([]float32, T*H*kvr)
	s.attend(attnGeom{heads: H, group: H, kDim: row, vDim: kvr, scale: h.kqScale}, qa, H*row, &st.k, &st.k, T, lat)
	return lat, nil
}

// mlaDecompress is attn_v_b·latent for each head of T rows.
func (s *Session) mlaDecompress(il int, lat []float32, T int) []float32 {
	m, h, a := s.m, s.m.Hparams, s.m.Hparams.MLA
	ml := m.layers[il].mla
	H, kvr := h.Heads, a.KVLoraRank
	att := make([]float32, T*H*a.Value)
	in := make([]float32, T*kvr)
	tmp := make([]float32, T*a.Value)
	var sub actSet
	for hd := range H {
		for t := range T {
			copy(in[t*kvr:(t+1)*kvr], lat[t*H*kvr+hd*kvr:])
		}
		wv := ml.wvB.slice(hd)
		sub.reset(in, kvr, T)
		m.work.mulMat(&wv, sub.get(wv.vt), tmp)
		for t := range T {
			copy(att[t*H*a.Value+hd*a.Value:], tmp[t*a.Value:(t+1)*a.Value])
		}
	}
	return att
}

// mlaLegacy is latent attention for files with one attn_kv_b: the latent
// is decompressed into per-head keys and values, which are cached, and
// attended as ordinary multi-head attention.
func (s *Session) mlaLegacy(il, T int) ([]float32, error) {
	q, kv := s.mlaInputs(il, T)
	k, v := s.mlaKeysValues(il, kv, T)
	return s.mlaAttendLegacy(il, q, k, v, T)
}

// mlaKeysValues decompresses T rows of latents into each head's key
// ([nope | the shared RoPE key]) and value.
func (s *Session) mlaKeysValues(il int, kv []float32, T int) (k, v []float32) {
	m, h, a := s.m, s.m.Hparams, s.m.Hparams.MLA
	ml := m.layers[il].mla
	H, nope, kvr, rp, vd := h.Heads, a.NoPE, a.KVLoraRank, a.RoPE, a.Value
	qk, row := nope+rp, kvr+rp
	lat := make([]float32, T*kvr)
	for t := range T {
		copy(lat[t*kvr:(t+1)*kvr], kv[t*row:])
	}
	dec := make([]float32, T*H*(nope+vd))
	var sub actSet
	sub.reset(lat, kvr, T)
	m.work.mulMat(&ml.wkvB, sub.get(ml.wkvB.vt), dec)
	k = make([]float32, T*H*qk)
	v = make([]float32, T*H*vd)
	for t := range T {
		for hd := range H {
			d := dec[(t*H+hd)*(nope+vd):]
			kh := k[(t*H+hd)*qk:]
			copy(kh[:nope], d[:nope])
			copy(kh[nope:qk], kv[t*row+kvr:(t+1)*row])
			copy(v[(t*H+hd)*vd:(t*H+hd+1)*vd], d[nope:nope+vd])
		}
	}
	return k, v
}

// mlaAttendLegacy caches T rows of decompressed keys and values and
// attends over the session's cache.
func (s *Session) mlaAttendLegacy(il int, q, k, v []float32, T int) ([]float32, error) {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	H, qk, vd := h.Heads, a.NoPE+a.RoPE, a.Value
	st := &s.state[il]
	if err := errors.Join(st.k.append(k, T), st.v.append(v, T)); err != nil {
		return nil, err
	}
	att := make([]float32, T*H*vd)
	s.attend(attnGeom{heads: H, group: 1, kDim: qk, vDim: vd, scale: h.kqScale}, q, H*qk, &st.k, &st.v, T, att)
	return att, nil
}

// ropeTable holds cos and sin of each rotated pair at one position, built
// as ggml_rope_cache_init does: θ starts at the position and is multiplied
// by base^(−2/n_rot) for each pair, in float32, then scaled and mixed as
// rope_yarn does (plain RoPE when there is no scaling). With sections
// (interleaved multi-section RoPE, ggml_mrope_cache_init with is_imrope,
// at a text position: the temporal, height and width positions are all
// pos and the fourth is 0) a pair turns by θ when its sector belongs to
// one of the first three sections and not at all otherwise.
func ropeTable(dst []float32, pos int, nRot int, base float32, rs *ropeScaling, sections []int) []float32 {
	dst = dst[:0]
	thetaScale := float32(math.Pow(float64(base), float64(-2/float32(nRot))))
	var corr [2]float32
	if rs.extFactor != 0 {
		corr = yarnCorrDims(nRot, rs.ctxOrig, base, rs.betaFast, rs.betaSlow)
	}
	theta := float32(pos)
	for i := 0; i < nRot; i += 2 {
		th := theta
		if sections != nil && !sectionTurns(sections, i/2) {
			th = 0 // the fourth position, always 0 for text
		}
		c, s := ropeYarn(th, rs, corr, i)
		dst = append(dst, c, s)
		theta *= thetaScale
	}
	return dst
}

// sectionTurns says whether pair i of interleaved multi-section RoPE
// takes one of the first three (temporal, height, width) positions.
func sectionTurns(sections []int, i int) bool {
	sector := i % (sections[0] + sections[1] + sections[2] + sections[3])
	switch sector % 3 {
	case 0:
		return sector < 3*sections[0]
	case 1:
		return sector < 3*sections[1]
	default:
		return sector < 3*sections[2]
	}
}

// ropeYarn is ggml's rope_yarn: the angle interpolated by the frequency
// scale, mixed back towards the original angle by YaRN's ramp, and cos
// and sin scaled by the magnitude factor.
func ropeYarn(thetaExtrap float32, rs *ropeScaling, corr [2]float32, i0 int) (cos, sin float32) {
	thetaInterp := rs.freqScale * thetaExtrap
	theta := thetaInterp
	mscale := rs.attnFactor
	if rs.extFactor != 0 {
		y := (float32(i0/2) - corr[0]) / max(0.001, corr[1]-corr[0])
		rampMix := (1 - min(1, max(0, y))) * rs.extFactor
		theta = float32(thetaInterp*(1-rampMix)) + float32(thetaExtrap*rampMix)
		mscale *= 1 + float32(0.1*logf(1/rs.freqScale))
	}
	return float32(math.Cos(float64(theta))) * mscale, float32(math.Sin(float64(theta))) * mscale
}

// yarnCorrDims is ggml_rope_yarn_corr_dims: the first and last rotated
// dims YaRN's ramp blends between.
func yarnCorrDims(nDims, ctxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	corrDim := func(nRot float32) float32 {
		return float32(float32(nDims)*logf(float32(ctxOrig)/(nRot*2*math.Pi))) / (2 * logf(base))
	}
	start := float32(math.Floor(float64(corrDim(betaFast))))
	end := float32(math.Ceil(float64(corrDim(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}
