package gpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// Attention against a Go reference of the CPU's Attend (cpu_ops.go), in
// float64 but with the CPU's roundings: keys and values as the cache
// stores them (F16 rounded to nearest, ties to even), the query rounded
// to F16 for an F16 key cache, the softmax weights rounded to F16 for F16
// values, the sink in the maximum and the denominator.
//
// The kernel computes in float32 in its own order. A score s_j is a dot
// product: its error is a few float32 roundings of A_j = |scale|·Σ|q·k_j|,
// and a weight exp(s_j − max)/sum moves by that much relative to itself,
// and by the weighted mean Ā = Σ p·A of the others' through the sum;
// exp, the division and the sum of weight·value add a few roundings more.
// So an output may differ from the reference by
//
//	attnTolerance × Σ_j p_j·|v_j|·(2 + A_j + Ā),
//
// a bound of the kind Σ p|v| ≤ max|v|. With F16 values the kernel's
// weight is the reference's rounded weight w_j exactly, except where the
// weight's float32 error (the same relative bound) straddles a midpoint
// between two halves, where it may round to the neighbouring half: each
// such position adds one half's step times |v_j| (the flip allowance),
// and the rest of the error is attnTolerance × Σ w·|v|, the sum's own.
// (The CPU itself is off the float64 softmax by these roundings; a flip
// is the GPU rounding one weight to the other side of a midpoint from the
// CPU, which moves that output by up to 2⁻¹¹·w_j·|v_j|.)
//
// attnTolerance is 2⁻¹⁹ ≈ 1.9e-6, sixteen float32 ulps of 1. On lavapipe
// the worst error is 0.13 of that bound (an F16-value sum; 0.02 with F32
// values), which is 2.4e-6 of max|v| at most without a flip and 2e-4 with
// one (the test logs these); the margin is for a GPU's exp, which Vulkan
// allows a few ulps, and for keys of up to 1024 values.
const attnTolerance = 1.0 / (1 << 19)

// attnCase is one attention: the caches' types, the heads, the cache
// before the step and the step's rows.
type attnCase struct {
	name         string
	kt, vt       gguf.Type
	heads, group int
	kdim, vdim   int
	shared       bool // v is k: the values are the first vdim of each key row (MLA)
	window       int
	sinks        bool
	cached, rows int
	peak         float32 // the scale is peak/√kdim: 1 for a typical softmax, more for a peaked one
	qpad         int     // floats after each row's queries
}

func attnCases() []attnCase {
	f16, f32 := gguf.TypeF16, gguf.TypeF32
	return []attnCase{
		{name: "gqa/f16/decode", kt: f16, vt: f16, heads: 8, group: 4, kdim: 64, vdim: 64, cached: 20, rows: 1, peak: 1},
		{name: "gqa/f16/prefill", kt: f16, vt: f16, heads: 8, group: 4, kdim: 64, vdim: 64, cached: 20, rows: 7, peak: 1, qpad: 3},
		{name: "gqa/f32/prefill", kt: f32, vt: f32, heads: 8, group: 4, kdim: 64, vdim: 64, cached: 20, rows: 7, peak: 1},
		{name: "gqa/f32/decode", kt: f32, vt: f32, heads: 8, group: 4, kdim: 64, vdim: 64, cached: 20, rows: 1, peak: 1},
		{name: "head40/f16/prefill", kt: f16, vt: f16, heads: 8, group: 4, kdim: 40, vdim: 40, cached: 20, rows: 7, peak: 1},
		{name: "head40/f32/decode", kt: f32, vt: f32, heads: 8, group: 4, kdim: 40, vdim: 40, cached: 20, rows: 1, peak: 1},
		{name: "head72/f32/prefill", kt: f32, vt: f32, heads: 6, group: 2, kdim: 72, vdim: 72, cached: 20, rows: 7, peak: 1},
		{name: "head72/f16/decode", kt: f16, vt: f16, heads: 6, group: 2, kdim: 72, vdim: 72, cached: 20, rows: 1, peak: 1},
		{name: "head16/f32/prefill", kt: f32, vt: f32, heads: 4, group: 1, kdim: 16, vdim: 16, cached: 20, rows: 7, peak: 1},
		{name: "mla/f16/prefill", kt: f16, vt: f16, heads: 4, group: 4, kdim: 72, vdim: 64, shared: true, cached: 20, rows: 7, peak: 1},
		{name: "mla/f32/decode", kt: f32, vt: f32, heads: 4, group: 4, kdim: 72, vdim: 64, shared: true, cached: 20, rows: 1, peak: 1},
		{name: "mla/f32/prefill", kt: f32, vt: f32, heads: 4, group: 4, kdim: 200, vdim: 160, shared: true, cached: 20, rows: 7, peak: 1},
		{name: "sinks/window/f16/prefill", kt: f16, vt: f16, heads: 8, group: 2, kdim: 40, vdim: 40, window: 5, sinks: true, cached: 20, rows: 7, peak: 1},
		{name: "sinks/window/f32/decode", kt: f32, vt: f32, heads: 8, group: 2, kdim: 40, vdim: 40, window: 5, sinks: true, cached: 20, rows: 1, peak: 1},
		{name: "sinks/f32/prefill", kt: f32, vt: f32, heads: 8, group: 4, kdim: 64, vdim: 64, sinks: true, cached: 20, rows: 7, peak: 1},
		{name: "window/f16/prefill", kt: f16, vt: f16, heads: 8, group: 4, kdim: 64, vdim: 64, window: 12, cached: 20, rows: 7, peak: 1},
		{name: "kf32-vf16/prefill", kt: f32, vt: f16, heads: 4, group: 1, kdim: 48, vdim: 48, cached: 20, rows: 7, peak: 1},
		{name: "kf16-vf32/prefill", kt: f16, vt: f32, heads: 4, group: 1, kdim: 48, vdim: 48, cached: 20, rows: 7, peak: 1},
		{name: "peaked/f16/prefill", kt: f16, vt: f16, heads: 4, group: 2, kdim: 40, vdim: 40, cached: 20, rows: 7, peak: 8},
		{name: "peaked/f32/prefill", kt: f32, vt: f32, heads: 4, group: 2, kdim: 40, vdim: 40, sinks: true, cached: 20, rows: 7, peak: 8},
		// Past the 2048 scores the kernel keeps: the rest are scored again.
		{name: "long/f16/decode", kt: f16, vt: f16, heads: 2, group: 1, kdim: 40, vdim: 40, cached: 4500, rows: 1, peak: 1},
		{name: "long/window/f32/prefill", kt: f32, vt: f32, heads: 2, group: 2, kdim: 40, vdim: 24, window: 2500, sinks: true, cached: 4500, rows: 3, peak: 1},
	}
}

func TestAttend(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		var all attnStats
		for i, c := range attnCases() {
			t.Run(variantName(d)+"/"+c.name, func(t *testing.T) {
				all.add(checkAttend(t, d, c, uint64(i)))
			})
		}
		t.Logf("%s: the worst error is %.3g of the tolerance, %.3g of max|v|; %d of %d outputs have a flip allowance, %d of them needed it",
			variantName(d), all.worst, all.ofMaxV, all.flippable, all.outputs, all.flipped)
	}
}

// attnInputs are one case's host values: the rows appended to the caches
// (before and in the step), the step's queries and the sinks.
type attnInputs struct {
	k, v, q, sinks []float32
	kWidth, vWidth int
	scale          float32
}

func makeAttnInputs(c attnCase, rng *rand.Rand) attnInputs {
	kvHeads := c.heads / c.group
	in := attnInputs{kWidth: kvHeads * c.kdim, vWidth: kvHeads * c.vdim, scale: c.peak / float32(math.Sqrt(float64(c.kdim)))}
	if c.shared {
		in.vWidth = in.kWidth
	}
	n := c.cached + c.rows
	// Keys a few times larger or smaller (a peaked softmax is a case of
	// its own), values a hundred times: the output's range.
	big := 100.0
	if !c.shared {
		big = 4
		in.v = randomRows(rng, n, in.vWidth, 100)
	}
	in.k = randomRows(rng, n, in.kWidth, big)
	in.q = make([]float32, c.rows*(c.heads*c.kdim+c.qpad))
	for i := range in.q {
		in.q[i] = float32(rng.NormFloat64())
	}
	if c.sinks {
		in.sinks = make([]float32, c.heads)
		for i := range in.sinks {
			in.sinks[i] = float32(2 * rng.NormFloat64())
		}
		in.sinks[0] = 6 // a sink that takes most of the weight
	}
	return in
}

// randomRows is rows × width normal values, every fifth row big times
// larger and every seventh big times smaller.
func randomRows(rng *rand.Rand, rows, width int, big float64) []float32 {
	x := make([]float32, rows*width)
	for r := range rows {
		s := 1.0
		switch {
		case r%5 == 3:
			s = big
		case r%7 == 4:
			s = 1 / big
		}
		for i := range width {
			x[r*width+i] = float32(s * rng.NormFloat64())
		}
	}
	return x
}

// checkAttend runs one case and says how close it came.
func checkAttend(t *testing.T, d *Device, c attnCase, seed uint64) attnStats {
	rng := rand.New(rand.NewPCG(seed, 77))
	in := makeAttnInputs(c, rng)
	total := c.cached + c.rows
	k := newTestKV(t, d, c.kt, in.kWidth, total)
	v := k
	if !c.shared {
		v = newTestKV(t, d, c.vt, in.vWidth, total)
	}
	appendRows(t, d, k, in.k[:c.cached*in.kWidth], c.cached)
	if !c.shared {
		appendRows(t, d, v, in.v[:c.cached*in.vWidth], c.cached)
	}
	// The step, as the engine runs it: append the new rows, then attend.
	const qOff, dstOff, sinkOff = 5, 7, 2
	qStride := c.heads*c.kdim + c.qpad
	qb := attnUpload(t, d, qOff, in.q)
	kNew := attnUpload(t, d, 0, in.k[c.cached*in.kWidth:])
	var vNew *Buffer
	if !c.shared {
		vNew = attnUpload(t, d, 0, in.v[c.cached*in.vWidth:])
	}
	g := AttnGeom{Heads: c.heads, Group: c.group, KDim: c.kdim, VDim: c.vdim, QStride: qStride, Scale: in.scale, Window: c.window}
	if c.sinks {
		g.Sinks = Span{attnUpload(t, d, sinkOff, in.sinks), sinkOff}
	}
	nOut := c.rows * c.heads * c.vdim
	out := attnAlloc(t, d, dstOff+nOut)
	poison(t, d, out, dstOff+nOut)
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	err = errors.Join(b.KVAppend(k, Span{kNew, 0}, c.rows))
	if !c.shared {
		err = errors.Join(err, b.KVAppend(v, Span{vNew, 0}, c.rows))
	}
	err = errors.Join(err, b.Attend(Span{out, dstOff}, Span{qb, qOff}, k, v, g, c.cached, c.rows))
	if err = errors.Join(err, b.Submit()); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, nOut)
	if err := d.ReadFloats(out, dstOff, got); err != nil {
		t.Fatal(err)
	}
	vals, vt := in.v, c.vt
	if c.shared {
		vals, vt = in.k, c.kt
	}
	want, unit, flips := referenceAttend(c, kvStored(c.kt, in.k), kvStored(vt, vals), in, g)
	bound := make([]float64, nOut)
	st := attnStats{outputs: nOut}
	maxV := 0.0
	for _, x := range vals {
		maxV = max(maxV, math.Abs(float64(x)))
	}
	for i := range want {
		bound[i] = attnTolerance*unit[i] + flips[i]
		diff := math.Abs(float64(got[i]) - want[i])
		st.worst = max(st.worst, (diff-flips[i])/(attnTolerance*unit[i]))
		st.ofMaxV = max(st.ofMaxV, diff/maxV)
		if flips[i] > 0 {
			st.flippable++
			if diff > attnTolerance*unit[i] {
				st.flipped++
			}
		}
	}
	compareOutputs(t, c.name, got, want, bound, 1)
	return st
}

// attnStats is how close a case came: its worst error as a fraction of
// the tolerance (less the flip allowance), and as a fraction of the
// largest value; the outputs with a flip allowance, and those of them
// whose error passes attnTolerance × unit (where a weight did round to
// the other half).
type attnStats struct {
	worst, ofMaxV               float64
	outputs, flippable, flipped int
}

func (a *attnStats) add(b attnStats) {
	a.worst, a.ofMaxV = max(a.worst, b.worst), max(a.ofMaxV, b.ofMaxV)
	a.outputs, a.flippable, a.flipped = a.outputs+b.outputs, a.flippable+b.flippable, a.flipped+b.flipped
}

// kvStored is x as a cache of type typ holds it.
func kvStored(typ gguf.Type, x []float32) []float32 {
	if typ == gguf.TypeF32 {
		return x
	}
	s := make([]float32, len(x))
	for i, v := range x {
		s[i] = kvRoundHalf(v)
	}
	return s
}

func kvRoundHalf(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }

// referenceAttend is the CPU's Attend in float64 over the stored keys
// and values, with the tolerance's two parts for each output: the unit
// Σ p·|v|·(2 + A_j + Ā) (or Σ w·|v| for F16 values) and the flip
// allowance.
func referenceAttend(c attnCase, keys, vals []float32, in attnInputs, g AttnGeom) (want, unit, flips []float64) {
	n := c.rows * c.heads * c.vdim
	want, unit, flips = make([]float64, n), make([]float64, n), make([]float64, n)
	for t := range c.rows {
		pos := c.cached + t
		first := 0
		if c.window > 0 {
			first = max(0, pos-c.window+1)
		}
		for h := range c.heads {
			kvh := h / c.group
			q := in.q[t*g.QStride+h*c.kdim : t*g.QStride+(h+1)*c.kdim]
			scores, cond := make([]float64, pos+1-first), make([]float64, pos+1-first)
			for j := range scores {
				kr := keys[(first+j)*in.kWidth+kvh*c.kdim:]
				var s, a float64
				for i, x := range q {
					if c.kt == gguf.TypeF16 {
						x = kvRoundHalf(x)
					}
					s += float64(x) * float64(kr[i])
					a += math.Abs(float64(x) * float64(kr[i]))
				}
				scores[j], cond[j] = s*float64(in.scale), a*math.Abs(float64(in.scale))
			}
			var sink *float64
			if c.sinks {
				s := float64(in.sinks[h])
				sink = &s
			}
			p := softmax64Sink(scores, sink)
			var condMean float64
			for j := range p {
				condMean += p[j] * cond[j]
			}
			o := (t*c.heads + h) * c.vdim
			for j, pj := range p {
				vr := vals[(first+j)*in.vWidth+kvh*c.vdim:]
				w, flip := pj, 0.0
				if c.vt == gguf.TypeF16 {
					w, flip = halfWeight(pj, attnTolerance*(2+cond[j]+condMean))
				}
				for i := range c.vdim {
					av := math.Abs(float64(vr[i]))
					want[o+i] += w * float64(vr[i])
					flips[o+i] += flip * av
					if c.vt == gguf.TypeF16 {
						unit[o+i] += w * av
					} else {
						unit[o+i] += pj * av * (2 + cond[j] + condMean)
					}
				}
			}
		}
	}
	return want, unit, flips
}

// softmax64Sink is softmaxSink in float64: the sink joins the maximum and
// the denominator.
func softmax64Sink(x []float64, sink *float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	if sink != nil {
		m = max(m, *sink)
	}
	p := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		p[i] = math.Exp(v - m)
		sum += p[i]
	}
	if sink != nil {
		sum += math.Exp(*sink - m)
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// halfWeight is weight p rounded to F16 as the CPU rounds it, and the
// step to the neighbouring half when p's relative error rel could carry
// it across a midpoint (0 when it cannot).
func halfWeight(p, rel float64) (w, flip float64) {
	w = float64(kvRoundHalf(float32(p)))
	lo, hi := float64(kvRoundHalf(float32(p*(1-rel)))), float64(kvRoundHalf(float32(p*(1+rel))))
	return w, hi - lo
}

// TestAttendRefuses asks for what the caches or the kernel cannot give.
func TestAttendRefuses(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	k := newTestKV(t, d, gguf.TypeF16, 64, 8)
	appendRows(t, d, k, make([]float32, 4*64), 4)
	q := attnAlloc(t, d, 2*4*64)
	out := attnAlloc(t, d, 2*4*64)
	good := AttnGeom{Heads: 4, Group: 4, KDim: 64, VDim: 64, QStride: 4 * 64, Scale: 1}
	bad := map[string]func(g *AttnGeom) (pos0, rows int){
		"past the cache":       func(g *AttnGeom) (int, int) { return 3, 2 },
		"group not dividing":   func(g *AttnGeom) (int, int) { g.Group = 3; return 0, 1 },
		"keys wider than rows": func(g *AttnGeom) (int, int) { g.Group = 2; return 0, 1 },
		"key head too wide":    func(g *AttnGeom) (int, int) { g.KDim, g.QStride = 2048, 4*2048; return 0, 1 },
		"short query rows":     func(g *AttnGeom) (int, int) { g.QStride = 100; return 0, 1 },
		"queries past buffer":  func(g *AttnGeom) (int, int) { return 0, 3 },
		"sinks past buffer":    func(g *AttnGeom) (int, int) { g.Sinks = Span{q, 2*4*64 - 2}; return 0, 1 },
	}
	for name, change := range bad {
		g := good
		pos0, rows := change(&g)
		b, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		err = b.Attend(Span{out, 0}, Span{q, 0}, k, k, g, pos0, rows)
		if err := b.Submit(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestKVAppendRoundsAsTheCPU appends values of every kind — random
// magnitudes, random bits, halves' ties and boundaries, subnormals,
// infinities and NaNs — and requires the CPU's bits: F16 as
// gguf/quant.F32ToF16 rounds them, F32 as they are.
func TestKVAppendRoundsAsTheCPU(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	const width, rows = 37, 11
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, rows*width)
	special := []float32{0, float32(math.Copysign(0, -1)), 65504, 65519.996, 65520, -65520, 1e6,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7FC00001), math.Float32frombits(0xFF800123),
		1 + 1.0/2048, 1 + 3.0/2048, -(1 + 1.0/2048), // ties between halves: to even
		0x1p-24, 0x1p-25, 3 * 0x1p-25, 0x1p-25 * 1.0000001, 5 * 0x1p-26, 0x1p-14, 0x1p-14 * (1 - 0x1p-12), 0x1p-15 * 3.0001,
		1e-30, math.Float32frombits(1), 6.1e-5, -3.3e-6}
	for i := range x {
		switch {
		case i < len(special):
			x[i] = special[i]
		case i%3 == 0:
			x[i] = math.Float32frombits(rng.Uint32())
		default:
			x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(16)-10)))
		}
	}
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeF32} {
		c := newTestKV(t, d, typ, width, rows)
		appendRows(t, d, c, x[:4*width], 4) // two appends: the second at row 4
		appendRows(t, d, c, x[4*width:], rows-4)
		raw := make([]byte, rows*int(typ.RowBytes(width)))
		if err := d.Read(c.buf, 0, raw); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			var got, want uint32
			if typ == gguf.TypeF16 {
				got, want = uint32(raw[2*i])|uint32(raw[2*i+1])<<8, uint32(quant.F32ToF16(v))
			} else {
				got = uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24
				want = math.Float32bits(v)
			}
			if got != want {
				t.Errorf("%s: value %d (%g, bits %#08x) is stored as %#x, the CPU stores %#x", typ, i, v, math.Float32bits(v), got, want)
			}
		}
	}
}

// TestKVReserveTruncateClone checks the cache's growth (the CPU's rule),
// that its room counts against the budget, and that truncating, cloning
// and an over-budget growth keep the rows they should.
func TestKVReserveTruncateClone(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{Budget: 1 << 20})
	const width = 40
	rowBytes := int64(2 * width)
	if _, err := d.NewKV(gguf.TypeQ8_0, 64, 10); err == nil {
		t.Error("a Q8_0 cache was made")
	}
	c, err := d.NewKV(gguf.TypeF16, width, 100)
	if err != nil {
		t.Fatal(err)
	}
	base := d.Used()
	room := func(want int) {
		t.Helper()
		if c.Bytes() != int64(want)*rowBytes || d.Used()-base != c.Bytes() {
			t.Fatalf("room for %d rows: the cache holds %d bytes, the budget counts %d", want, c.Bytes(), d.Used()-base)
		}
	}
	attnMust(t, c.Reserve(10, false))
	room(16) // max(n, min(limit, held + held/4 + 16))
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomRows(rng, 40, width, 100)
	appendRows(t, d, c, x[:12*width], 12)
	b, _ := d.Begin()
	if err := b.KVAppend(c, Span{c.buf, 0}, 5); err == nil {
		t.Error("an append past the room gave no error")
	}
	attnMust(t, b.Submit())
	attnMust(t, c.Reserve(20, false))
	room(31)
	attnMust(t, c.Reserve(10, true))
	room(31)
	checkKVRows(t, d, c, x[:12*width])
	c.Truncate(8)
	appendRows(t, d, c, x[20*width:22*width], 2) // rows 8 and 9 replaced
	want := append(append([]float32(nil), x[:8*width]...), x[20*width:22*width]...)
	checkKVRows(t, d, c, want)

	cl, err := c.Clone(5)
	attnMust(t, err)
	if cl.Len() != 5 || cl.Bytes() != 5*rowBytes || cl.Type() != gguf.TypeF16 {
		t.Errorf("clone of 5 rows: %d rows, %d bytes, %s", cl.Len(), cl.Bytes(), cl.Type())
	}
	checkKVRows(t, d, cl, want[:5*width])
	appendRows(t, d, c, x[30*width:31*width], 1) // the clone is a copy, not a view
	checkKVRows(t, d, cl, want[:5*width])
	whole, err := c.Clone(1000)
	attnMust(t, err)
	checkKVRows(t, d, whole, append(want, x[30*width:31*width]...))
	empty, err := c.Clone(0)
	attnMust(t, err)
	if empty.Len() != 0 || empty.Bytes() != 0 {
		t.Errorf("clone of 0 rows holds %d rows, %d bytes", empty.Len(), empty.Bytes())
	}
	cl.Free()
	whole.Free()

	c.SetLimit(40)
	attnMust(t, c.Reserve(35, false))
	room(35) // max(35, min(40, 11 + 2 + 16))
	attnMust(t, c.Reserve(120, true))
	room(120) // an exact reservation may pass the limit, as the CPU's does

	err = c.Reserve(20000, true) // 1.6 MB
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("a cache over the budget: %v", err)
	}
	room(120)
	checkKVRows(t, d, c, append(want, x[30*width:31*width]...))
	c.Free()
	if c.Len() != 0 || d.Used() != base {
		t.Errorf("after Free: %d rows, %d bytes counted (before: %d)", c.Len(), d.Used(), base)
	}
}

// checkKVRows requires the cache to hold exactly the rows want, as an
// F16 cache stores them.
func checkKVRows(t *testing.T, d *Device, c *KV, want []float32) {
	t.Helper()
	if c.Len()*c.Width() != len(want) {
		t.Fatalf("the cache holds %d rows of %d, want %d values", c.Len(), c.Width(), len(want))
	}
	raw := make([]byte, 2*len(want))
	if err := d.Read(c.buf, 0, raw); err != nil {
		t.Fatal(err)
	}
	for i, v := range want {
		if got := uint16(raw[2*i]) | uint16(raw[2*i+1])<<8; got != quant.F32ToF16(v) {
			t.Fatalf("value %d of the cache is %#x, want %#x", i, got, quant.F32ToF16(v))
		}
	}
}

func attnMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newTestKV makes a cache with room for limit rows, freed with the test.
func newTestKV(t *testing.T, d *Device, typ gguf.Type, width, limit int) *KV {
	t.Helper()
	c, err := d.NewKV(typ, width, limit)
	if err != nil {
		t.Fatal(err)
	}
	attnMust(t, c.Reserve(limit, true))
	t.Cleanup(c.Free)
	return c
}

// appendRows uploads rows of x and appends them to c in a batch of its
// own.
func appendRows(t *testing.T, d *Device, c *KV, x []float32, rows int) {
	t.Helper()
	src, err := d.Alloc(int64(4*(3+len(x))), "rows to append")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free() // at once: TestKVReserveTruncateClone counts the budget
	attnMust(t, d.WriteFloats(src, 3, x))
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	err = b.KVAppend(c, Span{src, 3}, rows)
	if err = errors.Join(err, b.Submit()); err != nil {
		t.Fatal(err)
	}
}

// allocFloats is a buffer of n floats, freed with the test.
func attnAlloc(t *testing.T, d *Device, n int) *Buffer {
	t.Helper()
	b, err := d.Alloc(int64(4*n), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

// uploadFloats is a buffer holding x from float offset off.
func attnUpload(t *testing.T, d *Device, off int, x []float32) *Buffer {
	t.Helper()
	b := attnAlloc(t, d, off+len(x))
	if err := d.WriteFloats(b, int64(off), x); err != nil {
		t.Fatal(err)
	}
	return b
}
