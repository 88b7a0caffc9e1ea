package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/synth"
)

// The vector kernels of vecmath_amd64.s against the Go loops they replace,
// bit for bit (NaN payloads included), on random, extreme and
// rare-path inputs of many lengths. They skip where no kernel is in use
// (other builds, GGUFTOOL_KERNELS=generic).

// requireVec skips the test when the Go loops are all that run.
func requireVec(t *testing.T) {
	t.Helper()
	if vecSoftmaxRuns == nil || vecSiluRuns == nil || vecSwigluRuns == nil ||
		vecAttnAccum == nil || vecScaleMul == nil || vecScale == nil || vecMad == nil || vecDotRows == nil || vecCvtF16Rows == nil {
		t.Skip("no vector kernels in this build or at this kernel level")
	}
}

// withGoLoops runs fn with every kernel variable nil, so the callers run
// their Go loops, the reference.
func withGoLoops(fn func()) {
	sm, sl, sw, aa, smul, sc, mad, dr, ah := vecSoftmaxRuns, vecSiluRuns, vecSwigluRuns, vecAttnAccum, vecScaleMul, vecScale, vecMad, vecDotRows, vecCvtF16Rows
	vecSoftmaxRuns, vecSiluRuns, vecSwigluRuns, vecAttnAccum, vecScaleMul, vecScale, vecMad, vecDotRows, vecCvtF16Rows = nil, nil, nil, nil, nil, nil, nil, nil, nil
	defer func() {
		vecSoftmaxRuns, vecSiluRuns, vecSwigluRuns, vecAttnAccum, vecScaleMul, vecScale, vecMad, vecDotRows, vecCvtF16Rows = sm, sl, sw, aa, smul, sc, mad, dr, ah
	}()
	fn()
}

// expEdges are the values around which vExpf changes behaviour: zeros,
// subnormals, infinities, NaNs of several payloads (one signalling), the
// float32 limits, where expf overflows or underflows, and where |n|
// crosses 126 and 192 (x ≈ 126·ln2 and 192·ln2).
var expEdges = []uint32{
	0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000,
	0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fc12345, 0xff812345, 0x7f800001,
	0x7f7fffff, 0xff7fffff, math.Float32bits(1), math.Float32bits(-1),
	math.Float32bits(87.33655), math.Float32bits(-87.33655), math.Float32bits(88.72283),
	math.Float32bits(-88.72283), math.Float32bits(-103.97208), math.Float32bits(103.97208),
	math.Float32bits(126 * math.Ln2), math.Float32bits(-126 * math.Ln2),
	math.Float32bits(126.5 * math.Ln2), math.Float32bits(-126.5 * math.Ln2),
	math.Float32bits(192 * math.Ln2), math.Float32bits(-192 * math.Ln2),
	math.Float32bits(192.5 * math.Ln2), math.Float32bits(-192.5 * math.Ln2),
	math.Float32bits(89), math.Float32bits(-89), math.Float32bits(104), math.Float32bits(-104),
	math.Float32bits(150), math.Float32bits(-150), math.Float32bits(1e30), math.Float32bits(-1e30),
}

// expInput returns one test value of the given kind: any bit pattern, a
// uniform value over the exp range and beyond, an edge value, a value a
// few ulps or a little more from an edge, a typical activation, or (half
// of kind 5) a quiet NaN of random sign and payload.
func expInput(r *rand.Rand, kind int) float32 {
	switch kind {
	case 0:
		return math.Float32frombits(r.Uint32())
	case 1:
		return float32(r.Float64()*300 - 150)
	case 2:
		return math.Float32frombits(expEdges[r.IntN(len(expEdges))])
	case 3:
		e := math.Float32frombits(expEdges[r.IntN(len(expEdges))])
		if r.IntN(2) == 0 {
			return e + float32(r.NormFloat64()*0.01)
		}
		bits := int32(math.Float32bits(e)) + int32(r.IntN(129)-64)
		return math.Float32frombits(uint32(bits))
	case 5:
		if r.IntN(2) == 0 {
			return math.Float32frombits(0x7fc00000 | r.Uint32()&0x803fffff)
		}
		fallthrough
	default:
		return float32(r.NormFloat64() * 4)
	}
}

// expInputs returns n values, each of a kind drawn at random when kind
// is negative, so that runs of eight mix common and rare-path lanes.
func expInputs(r *rand.Rand, n, kind int) []float32 {
	x := make([]float32, n)
	for i := range x {
		k := kind
		if k < 0 {
			k = r.IntN(6)
		}
		x[i] = expInput(r, k)
	}
	return x
}

// testLengths are the lengths the kernels are tried on: every length to
// 72 and a few long ones, around multiples of eight and 64.
func testLengths() []int {
	n := make([]int, 0, 80)
	for i := range 73 {
		n = append(n, i)
	}
	return append(n, 127, 128, 129, 255, 256, 257, 1000, 1024)
}

// vecSameBits fails the test at the first index where got and want differ in any bit.
func vecSameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %#08x (%g), Go gives %#08x (%g)", what, i,
				math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
		}
	}
}

// TestVecExpLanes checks the vector exponential lane by lane against
// vExpf on every kind of input, through vecSoftmaxRuns with m = 0 (x − 0
// is x, for −0 too), and its sum against the Go's reduction.
func TestVecExpLanes(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(1, 2))
	for kind := -1; kind < 6; kind++ {
		for range 200 {
			x := expInputs(r, 8*(1+r.IntN(32)), kind)
			want := make([]float32, len(x))
			var wantSum float64
			for i := 0; i < len(x); i += 8 {
				v := want[i : i+8]
				for l := range v {
					v[l] = vExpf(x[i+l] - 0)
				}
				a0, a1, a2, a3 := v[4]+v[0], v[5]+v[1], v[6]+v[2], v[7]+v[3]
				wantSum += float64((a0 + a2) + (a1 + a3))
			}
			got := slices.Clone(x)
			sum := vecSoftmaxRuns(got, 0)
			vecSameBits(t, "exp", got, want)
			// Which NaN a sum of two keeps depends on how the compiler
			// ordered this copy's operands, and softmax never shows it:
			// its sum is NaN only when every value is (a NaN maximum) or
			// when all its NaNs are the default one (an infinite maximum).
			if math.Float64bits(sum) != math.Float64bits(wantSum) && !math.IsNaN(wantSum) {
				t.Fatalf("exp run sum %v, Go gives %v", sum, wantSum)
			}
		}
	}
}

// TestVecExpSweep runs the vector exponential over every float32 near the
// overflow, underflow and rare-path thresholds, 2^16 ulps either side.
func TestVecExpSweep(t *testing.T) {
	requireVec(t)
	for _, c := range []float32{87.33655, 88.72283, 103.97208, 126 * math.Ln2, 192 * math.Ln2, 0} {
		for _, s := range []float32{c, -c} {
			x := make([]float32, 1<<17)
			b := int64(math.Float32bits(s)) - 1<<16
			for i := range x {
				x[i] = math.Float32frombits(uint32(b + int64(i)))
			}
			want := make([]float32, len(x))
			for i, v := range x {
				want[i] = vExpf(v - 0)
			}
			vecSoftmaxRuns(x, 0)
			vecSameBits(t, "exp sweep", x, want)
		}
	}
}

// TestVecSoftmax compares softmax with its kernels and with its Go loops.
func TestVecSoftmax(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range testLengths() {
		for kind := -1; kind < 6; kind++ {
			for range 20 {
				x := expInputs(r, n, kind)
				if kind == 4 || r.IntN(3) == 0 {
					// Typical scores: finite, the maximum subtracted.
					x = expInputs(r, n, 4)
				}
				want := slices.Clone(x)
				withGoLoops(func() { softmax(want) })
				softmax(x)
				vecSameBits(t, "softmax", x, want)
			}
		}
	}
}

// TestVecSilu compares siluInto and swiglu with their kernels and with
// their Go loops.
func TestVecSilu(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range testLengths() {
		for kind := -1; kind < 6; kind++ {
			for range 10 {
				x, u := expInputs(r, n, kind), expInputs(r, n, kind)
				want, got := make([]float32, n), make([]float32, n)
				withGoLoops(func() { siluInto(want, x) })
				siluInto(got, x)
				vecSameBits(t, "siluInto", got, want)
				withGoLoops(func() { swiglu(want, x, u) })
				swiglu(got, x, u)
				vecSameBits(t, "swiglu", got, want)
			}
		}
	}
}

// attnAccumGo is Session.attention's value sum, as written there.
func attnAccumGo(out, vc []float32, stride int, sc []float32) {
	for j, p := range sc {
		vj := vc[j*stride : j*stride+len(out)]
		for d, v := range vj {
			out[d] += float32(v * p)
		}
	}
}

// TestVecAttnAccum compares the attention value sum with its Go loop over
// head sizes around the 64- and 8-column blocks, strides wider than the
// head, and values of every kind.
func TestVecAttnAccum(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, hd := range []int{8, 16, 24, 56, 64, 72, 120, 128, 136, 192, 256} {
		for _, n := range []int{1, 2, 3, 8, 33, 100} {
			for kind := -1; kind < 6; kind++ {
				stride := hd + 8*r.IntN(3)
				vc := expInputs(r, (n-1)*stride+hd, kind)
				sc := expInputs(r, n, kind)
				if kind == 4 {
					softmax(sc)
				}
				init := expInputs(r, hd, 4)
				want, got := slices.Clone(init), slices.Clone(init)
				attnAccumGo(want, vc, stride, sc)
				vecAttnAccum(got, vc, stride, sc)
				vecSameBits(t, "attention sum", got, want)
			}
		}
	}
}

// TestVecRMSNorm compares rmsNorm with its kernel and with its Go loop.
func TestVecRMSNorm(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range testLengths() {
		if n == 0 {
			continue
		}
		for kind := -1; kind < 6; kind++ {
			for range 10 {
				x, w := expInputs(r, n, kind), expInputs(r, n, kind)
				want, got := make([]float32, n), make([]float32, n)
				withGoLoops(func() { rmsNorm(want, x, w, 1e-6) })
				rmsNorm(got, x, w, 1e-6)
				vecSameBits(t, "rmsNorm", got, want)
			}
		}
	}
}

// TestVecScale checks softmax's normalisation kernel on its own, with
// scales and values of every kind (softmax only ever passes a positive
// finite scale).
func TestVecScale(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range testLengths() {
		for kind := -1; kind < 6; kind++ {
			x := expInputs(r, n, kind)
			s := expInput(r, r.IntN(5))
			want := slices.Clone(x)
			for i := range want[:n&^7] {
				want[i] *= s
			}
			vecScale(x[:n&^7], s)
			vecSameBits(t, "scale", x, want)
		}
	}
}

// TestVecMad checks the delta rule's multiply-add kernel against FMA32,
// lane by lane, with values and scales of every kind. A NaN may carry
// another payload than the software FMA gives (the instruction keeps an
// operand's); it stays a NaN.
func TestVecMad(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range testLengths() {
		for kind := -1; kind < 6; kind++ {
			y, x := expInputs(r, n, kind), expInputs(r, n, kind)
			s := expInput(r, r.IntN(5))
			want := slices.Clone(y)
			for i := range want[:n&^7] {
				want[i] = quant.FMA32(x[i], s, want[i])
			}
			vecMad(y[:n&^7], x[:n&^7], s)
			for i := range want {
				if math.IsNaN(float64(want[i])) && math.IsNaN(float64(y[i])) {
					y[i] = want[i]
				}
			}
			vecSameBits(t, "mad", y, want)
		}
	}
	// Through its caller, the delta rule, whose Go loop keeps the tail
	// the kernel leaves: the same state and output as the Go loop alone.
	for _, n := range []int{8, 13, 64, 67} {
		q, k, v := expInputs(r, n, 4), expInputs(r, n, 4), expInputs(r, n, 4)
		state := expInputs(r, n*n, 4)
		out, delta := make([]float32, n), make([]float32, n)
		wantState, wantOut := slices.Clone(state), make([]float32, n)
		withGoLoops(func() { deltaUpdate(wantState, q, k, v, 0.5, wantOut, make([]float32, n)) })
		deltaUpdate(state, q, k, v, 0.5, out, delta)
		vecSameBits(t, "delta rule state", state, wantState)
		vecSameBits(t, "delta rule output", out, wantOut)
	}
}

// TestVecDotRows: converting keys with vecCvtF16Rows and scoring them
// with vecDotRows gives quant's F16 dot of each cached key row with the
// query as F16, bit for bit, over widths of one to several chunks, key
// strides wider than a head, even and odd counts of keys, and values of
// every kind (NaNs and infinities among them).
func TestVecDotRows(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(9, 10))
	f16 := func(x []float32) []byte {
		b := make([]byte, 2*len(x))
		for i, v := range x {
			h := quant.F32ToF16(v)
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		}
		return b
	}
	for _, dim := range []int{32, 64, 128, 192, 576} {
		dot, err := quant.NewDotter(gguf.TypeF16, dim)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 7, 64} {
			for kind := -1; kind < 6; kind++ {
				stride := dim + 32*r.IntN(3)
				q16, k := f16(expInputs(r, dim, kind)), f16(expInputs(r, n*stride, kind))
				q, _ := quant.Dequantize(nil, gguf.TypeF16, q16)
				want, got := make([]float32, n), make([]float32, n)
				for p := range want {
					want[p] = dot.Dot(k[2*p*stride:2*(p*stride+dim)], q16)
				}
				kf := make([]float32, n*dim)
				vecCvtF16Rows(kf, k, 2*stride, dim)
				vecDotRows(got, q, kf, dim)
				vecSameBits(t, "block scores", got, want)
			}
		}
	}
}

// TestBlockedAttentionBits: with an F16 cache, attention computed in
// blocks of rows and heads (each block of keys and values converted once)
// gives every architecture the logits, bit for bit, that it gets one
// (row, head) at a time, for a prompt in several chunks, with sliding
// windows, sinks and latent attention among them.
func TestBlockedAttentionBits(t *testing.T) {
	requireVec(t)
	for _, arch := range Archs {
		// Keys of whole chunks of 32, which the blocked path takes.
		src, _ := testModel(t, arch, gguf.TypeQ8_0, func(c *synth.Config) {
			if c.KVLoraRank > 0 {
				c.KVLoraRank = 64 - c.RopeDim
			} else {
				c.HeadDim, c.Embd = 32, 128 // olmoe's heads span the width
			}
		})
		m := open(t, src, Options{Threads: 2, BatchSize: 40})
		logits := func() []float32 {
			s, err := m.NewSession(200)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l, err := s.Eval(context.Background(), randomPrompt(3, 150), true)
			if err != nil {
				t.Fatal(err)
			}
			all := slices.Clone(l)
			// Decoded tokens too: few rows, so items split the heads.
			for range 3 {
				if l, err = s.Eval(context.Background(), []int{Argmax(l[len(l)-m.Hparams.Vocab:])}, false); err != nil {
					t.Fatal(err)
				}
				all = append(all, l...)
			}
			return all
		}
		blocked := logits()
		if sc := m.be.(*cpuBackend).attn.scratch; len(sc) == 0 || len(sc[0].qf) == 0 {
			t.Fatalf("%s: the blocked path did not run", arch)
		}
		saved := vecDotRows
		vecDotRows = nil
		alone := logits()
		vecDotRows = saved
		for i := range blocked {
			if math.Float32bits(blocked[i]) != math.Float32bits(alone[i]) {
				t.Fatalf("%s: logit %d (position %d) is %v blocked, %v one query at a time", arch, i, i/m.Hparams.Vocab, blocked[i], alone[i])
			}
		}
	}
}

// TestVecRoundF16 compares the F16 rounding of attention weights with its
// Go loop, on values of every kind (NaNs of several payloads among them)
// and lengths around the runs of eight.
func TestVecRoundF16(t *testing.T) {
	requireVec(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 8, 9, 64, 100} {
		for kind := -1; kind < 6; kind++ {
			x := expInputs(r, n, kind)
			want, got := slices.Clone(x), slices.Clone(x)
			roundF16Go(want)
			roundF16(got)
			vecSameBits(t, "F16 rounding", got, want)
		}
	}
}
