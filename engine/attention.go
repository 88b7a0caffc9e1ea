package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf/quant"
)

// attention adds one layer's attention block to x (T positions of D).
func (s *Session) attention(il int, x, hbuf []float32, T int) {
	m, h := s.m, s.m.Hparams
	L := &m.layers[il]
	D := h.Embd
	for t := range T {
		rmsNorm(hbuf[t*D:(t+1)*D], x[t*D:(t+1)*D], L.attnNorm, h.RMSEps)
	}
	o := s.attnOut(il, hbuf, T)
	for i := range x[:T*D] {
		x[i] = o[i] + x[i]
	}
}

// attnOut is one layer's attention over the normalised input hn (T rows
// of D), through its output projection; the result overwrites hn.
func (s *Session) attnOut(il int, hn []float32, T int) []float32 {
	m, h := s.m, s.m.Hparams
	L := &m.layers[il]
	D := h.Embd
	s.as.reset(hn, D, T)
	var att []float32
	switch {
	case L.delta != nil:
		att = s.deltaNet(il, T)
	case L.kda != nil:
		att = s.kda(il, T)
	case L.mla == nil:
		att = s.mha(il, T)
	case h.MLA.Absorbed:
		att = s.mlaAbsorbed(il, T)
	default:
		att = s.mlaLegacy(il, T)
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
	return o
}

// mha is ordinary grouped-query attention over the normalised input in
// s.as; it returns T rows of heads × head dim.
func (s *Session) mha(il, T int) []float32 {
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
func (s *Session) mhaCore(il int, q, k, v, gate []float32, T int) []float32 {
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
	kc, vc := s.cache(il, k, v)
	att := make([]float32, T*qDim)
	s.attend(attnGeom{heads: h.Heads, group: h.Heads / h.HeadsKV, kDim: HD, vDim: HD, kStride: kvDim, vStride: kvDim,
		scale: h.kqScale, window: L.window, sinks: L.sinks}, q, qDim, kc, vc, T, att)
	for i, g := range gate {
		att[i] *= sigmoid(g) // the output gate: ggml_sigmoid, then ggml_mul
	}
	return att
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

// cache appends T positions' keys and values to layer il's cache and
// returns the whole of it (v may be nil when the values are read from
// the keys, as MLA's latent is).
func (s *Session) cache(il int, k, v []float32) (kc, vc []float32) {
	if s.k[il] == nil {
		s.k[il] = make([]float32, 0, min(s.ctxLen, 64)*len(k))
		if v != nil {
			s.v[il] = make([]float32, 0, min(s.ctxLen, 64)*len(v))
		}
	}
	s.k[il] = append(s.k[il], k...)
	if v != nil {
		s.v[il] = append(s.v[il], v...)
	}
	return s.k[il], s.v[il]
}

// attnGeom is the shape of one attention: how queries find their keys
// and values in the cache.
type attnGeom struct {
	heads, group     int // query heads, and query heads per key-value head
	kDim, vDim       int // one head's key and value widths
	kStride, vStride int // floats per cached position
	scale            float32
	window           int       // attend to the last window positions only; 0 for all
	sinks            []float32 // per query head sink logits, or nil
}

// attend computes softmax(q·k·scale)·v for T new positions, causally, as
// ggml_soft_max_ext and the two matrix products do: q holds qStride
// floats per position (heads × kDim), out receives heads × vDim.
func (s *Session) attend(g attnGeom, q []float32, qStride int, kc, vc []float32, T int, out []float32) {
	vRow := g.heads * g.vDim
	s.m.work.forEach(T*g.heads, 1, func(lo, hi int) {
		scores := make([]float32, s.n+T)
		for i := lo; i < hi; i++ {
			t, hd := i/g.heads, i%g.heads
			pos := s.n + t
			first := 0
			if g.window > 0 {
				first = max(0, pos-g.window+1) // ggml masks pos − j ≥ window
			}
			qh := q[t*qStride+hd*g.kDim : t*qStride+(hd+1)*g.kDim]
			kvh := hd / g.group
			sc := scores[first : pos+1]
			for j := range sc {
				kr := kc[(first+j)*g.kStride+kvh*g.kDim:]
				sc[j] = quant.DotFloat32(qh, kr[:g.kDim]) * g.scale
			}
			if g.sinks != nil {
				softmaxSink(sc, g.sinks[hd])
			} else {
				softmax(sc)
			}
			// Each output value sums its products in position order.
			o := out[t*vRow+hd*g.vDim : t*vRow+(hd+1)*g.vDim]
			clear(o)
			vb := vc[first*g.vStride+kvh*g.vDim:]
			if vecAttnAccum != nil && g.vDim%8 == 0 {
				vecAttnAccum(o, vb, g.vStride, sc)
				continue
			}
			for j, p := range sc {
				vj := vb[j*g.vStride : j*g.vStride+g.vDim]
				for d, v := range vj {
					o[d] += float32(v * p)
				}
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
func (s *Session) mlaAbsorbed(il, T int) []float32 {
	q, kv := s.mlaInputs(il, T)
	qa := s.mlaAbsorbQueries(il, q, T)
	return s.mlaDecompress(il, s.mlaAttendLatent(il, qa, kv, T), T)
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
func (s *Session) mlaAttendLatent(il int, qa, kv []float32, T int) []float32 {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	H, kvr, row := h.Heads, a.KVLoraRank, a.KVLoraRank+a.RoPE
	kc, _ := s.cache(il, kv, nil)
	lat := make([]float32, T*H*kvr)
	s.attend(attnGeom{heads: H, group: H, kDim: row, vDim: kvr, kStride: row, vStride: row, scale: h.kqScale},
		qa, H*row, kc, kc, T, lat)
	return lat
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
func (s *Session) mlaLegacy(il, T int) []float32 {
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
func (s *Session) mlaAttendLegacy(il int, q, k, v []float32, T int) []float32 {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	H, qk, vd := h.Heads, a.NoPE+a.RoPE, a.Value
	kc, vc := s.cache(il, k, v)
	att := make([]float32, T*H*vd)
	s.attend(attnGeom{heads: H, group: 1, kDim: qk, vDim: vd, kStride: H * qk, vStride: H * vd, scale: h.kqScale},
		q, H*qk, kc, vc, T, att)
	return att
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
