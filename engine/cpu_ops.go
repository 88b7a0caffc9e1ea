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
	kc, vc := k.(*kvRows), v.(*kvRows)
	if kc.typ == gguf.TypeF32 && vc.typ == gguf.TypeF32 {
		b.attendF32(g, q.f32(), kc.f32(), kc.width, vc.f32(), vc.width, pos0, rows, dst.f32())
		return
	}
	b.attendTyped(g, q.f32(), kc, vc, pos0, rows, dst.f32())
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

// attendF32 is Attend over an F32 cache of kStride and vStride floats a
// position.
func (b *cpuBackend) attendF32(g AttnGeom, q, kc []float32, kStride int, vc []float32, vStride, pos0, T int, out []float32) {
	vRow := g.Heads * g.VDim
	b.work.forEach(T*g.Heads, 1, func(lo, hi int) {
		scores := make([]float32, pos0+T)
		for i := lo; i < hi; i++ {
			t, hd := i/g.Heads, i%g.Heads
			first, pos := g.span(pos0 + t)
			qh := q[t*g.QStride+hd*g.KDim : t*g.QStride+(hd+1)*g.KDim]
			kvh := hd / g.Group
			sc := scores[first : pos+1]
			for j := range sc {
				kr := kc[(first+j)*kStride+kvh*g.KDim:]
				sc[j] = quant.DotFloat32(qh, kr[:g.KDim]) * g.Scale
			}
			g.softmax(sc, hd)
			o := out[t*vRow+hd*g.VDim : t*vRow+(hd+1)*g.VDim]
			clear(o)
			accumulate(o, vc[first*vStride+kvh*g.VDim:], vStride, sc)
		}
	})
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

// attendTyped is Attend over a cache of another type than F32: each
// query head converted to the keys' dot type once, as ggml converts src1
// of the key product (ggml_cpu_fp32_to_fp16, quantize_row_q8_0), each
// score a dot product with a cached key row in its own type; the weights
// rounded to F16 for F16 values, as ggml converts them for its product
// with the values; and the values converted to float valueBlock rows at a
// time and accumulated as attendF32 does.
func (b *cpuBackend) attendTyped(g AttnGeom, q []float32, k, v *kvRows, pos0, T int, out []float32) {
	vRow := g.Heads * g.VDim
	var kdot quant.Dotter
	if k.typ != gguf.TypeF32 {
		var err error
		if kdot, err = quant.NewDotter(k.typ, g.KDim); err != nil {
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
	b.work.forEach(T*g.Heads, 1, func(lo, hi int) {
		scores := make([]float32, pos0+T)
		var qconv []byte
		var vbuf []float32
		if v.typ != gguf.TypeF32 {
			vbuf = make([]float32, valueBlock*g.VDim)
		}
		for i := lo; i < hi; i++ {
			t, hd := i/g.Heads, i%g.Heads
			first, pos := g.span(pos0 + t)
			qh := q[t*g.QStride+hd*g.KDim : t*g.QStride+(hd+1)*g.KDim]
			kvh := hd / g.Group
			sc := scores[first : pos+1]
			if k.typ == gguf.TypeF32 {
				for j := range sc {
					kr := kc[(first+j)*k.width+kvh*g.KDim:]
					sc[j] = quant.DotFloat32(qh, kr[:g.KDim]) * g.Scale
				}
			} else {
				qconv, _ = quant.QuantizeActivations(qconv[:0], k.typ, qh)
				for j := range sc {
					sc[j] = kdot.Dot(k.rowBytesOf(first+j, kvh*g.KDim, g.KDim), qconv) * g.Scale
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
			o := out[t*vRow+hd*g.VDim : t*vRow+(hd+1)*g.VDim]
			clear(o)
			if v.typ == gguf.TypeF32 {
				accumulate(o, vc[first*v.width+kvh*g.VDim:], v.width, sc)
				continue
			}
			for b := 0; b < len(sc); b += valueBlock {
				n := min(valueBlock, len(sc)-b)
				for j := range n {
					quant.Dequantize(vbuf[j*g.VDim:j*g.VDim], v.typ, v.rowBytesOf(first+b+j, kvh*g.VDim, g.VDim))
				}
				accumulate(o, vbuf, g.VDim, sc[b:b+n])
			}
		}
	})
}

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
	st, conv, g, beta, out := state.f32(), j.Conv.f32(), j.G.f32(), j.Beta.f32(), j.Out.f32()
	Sd, Hv := j.Size, j.Heads
	b.work.forEach(Hv, 1, func(lo, hi int) {
		scratch := make([]float32, Sd)
		for hv := lo; hv < hi; hv++ {
			kh := hv % j.KeyHeads // ggml_gated_delta_net pairs value head h with key head h mod H_k
			s := st[hv*Sd*Sd : (hv+1)*Sd*Sd]
			for t := range j.Rows {
				row := conv[t*j.ConvStride : (t+1)*j.ConvStride]
				q := row[j.QOff+kh*Sd : j.QOff+(kh+1)*Sd]
				k := row[j.KOff+kh*Sd : j.KOff+(kh+1)*Sd]
				v := row[j.VOff+hv*Sd : j.VOff+(hv+1)*Sd]
				deltaStep(s, q, k, v, g[t*Hv+hv], beta[t*Hv+hv], out[t*j.OutStride+hv*Sd:][:Sd], scratch)
			}
		}
	})
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

func (b *cpuBackend) KDA(ar Arena, state Tensor, j DeltaJob) {
	st, conv, g, beta, out := state.f32(), j.Conv.f32(), j.G.f32(), j.Beta.f32(), j.Out.f32()
	Sd, H := j.Size, j.Heads
	inner := H * Sd
	b.work.forEach(H, 1, func(lo, hi int) {
		scratch := make([]float32, 2*Sd)
		for hd := lo; hd < hi; hd++ {
			s := st[hd*Sd*Sd : (hd+1)*Sd*Sd]
			for t := range j.Rows {
				row := conv[t*j.ConvStride:]
				at := t*inner + hd*Sd
				q := row[j.QOff+hd*Sd : j.QOff+(hd+1)*Sd]
				k := row[j.KOff+hd*Sd : j.KOff+(hd+1)*Sd]
				v := row[j.VOff+hd*Sd : j.VOff+(hd+1)*Sd]
				deltaStepKDA(s, q, k, v, g[at:at+Sd], beta[t*H+hd], out[t*j.OutStride+hd*Sd:][:Sd], scratch)
			}
		}
	})
}

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
