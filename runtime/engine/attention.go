package engine

import (
	"math"
)

// attention adds one layer's attention block to x (T positions of D),
// normalising into hbuf.
func (s *Session) attention(il int, x, hbuf Tensor, T int) error {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	D := h.Embd
	be.RMSNorm(hbuf, x, &L.attnNorm, h.RMSEps, T, D)
	o, err := s.attnOut(il, hbuf, T)
	if err != nil {
		return err
	}
	be.Add(x, o, x, T*D)
	return nil
}

// attnOut is one layer's attention over the normalised input hn (T rows
// of D), through its output projection; the result overwrites hn.
func (s *Session) attnOut(il int, hn Tensor, T int) (Tensor, error) {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	D := h.Embd
	in := be.Input(s.step, hn, D, T)
	var att Tensor
	var err error
	switch {
	case L.delta != nil:
		att, err = s.deltaNet(il, in, T)
	case L.kda != nil:
		att, err = s.kda(il, in, T)
	case L.mla == nil:
		att, err = s.mha(il, in, T)
	case h.MLA.Absorbed:
		att, err = s.mlaAbsorbed(il, in, T)
	default:
		att, err = s.mlaLegacy(il, in, T)
	}
	if err != nil {
		return Tensor{}, err
	}
	return s.attnOutput(L, in, att, hn, T), nil
}

// attnOutput is the end of an attention block over T rows: kimi-k3's
// sigmoid gate from the block's input in, then the output projection of
// att into o.
func (s *Session) attnOutput(L *layer, in Input, att, o Tensor, T int) Tensor {
	be := s.be
	if L.attnGate.rows > 0 {
		n := T * L.attnGate.rows
		g := s.step.Tensor(n)
		be.MulMat(g, &L.attnGate, in)
		be.GateSigmoid(att, g, n)
	}
	D := s.m.Hparams.Embd
	o = o.Slice(0, T*D)
	be.MulMat(o, &L.wo, be.Input(s.step, att, L.wo.cols, T))
	be.AddBias(o, &L.bo, T)
	return o
}

// mha is ordinary grouped-query attention over the normalised input; it
// returns T rows of heads × head dim.
func (s *Session) mha(il int, in Input, T int) (Tensor, error) {
	q, k, v, gate := s.mhaProject(&s.m.layers[il], in, T)
	return s.mhaCore(il, q, k, v, gate, T)
}

// mhaProject computes the queries, keys and values (and qwen35moe's output
// gates) of the T rows of in: row by row, so a batch of several sessions'
// rows projects in one pass with the same bits. gate is empty without an
// output gate.
func (s *Session) mhaProject(L *layer, in Input, T int) (q, k, v, gate Tensor) {
	be, h := s.be, s.m.Hparams
	qDim, kvDim := h.Heads*h.HeadDim, h.HeadsKV*h.HeadDim
	k, v = s.step.Tensor(T*kvDim), s.step.Tensor(T*kvDim)
	if h.gatedAttn {
		q, gate = s.gatedQuery(L, in, T)
	} else {
		q = s.step.Tensor(T * qDim)
		be.MulMat(q, &L.wq, in)
	}
	be.MulMat(k, &L.wk, in)
	be.MulMat(v, &L.wv, in)
	be.AddBias(q, &L.bq, T)
	be.AddBias(k, &L.bk, T)
	be.AddBias(v, &L.bv, T)
	return q, k, v, gate
}

// mhaCore is the session's part of grouped-query attention over T rows
// of projections: their norms and rotations at its positions, its cache,
// the attention over it and the output gate.
func (s *Session) mhaCore(il int, q, k, v, gate Tensor, T int) (Tensor, error) {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	HD := h.HeadDim
	qDim, kvDim := h.Heads*HD, h.HeadsKV*HD
	switch {
	case !L.qNorm.present():
	case h.qkNorm == qkNormPerHead:
		be.RMSNorm(q, q, &L.qNorm, h.RMSEps, T*h.Heads, HD)
		be.RMSNorm(k, k, &L.kNorm, h.RMSEps, T*h.HeadsKV, HD)
	case h.qkNorm == qkNormWhole:
		be.RMSNorm(q, q, &L.qNorm, h.RMSEps, T, qDim)
		be.RMSNorm(k, k, &L.kNorm, h.RMSEps, T, kvDim)
	}
	rj := RopeJob{Rows: T, HeadStride: HD, Dims: h.RopeDims, Pos0: s.n, Base: L.ropeBase, Scaling: &h.rope,
		Neox: h.ropeNeox, Sections: h.RopeSections}
	rj.RowStride, rj.Heads = qDim, h.Heads
	be.Rope(s.step, q, rj)
	rj.RowStride, rj.Heads = kvDim, h.HeadsKV
	be.Rope(s.step, k, rj)
	st := &s.state[il]
	if err := be.KVAppend(st.k, k, T); err != nil {
		return Tensor{}, err
	}
	if err := be.KVAppend(st.v, v, T); err != nil {
		return Tensor{}, err
	}
	att := s.step.Tensor(T * qDim)
	g := AttnGeom{Heads: h.Heads, Group: h.Heads / h.HeadsKV, KDim: HD, VDim: HD, QStride: qDim,
		Scale: h.kqScale, Window: L.window, Sinks: &L.sinks}
	be.Attend(s.step, att, q, st.k, st.v, g, s.n, T)
	if gate.Len() > 0 {
		be.GateSigmoid(att, gate, T*qDim) // the output gate: ggml_sigmoid, then ggml_mul
	}
	return att, nil
}

// gatedQuery splits qwen35moe's query projection, which gives each head
// its query and then its output gate, into T rows of queries and of
// gates (heads × head dim each).
func (s *Session) gatedQuery(L *layer, in Input, T int) (q, gate Tensor) {
	be, h := s.be, s.m.Hparams
	HD, qDim := h.HeadDim, h.Heads*h.HeadDim
	full := s.step.Tensor(T * 2 * qDim)
	be.MulMat(full, &L.wq, in)
	q, gate = s.step.Tensor(T*qDim), s.step.Tensor(T*qDim)
	// Rows of (token, head): each 2·HD floats in full, HD in q and gate.
	be.Copy(q, 0, HD, full, 0, 2*HD, HD, T*h.Heads)
	be.Copy(gate, 0, HD, full, HD, 2*HD, HD, T*h.Heads)
	return q, gate
}

// mlaInputs is latent attention's queries and latent keys for the T rows
// of in, rotated at the session's positions.
func (s *Session) mlaInputs(il int, in Input, T int) (q, kv Tensor) {
	L := &s.m.layers[il]
	q, kv = s.mlaProject(L, in, T)
	s.mlaRope(L, q, kv, T)
	return q, kv
}

// mlaProject is the position-free part of mlaInputs: the query (through
// its LoRA when there is one) and the compressed latent with its RoPE key,
// row by row over the T rows of in.
func (s *Session) mlaProject(L *layer, in Input, T int) (q, kv Tensor) {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	ml := L.mla
	q = s.step.Tensor(T * ml.qRowFloats)
	kv = s.step.Tensor(T * (a.KVLoraRank + a.RoPE))
	if a.QLoraRank > 0 {
		qa := s.step.Tensor(T * a.QLoraRank)
		be.MulMat(qa, &ml.wqA, in)
		be.RMSNorm(qa, qa, &ml.qANorm, h.RMSEps, T, a.QLoraRank)
		be.MulMat(kv, &ml.wkvA, in)
		be.MulMat(q, &ml.wqB, be.Input(s.step, qa, a.QLoraRank, T))
	} else {
		be.MulMat(q, &L.wq, in)
		be.MulMat(kv, &ml.wkvA, in)
	}
	return q, kv
}

// mlaRope rotates T rows of queries and RoPE keys at the session's
// positions and normalises their latents.
func (s *Session) mlaRope(L *layer, q, kv Tensor, T int) {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	ml := L.mla
	qk, row := a.NoPE+a.RoPE, a.KVLoraRank+a.RoPE
	if !h.mlaNoRope { // kimi-k3 carries the RoPE dims unrotated
		rj := RopeJob{Rows: T, RowStride: ml.qRowFloats, Heads: h.Heads, HeadStride: qk, Offset: a.NoPE, Dims: a.RoPE,
			Pos0: s.n, Base: L.ropeBase, Scaling: &h.rope}
		be.Rope(s.step, q, rj)
		rj.RowStride, rj.Heads, rj.HeadStride, rj.Offset = row, 1, row, a.KVLoraRank
		be.Rope(s.step, kv, rj)
	}
	// Each row's latent: the first KVLoraRank of its row floats.
	lat := s.step.Tensor(T * a.KVLoraRank)
	be.Copy(lat, 0, a.KVLoraRank, kv, 0, row, a.KVLoraRank, T)
	be.RMSNorm(lat, lat, &ml.kvANorm, h.RMSEps, T, a.KVLoraRank)
	be.Copy(kv, 0, row, lat, 0, a.KVLoraRank, a.KVLoraRank, T)
}

// mlaAbsorbed is latent attention with the key decompression absorbed
// into the queries: the cache holds each position's normalised latent and
// RoPE key, one head shared by every query head, the values are the
// latents, and each head's output is decompressed by attn_v_b. This is
// llama.cpp's path for files with attn_k_b and attn_v_b.
func (s *Session) mlaAbsorbed(il int, in Input, T int) (Tensor, error) {
	q, kv := s.mlaInputs(il, in, T)
	qa := s.mlaAbsorbQueries(il, q, T)
	lat, err := s.mlaAttendLatent(il, qa, kv, T)
	if err != nil {
		return Tensor{}, err
	}
	return s.mlaDecompress(il, lat, T), nil
}

// mlaAbsorbQueries turns each head's query into [attn_k_b·q_nope |
// q_rope], row by row over T rows.
func (s *Session) mlaAbsorbQueries(il int, q Tensor, T int) Tensor {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	ml := s.m.layers[il].mla
	H, nope, kvr, rp := h.Heads, a.NoPE, a.KVLoraRank, a.RoPE
	qk, row := nope+rp, kvr+rp
	qa := s.step.Tensor(T * H * row)
	in := s.step.Tensor(T * nope)
	tmp := s.step.Tensor(T * kvr)
	for hd := range H {
		be.Copy(in, 0, nope, q, hd*qk, H*qk, nope, T)
		be.MulMat(tmp, &ml.wkBH[hd], be.Input(s.step, in, nope, T))
		be.Copy(qa, hd*row, H*row, tmp, 0, kvr, kvr, T)
		be.Copy(qa, hd*row+kvr, H*row, q, hd*qk+nope, H*qk, rp, T)
	}
	return qa
}

// mlaAttendLatent caches T rows of latents and attends over the session's
// cache with the absorbed queries: each head's output latent.
func (s *Session) mlaAttendLatent(il int, qa, kv Tensor, T int) (Tensor, error) {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	H, kvr, row := h.Heads, a.KVLoraRank, a.KVLoraRank+a.RoPE
	st := &s.state[il]
	if err := be.KVAppend(st.k, kv, T); err != nil {
		return Tensor{}, err
	}
	lat := s.step.Tensor(T * H * kvr)
	be.Attend(s.step, lat, qa, st.k, st.k, AttnGeom{Heads: H, Group: H, KDim: row, VDim: kvr, QStride: H * row, Scale: h.kqScale}, s.n, T)
	return lat, nil
}

// mlaDecompress is attn_v_b·latent for each head of T rows.
func (s *Session) mlaDecompress(il int, lat Tensor, T int) Tensor {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	ml := s.m.layers[il].mla
	H, kvr := h.Heads, a.KVLoraRank
	att := s.step.Tensor(T * H * a.Value)
	in := s.step.Tensor(T * kvr)
	tmp := s.step.Tensor(T * a.Value)
	for hd := range H {
		be.Copy(in, 0, kvr, lat, hd*kvr, H*kvr, kvr, T)
		be.MulMat(tmp, &ml.wvBH[hd], be.Input(s.step, in, kvr, T))
		be.Copy(att, hd*a.Value, H*a.Value, tmp, 0, a.Value, a.Value, T)
	}
	return att
}

// mlaLegacy is latent attention for files with one attn_kv_b: the latent
// is decompressed into per-head keys and values, which are cached, and
// attended as ordinary multi-head attention.
func (s *Session) mlaLegacy(il int, in Input, T int) (Tensor, error) {
	q, kv := s.mlaInputs(il, in, T)
	k, v := s.mlaKeysValues(il, kv, T)
	return s.mlaAttendLegacy(il, q, k, v, T)
}

// mlaKeysValues decompresses T rows of latents into each head's key
// ([nope | the shared RoPE key]) and value.
func (s *Session) mlaKeysValues(il int, kv Tensor, T int) (k, v Tensor) {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	ml := s.m.layers[il].mla
	H, nope, kvr, rp, vd := h.Heads, a.NoPE, a.KVLoraRank, a.RoPE, a.Value
	qk, row := nope+rp, kvr+rp
	lat := s.step.Tensor(T * kvr)
	be.Copy(lat, 0, kvr, kv, 0, row, kvr, T)
	dec := s.step.Tensor(T * H * (nope + vd))
	be.MulMat(dec, &ml.wkvB, be.Input(s.step, lat, kvr, T))
	k = s.step.Tensor(T * H * qk)
	v = s.step.Tensor(T * H * vd)
	// Rows of (token, head): nope then value in dec; the key is the nope
	// part then the token's shared RoPE key.
	be.Copy(k, 0, qk, dec, 0, nope+vd, nope, T*H)
	for hd := range H {
		be.Copy(k, hd*qk+nope, H*qk, kv, kvr, row, rp, T)
	}
	be.Copy(v, 0, vd, dec, nope, nope+vd, vd, T*H)
	return k, v
}

// mlaAttendLegacy caches T rows of decompressed keys and values and
// attends over the session's cache.
func (s *Session) mlaAttendLegacy(il int, q, k, v Tensor, T int) (Tensor, error) {
	be, h, a := s.be, s.m.Hparams, s.m.Hparams.MLA
	H, qk, vd := h.Heads, a.NoPE+a.RoPE, a.Value
	st := &s.state[il]
	if err := be.KVAppend(st.k, k, T); err != nil {
		return Tensor{}, err
	}
	if err := be.KVAppend(st.v, v, T); err != nil {
		return Tensor{}, err
	}
	att := s.step.Tensor(T * H * vd)
	be.Attend(s.step, att, q, st.k, st.v, AttnGeom{Heads: H, Group: 1, KDim: qk, VDim: vd, QStride: H * qk, Scale: h.kqScale}, s.n, T)
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
