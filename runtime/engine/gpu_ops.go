package engine

import (
	"github.com/gguftool/gguftool/gpu"
)

// The device backend's operations: each records the kernel of the same
// name (gpu/ops.go, attention.go, recurrent.go), which computes what the
// CPU backend's does within its stated tolerance.

func (b *gpuBackend) AddBias(y Tensor, v *vector, rows int) {
	if !v.present() {
		return
	}
	b.do(func(bt *gpu.Batch) error { return bt.AddBias(span(y), vspan(v), rows, len(v.f)) })
}

func (b *gpuBackend) Add(dst, x, y Tensor, n int) {
	b.do(func(bt *gpu.Batch) error { return bt.Add(span(dst), span(x), span(y), n) })
}

func (b *gpuBackend) Mul(dst, x, y Tensor, n int) {
	b.do(func(bt *gpu.Batch) error { return bt.Mul(span(dst), span(x), span(y), n) })
}

func (b *gpuBackend) Copy(dst Tensor, dstOff, dstStride int, src Tensor, srcOff, srcStride, width, rows int) {
	b.do(func(bt *gpu.Batch) error {
		return bt.CopyRows(span(dst), dstOff, dstStride, span(src), srcOff, srcStride, width, rows)
	})
}

func (b *gpuBackend) Sigmoid(x Tensor, n int) {
	b.do(func(bt *gpu.Batch) error { return bt.Sigmoid(span(x), n) })
}

func (b *gpuBackend) GateSigmoid(x, g Tensor, n int) {
	b.do(func(bt *gpu.Batch) error { return bt.GateSigmoid(span(x), span(g), n) })
}

func (b *gpuBackend) ScaleRowsSigmoid(x, g Tensor, rows, width int) {
	b.do(func(bt *gpu.Batch) error { return bt.ScaleRowsSigmoid(span(x), span(g), rows, width) })
}

func (b *gpuBackend) RMSNorm(dst, x Tensor, w *vector, eps float32, rows, width int) {
	b.do(func(bt *gpu.Batch) error { return bt.RMSNorm(span(dst), span(x), vspan(w), eps, rows, width) })
}

func (b *gpuBackend) L2Norm(x Tensor, eps float32, rows, width int) {
	b.do(func(bt *gpu.Batch) error { return bt.L2Norm(span(x), eps, rows, width) })
}

var gpuGLUKinds = map[GLUKind]gpu.GLUKind{GLUSwiGLU: gpu.GLUSwiGLU, GLUSwiGLUOAI: gpu.GLUSwiGLUOAI, GLUSiTU: gpu.GLUSiTU}

func (b *gpuBackend) GLU(act GLU, dst, gate, up Tensor, rows, width int) {
	g := gpu.GLU{Kind: gpuGLUKinds[act.Kind], Beta: act.Beta, LinearBeta: act.LinearBeta}
	b.do(func(bt *gpu.Batch) error { return bt.GLU(g, span(dst), span(gate), span(up), rows, width) })
}

func (b *gpuBackend) SiLU(dst, x Tensor, rows, width int) {
	b.do(func(bt *gpu.Batch) error { return bt.SiLU(span(dst), span(x), rows, width) })
}

func (b *gpuBackend) Rope(ar Arena, x Tensor, r RopeJob) {
	j := gpu.RopeJob{Rows: r.Rows, RowStride: r.RowStride, Heads: r.Heads, HeadStride: r.HeadStride, Offset: r.Offset,
		Dims: r.Dims, Pos0: r.Pos0, Base: r.Base, FreqScale: 1, AttnFactor: 1, Neox: r.Neox, Sections: r.Sections}
	if s := r.Scaling; s != nil {
		j.FreqScale, j.ExtFactor, j.AttnFactor = s.freqScale, s.extFactor, s.attnFactor
		j.BetaFast, j.BetaSlow, j.CtxOrig = s.betaFast, s.betaSlow, s.ctxOrig
	}
	b.do(func(bt *gpu.Batch) error { return bt.Rope(span(x), j) })
}

func (b *gpuBackend) Attend(ar Arena, dst, q Tensor, k, v KVStore, g AttnGeom, pos0, rows int) {
	kk, vv := k.(*gpuKV), v.(*gpuKV)
	geom := gpu.AttnGeom{Heads: g.Heads, Group: g.Group, KDim: g.KDim, VDim: g.VDim, QStride: g.QStride,
		Scale: g.Scale, Window: g.Window}
	if g.Sinks.present() {
		geom.Sinks = vspan(g.Sinks)
	}
	b.do(func(bt *gpu.Batch) error { return bt.Attend(span(dst), span(q), kk.kv, vv.kv, geom, pos0, rows) })
}

func (b *gpuBackend) ConvSiLU(ar Arena, dst, state Tensor, kernel *vector, x Tensor, channels, taps, rows int) {
	b.do(func(bt *gpu.Batch) error {
		return bt.ConvSiLU(span(dst), span(state), vspan(kernel), span(x), channels, taps, rows)
	})
}

func (b *gpuBackend) DeltaGates(beta, alpha Tensor, dtBias, a *vector, rows, heads int) {
	b.do(func(bt *gpu.Batch) error {
		return bt.DeltaGates(span(beta), span(alpha), vspan(dtBias), vspan(a), rows, heads)
	})
}

func gpuDeltaJob(j DeltaJob) gpu.DeltaJob {
	return gpu.DeltaJob{Conv: span(j.Conv), G: span(j.G), Beta: span(j.Beta), Out: span(j.Out),
		Rows: j.Rows, Heads: j.Heads, KeyHeads: j.KeyHeads, Size: j.Size,
		ConvStride: j.ConvStride, QOff: j.QOff, KOff: j.KOff, VOff: j.VOff, OutStride: j.OutStride}
}

func (b *gpuBackend) DeltaNet(ar Arena, state Tensor, j DeltaJob) {
	b.do(func(bt *gpu.Batch) error { return bt.DeltaNet(span(state), gpuDeltaJob(j)) })
}

func (b *gpuBackend) KDADecay(g Tensor, dtBias, a *vector, lowerBound float32, rows, heads, dim int) {
	b.do(func(bt *gpu.Batch) error {
		return bt.KDADecay(span(g), vspan(dtBias), vspan(a), lowerBound, rows, heads, dim)
	})
}

func (b *gpuBackend) KDA(ar Arena, state Tensor, j DeltaJob) {
	b.do(func(bt *gpu.Batch) error { return bt.KDA(span(state), gpuDeltaJob(j)) })
}

func (b *gpuBackend) ResMix(ar Arena, dst, cur Tensor, checkpoints []Tensor, score *vector, eps float32, rows, width int) {
	scratch := ar.Tensor(gpu.ResMixScratch(len(checkpoints), rows))
	spans := make([]gpu.Span, len(checkpoints))
	for i, c := range checkpoints {
		spans[i] = span(c)
	}
	b.do(func(bt *gpu.Batch) error {
		return bt.ResMix(span(scratch), span(dst), span(cur), spans, vspan(score), eps, rows, width)
	})
}

// CheckFinite runs the check on the device and reads back its two words.
func (b *gpuBackend) CheckFinite(x Tensor, n int) (int, float32) {
	a := x.buf.dev.(*devBuf).arena
	if a == nil {
		return -1, 0
	}
	res := a.Tensor(2)
	b.do(func(bt *gpu.Batch) error { return bt.CheckFinite(span(x), n, span(res)) })
	words := b.Read(res)
	if b.err != nil {
		return -1, 0
	}
	return gpu.CheckFiniteResult([2]float32{words[0], words[1]})
}
