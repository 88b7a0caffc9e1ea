package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// The CPU backend's operations: each is the loop the engine ran before it
// had backends, in the same order of arithmetic, so that every result is
// bit for bit what it was (and what llama.cpp's haswell backend computes
// where the engine follows it).

func (b *cpuBackend) MulMat(dst Tensor, w *matrix, in Input) {
	a := in.(*actSet)
	b.work.mulMat(w, a.get(w.vt), dst.f32()[:a.n*w.rows])
}

func (b *cpuBackend) AddBias(y Tensor, v *vector, rows int) {
	if v.present() {
		addBias(y.f32()[:rows*len(v.f)], v.f)
	}
}

func (b *cpuBackend) Add(dst, x, y Tensor, n int) {
	d, a, c := dst.f32()[:n], x.f32()[:n], y.f32()[:n]
	for i := range d {
		d[i] = a[i] + c[i]
	}
}

func (b *cpuBackend) Mul(dst, x, y Tensor, n int) {
	d, a, c := dst.f32()[:n], x.f32()[:n], y.f32()[:n]
	for i := range d {
		d[i] = a[i] * c[i]
	}
}

func (b *cpuBackend) Copy(dst Tensor, dstOff, dstStride int, src Tensor, srcOff, srcStride, width, rows int) {
	d, s := dst.f32(), src.f32()
	for r := range rows {
		copy(d[dstOff+r*dstStride:][:width], s[srcOff+r*srcStride:][:width])
	}
}

func (b *cpuBackend) Sigmoid(x Tensor, n int) {
	v := x.f32()[:n]
	for i, e := range v {
		v[i] = sigmoid(e)
	}
}

func (b *cpuBackend) GateSigmoid(x, g Tensor, n int) {
	v, gv := x.f32()[:n], g.f32()[:n]
	for i, e := range gv {
		v[i] *= sigmoid(e)
	}
}

func (b *cpuBackend) ScaleRowsSigmoid(x, g Tensor, rows, width int) {
	v, gv := x.f32(), g.f32()
	for t := range rows {
		sg := sigmoid(gv[t])
		r := v[t*width : (t+1)*width]
		for i := range r {
			r[i] *= sg
		}
	}
}

func (b *cpuBackend) RMSNorm(dst, x Tensor, w *vector, eps float32, rows, width int) {
	d, s := dst.f32(), x.f32()
	for t := range rows {
		rmsNorm(d[t*width:(t+1)*width], s[t*width:(t+1)*width], w.f, eps)
	}
}

func (b *cpuBackend) L2Norm(x Tensor, eps float32, rows, width int) {
	v := x.f32()
	for t := range rows {
		l2Norm(v[t*width:(t+1)*width], eps)
	}
}

func (b *cpuBackend) GLU(act GLU, dst, gate, up Tensor, rows, width int) {
	d, g, u := dst.f32(), gate.f32(), up.f32()
	f := swiglu
	switch act.Kind {
	case GLUSwiGLUOAI:
		f = swigluOAI
	case GLUSiTU:
		st := situ{beta: act.Beta, linearBeta: act.LinearBeta}
		f = st.apply
	}
	for t := range rows {
		f(d[t*width:(t+1)*width], g[t*width:(t+1)*width], u[t*width:(t+1)*width])
	}
}

func (b *cpuBackend) SiLU(dst, x Tensor, rows, width int) {
	d, s := dst.f32(), x.f32()
	for t := range rows {
		siluInto(d[t*width:(t+1)*width], s[t*width:(t+1)*width])
	}
}

func (b *cpuBackend) Rope(ar Arena, x Tensor, r RopeJob) {
	v := x.f32()
	cs := ar.Tensor(r.Dims).f32()[:0]
	for t := range r.Rows {
		cs = ropeTable(cs, r.Pos0+t, r.Dims, r.Base, r.Scaling, r.Sections)
		for hd := range r.Heads {
			i := t*r.RowStride + hd*r.HeadStride + r.Offset
			rope(v[i:i+r.Dims], cs, r.Dims, r.Neox)
		}
	}
}

func (b *cpuBackend) Attend(ar Arena, dst, q Tensor, k, v KVStore, g AttnGeom, pos0, rows int) {
	w := b.work
	w.loop.Lock()
	defer w.loop.Unlock()
	j := &b.attn
	j.prepare(g, q.f32(), k.(*kvRows), v.(*kvRows), pos0, rows, dst.f32(), w.n)
	w.runLocked(j.items(), 1, j)
	j.release()
}

// attnJob is Attend's loop over (row, head) pairs; the backend keeps one,
// with each worker's scratch, so that attention allocates nothing once
// the scratch has grown to the longest context seen.
type attnJob struct {
	g       AttnGeom
	q, out  []float32
	k, v    *kvRows
	kc, vc  []float32 // the caches' floats, when F32
	kdot    quant.Dotter
	pos0, T int
	scratch []attnScratch // per worker

	// The blocked path's work items (blocked): rowsPer query rows by
	// headsPer query heads of one key-value head.
	blocked           bool
	rowsPer, headsPer int
}

type attnScratch struct {
	scores []float32
	qconv  []byte
	vbuf   []float32
	qf, kf []float32 // the blocked path's queries (rounded to F16) and a block of keys
}

// attnQueries is how many (row, head) queries one item of the blocked
// path scores together: each block of keys and values is converted once
// for all of them, and their scores (one context each) stay in a worker's
// cache-sized scratch.
const attnQueries = 32

// attnBlock is how many positions the blocked path converts at a time:
// a block of keys and one of values as floats (16 KiB each for heads of
// 128) stay in a core's L1 cache while every query of the item reads them.
const attnBlock = 32

func (j *attnJob) prepare(g AttnGeom, q []float32, k, v *kvRows, pos0, T int, out []float32, workers int) {
	*j = attnJob{g: g, q: q, out: out, k: k, v: v, pos0: pos0, T: T, scratch: j.scratch}
	if k.typ == gguf.TypeF32 {
		j.kc = k.f32()
	} else {
		var err error
		if j.kdot, err = quant.NewDotter(k.typ, g.KDim); err != nil {
			panic("engine: " + err.Error()) // checkCacheTypes checked the blocks
		}
	}
	if v.typ == gguf.TypeF32 {
		j.vc = v.f32()
	}
	for len(j.scratch) < workers {
		j.scratch = append(j.scratch, attnScratch{})
	}
	// F16 keys and values of whole chunks take the blocked path.
	j.blocked = k.typ == gguf.TypeF16 && v.typ == gguf.TypeF16 && g.KDim%32 == 0 && g.VDim%8 == 0 && vecDotRows != nil
	queries := 1
	if j.blocked {
		// Fewer heads an item while there would be fewer items than
		// workers (a decoded token of a model with few key-value heads).
		j.headsPer = min(g.Group, attnQueries)
		j.rowsPer = max(1, attnQueries/j.headsPer)
		for j.headsPer > 1 && j.items() < workers {
			j.headsPer = (j.headsPer + 1) / 2
			j.rowsPer = max(1, attnQueries/j.headsPer)
		}
		queries = j.rowsPer * j.headsPer
	}
	for i := range j.scratch[:workers] {
		sc := &j.scratch[i]
		sc.scores = grow(sc.scores, queries*(pos0+T))
		if v.typ != gguf.TypeF32 {
			sc.vbuf = grow(sc.vbuf, valueBlock*g.VDim)
		}
		if j.blocked {
			sc.qf = grow(sc.qf, queries*g.KDim)
			sc.kf = grow(sc.kf, attnBlock*g.KDim)
			sc.vbuf = grow(sc.vbuf, attnBlock*g.VDim)
		}
	}
}

// items is the number of work items: (row, head) pairs, or the blocked
// path's blocks of rows by heads of each key-value head.
func (j *attnJob) items() int {
	if !j.blocked {
		return j.T * j.g.Heads
	}
	rowBlocks := (j.T + j.rowsPer - 1) / j.rowsPer
	headBlocks := (j.g.Group + j.headsPer - 1) / j.headsPer
	return rowBlocks * (j.g.Heads / j.g.Group) * headBlocks
}

// release drops the job's references to the step's tensors and caches.
func (j *attnJob) release() { *j = attnJob{scratch: j.scratch} }

// run computes (row, head) pairs [lo, hi): each query head's scores over
// the positions it sees, their softmax, and the weighted sum of the
// values. With an F32 cache that is ggml's arithmetic on F32; with another
// type each query head is converted to the keys' dot type once, as ggml
// converts src1 of the key product (ggml_cpu_fp32_to_fp16,
// quantize_row_q8_0), each score is a dot product with a cached key row in
// its own type, the weights are rounded to F16 for F16 values, as ggml
// converts them for its product with the values, and the values are
// converted to float valueBlock rows at a time and accumulated in the
// same order.
func (j *attnJob) run(w, lo, hi int) {
	if j.blocked {
		for i := lo; i < hi; i++ {
			j.runBlock(w, i)
		}
		return
	}
	g, k, v := &j.g, j.k, j.v
	sc := &j.scratch[w]
	vRow := g.Heads * g.VDim
	for i := lo; i < hi; i++ {
		t, hd := i/g.Heads, i%g.Heads
		first, pos := g.span(j.pos0 + t)
		qh := j.q[t*g.QStride+hd*g.KDim : t*g.QStride+(hd+1)*g.KDim]
		kvh := hd / g.Group
		scores := sc.scores[first : pos+1]
		if k.typ == gguf.TypeF32 {
			for p := range scores {
				kr := j.kc[(first+p)*k.width+kvh*g.KDim:]
				scores[p] = quant.DotFloat32(qh, kr[:g.KDim]) * g.Scale
			}
		} else {
			sc.qconv, _ = quant.QuantizeActivations(sc.qconv[:0], k.typ, qh)
			for p := range scores {
				scores[p] = j.kdot.Dot(k.rowBytesOf(first+p, kvh*g.KDim, g.KDim), sc.qconv) * g.Scale
			}
		}
		g.softmax(scores, hd)
		if v.typ == gguf.TypeF16 {
			roundF16(scores)
		}
		o := j.out[t*vRow+hd*g.VDim : t*vRow+(hd+1)*g.VDim]
		clear(o)
		if v.typ == gguf.TypeF32 {
			accumulate(o, j.vc[first*v.width+kvh*g.VDim:], v.width, scores)
			continue
		}
		for b := 0; b < len(scores); b += valueBlock {
			n := min(valueBlock, len(scores)-b)
			for r := range n {
				quant.Dequantize(sc.vbuf[r*g.VDim:r*g.VDim], v.typ, v.rowBytesOf(first+b+r, kvh*g.VDim, g.VDim))
			}
			accumulate(o, sc.vbuf, g.VDim, scores[b:b+n])
		}
	}
}

// runBlock is item i of the blocked path: rowsPer rows by headsPer query
// heads sharing one key-value head. Every query gets the bits run gives
// it: its queries are rounded to F16, as QuantizeActivations does for the
// F16 dot, and each score is that dot with the cached key (vecDotRows on
// the key converted as the dot kernel converts it); its weights are
// rounded to F16 as before; and its values are converted and summed by
// accumulate in position order. The keys and values are converted
// attnBlock positions at a time, once for all the item's queries, and
// then read from the core's cache.
func (j *attnJob) runBlock(w, i int) {
	g, sc := &j.g, &j.scratch[w]
	headBlocks := (g.Group + j.headsPer - 1) / j.headsPer
	kvHeads := g.Heads / g.Group
	hb, kvh, rb := i%headBlocks, i/headBlocks%kvHeads, i/headBlocks/kvHeads
	t0, t1 := rb*j.rowsPer, min((rb+1)*j.rowsPer, j.T)
	h0, h1 := kvh*g.Group+hb*j.headsPer, min(kvh*g.Group+(hb+1)*j.headsPer, (kvh+1)*g.Group)
	nh := h1 - h0
	lo, _ := g.span(j.pos0 + t0)
	_, hi := g.span(j.pos0 + t1 - 1)
	L := hi + 1 - lo // the positions any of the item's queries sees
	query := func(t, hd int) (qf, scores []float32, first, last int) {
		n := (t-t0)*nh + hd - h0
		first, last = g.span(j.pos0 + t)
		return sc.qf[n*g.KDim : (n+1)*g.KDim], sc.scores[n*L : (n+1)*L], first, last
	}
	for t := t0; t < t1; t++ {
		for hd := h0; hd < h1; hd++ {
			qf, _, _, _ := query(t, hd)
			for d, x := range j.q[t*g.QStride+hd*g.KDim : t*g.QStride+(hd+1)*g.KDim] {
				qf[d] = quant.F16ToF32(quant.F32ToF16(x))
			}
		}
	}
	for b := lo; b <= hi; b += attnBlock {
		n := min(attnBlock, hi+1-b)
		vecCvtF16Rows(sc.kf[:n*g.KDim], j.k.f16From(b, kvh*g.KDim), j.k.rowBytes, g.KDim)
		for t := t0; t < t1; t++ {
			for hd := h0; hd < h1; hd++ {
				qf, scores, first, last := query(t, hd)
				a, z := max(first, b), min(last, b+n-1)
				if a > z {
					continue
				}
				out := scores[a-lo : z+1-lo]
				vecDotRows(out, qf, sc.kf[(a-b)*g.KDim:], g.KDim)
				for p := range out {
					out[p] *= g.Scale
				}
			}
		}
	}
	vRow := g.Heads * g.VDim
	for t := t0; t < t1; t++ {
		for hd := h0; hd < h1; hd++ {
			_, scores, first, last := query(t, hd)
			weights := scores[first-lo : last+1-lo]
			g.softmax(weights, hd)
			roundF16(weights)
			clear(j.out[t*vRow+hd*g.VDim : t*vRow+(hd+1)*g.VDim])
		}
	}
	for b := lo; b <= hi; b += attnBlock {
		n := min(attnBlock, hi+1-b)
		vecCvtF16Rows(sc.vbuf[:n*g.VDim], j.v.f16From(b, kvh*g.VDim), j.v.rowBytes, g.VDim)
		for t := t0; t < t1; t++ {
			for hd := h0; hd < h1; hd++ {
				_, scores, first, last := query(t, hd)
				a, z := max(first, b), min(last, b+n-1)
				if a > z {
					continue
				}
				o := j.out[t*vRow+hd*g.VDim : t*vRow+(hd+1)*g.VDim]
				accumulate(o, sc.vbuf[(a-b)*g.VDim:], g.VDim, scores[a-lo:z+1-lo])
			}
		}
	}
}

// span is the positions a query at pos attends to: all up to it, or the
// last window of them (ggml masks pos − j ≥ window).
func (g *AttnGeom) span(pos int) (first, last int) {
	if g.Window > 0 {
		return max(0, pos-g.Window+1), pos
	}
	return 0, pos
}

// softmax turns query head hd's scores into weights, with its sink when
// the layer has sinks.
func (g *AttnGeom) softmax(sc []float32, hd int) {
	if g.Sinks.present() {
		softmaxSink(sc, g.Sinks.f[hd])
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

// valueBlock is how many cached value rows attention converts to float
// at a time: the summation order, position by position, does not depend
// on it.
const valueBlock = 64

// ConvSiLU is ggml_ssm_conv, a float sum in tap order, then ggml_silu.
func (b *cpuBackend) ConvSiLU(ar Arena, dst, state Tensor, kernel *vector, x Tensor, C, K, T int) {
	convolve(ar, dst.f32()[:T*C], state.f32()[:(K-1)*C], kernel.f, x.f32()[:T*C], C, K, T)
}

// convolve writes to out a causal convolution of K taps per channel
// (kernel: channel by channel) over T rows of C channels, preceded by the
// K−1 rows kept in state from earlier calls (zeros at first), keeps the
// last K−1 rows in state, and applies silu.
func convolve(ar Arena, out, state, kernel, x []float32, C, K, T int) {
	// window holds the K−1 kept rows, then the T new ones: position-major.
	window := ar.Tensor((K - 1 + T) * C).f32()
	copy(window, state)
	copy(window[(K-1)*C:], x)
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
}

func (b *cpuBackend) DeltaGates(beta, alpha Tensor, dtBias, a *vector, rows, heads int) {
	bv, av := beta.f32()[:rows*heads], alpha.f32()[:rows*heads]
	for i, v := range bv {
		bv[i] = sigmoid(v)
	}
	for i, v := range av {
		hd := i % heads
		av[i] = softplus(v+dtBias.f[hd]) * a.f[hd] // the decay gate g
	}
}

func (b *cpuBackend) DeltaNet(ar Arena, state Tensor, j DeltaJob) {
	b.runDelta(state, j, false)
}

// runDelta runs a delta rule's heads over the workers: the gated delta
// net's (a decay per head) or, kda, Kimi delta attention's (per channel).
func (b *cpuBackend) runDelta(state Tensor, j DeltaJob, kda bool) {
	w := b.work
	w.loop.Lock()
	defer w.loop.Unlock()
	d := &b.delta
	*d = deltaJob{DeltaJob: j, kda: kda, st: state.f32(), conv: j.Conv.f32(), g: j.G.f32(), beta: j.Beta.f32(), out: j.Out.f32(), scratch: d.scratch}
	for len(d.scratch) < w.n {
		d.scratch = append(d.scratch, nil)
	}
	for i := range d.scratch[:w.n] {
		d.scratch[i] = grow(d.scratch[i], 2*j.Size)
	}
	w.runLocked(j.Heads, 1, d)
	*d = deltaJob{scratch: d.scratch}
}

// deltaJob is a delta rule's loop over heads; the backend keeps one, with
// each worker's scratch.
type deltaJob struct {
	DeltaJob
	kda                    bool
	st, conv, g, beta, out []float32
	scratch                [][]float32 // per worker
}

func (d *deltaJob) run(w, lo, hi int) {
	Sd, H := d.Size, d.Heads
	scratch := d.scratch[w]
	for h := lo; h < hi; h++ {
		s := d.st[h*Sd*Sd : (h+1)*Sd*Sd]
		kh := h % d.KeyHeads // ggml_gated_delta_net pairs value head h with key head h mod H_k
		for t := range d.Rows {
			row := d.conv[t*d.ConvStride:]
			q := row[d.QOff+kh*Sd : d.QOff+(kh+1)*Sd]
			k := row[d.KOff+kh*Sd : d.KOff+(kh+1)*Sd]
			v := row[d.VOff+h*Sd : d.VOff+(h+1)*Sd]
			out := d.out[t*d.OutStride+h*Sd:][:Sd]
			if d.kda {
				at := t*H*Sd + h*Sd
				deltaStepKDA(s, q, k, v, d.g[at:at+Sd], d.beta[t*H+h], out, scratch[:2*Sd])
			} else {
				deltaStep(s, q, k, v, d.g[t*H+h], d.beta[t*H+h], out, scratch[:Sd])
			}
		}
	}
}

func (b *cpuBackend) KDADecay(gt Tensor, dtBias, a *vector, lowerBound float32, rows, heads, dim int) {
	inner := heads * dim
	g := gt.f32()[:rows*inner]
	bounded := !math.IsInf(float64(lowerBound), -1)
	for i := range g {
		ah := a.f[(i%inner)/dim]
		v := g[i] + dtBias.f[i%inner]
		if bounded {
			y := (v * ah) * -1 // ggml_scale(g, −1): exp(A_log)·(…)
			g[i] = sigmoid(y) * lowerBound
		} else {
			g[i] = softplus(v) * ah
		}
	}
}

func (b *cpuBackend) KDA(ar Arena, state Tensor, j DeltaJob) { b.runDelta(state, j, true) }

func (b *cpuBackend) ResMix(ar Arena, dst, cur Tensor, checkpoints []Tensor, score *vector, eps float32, T, D int) {
	d, c := dst.f32(), cur.f32()
	if len(checkpoints) == 0 {
		copy(d[:T*D], c[:T*D])
		return
	}
	n := len(checkpoints)
	norm := ar.Tensor(D).f32()
	p := ar.Tensor(n + 1).f32()
	scoreOf := func(v []float32) float32 {
		rmsNorm(norm, v, score.f, eps)
		var sum float64
		for _, x := range norm {
			sum += float64(x)
		}
		return float32(sum)
	}
	for t := range T {
		for k, ck := range checkpoints {
			p[k] = scoreOf(ck.f32()[t*D : (t+1)*D])
		}
		p[n] = scoreOf(c[t*D : (t+1)*D])
		softmax(p)
		out := d[t*D : (t+1)*D]
		for i := range out {
			var sum float32
			for k, ck := range checkpoints {
				sum += ck.f32()[t*D+i] * p[k]
			}
			out[i] = sum + c[t*D+i]*p[n]
		}
	}
}

func (b *cpuBackend) CheckFinite(x Tensor, n int) (int, float32) {
	v := x.f32()[:n]
	i := firstUnnormable(v)
	if i < 0 {
		return -1, 0
	}
	return i, v[i]
}
