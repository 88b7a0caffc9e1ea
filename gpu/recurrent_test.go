package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf/quant"
)

// The recurrent layers' kernels against a Go port of the CPU backend's
// math (runtime/engine: convolve, DeltaGates, KDADecay, deltaJob.run with
// deltaStep/deltaStepKDA/deltaUpdate, ResMix), in float32 as the CPU
// computes it. The GPU sums in its own order, may fuse a multiply and an
// add the CPU rounds apart, and its exp and log are not the CPU's, so the
// results are close, not identical; each tolerance says how close.

// convTolerance bounds ConvSiLU's outputs: |Δ| ≤ convTolerance·(Σ|x·w| +
// |out|). The sum of taps products is a few roundings (ε = 6e-8 each,
// more where the GPU fuses them), SiLU's exp a few ulp more: 2e-6 is
// many times the worst seen (below 1e-7 on lavapipe) and still far below
// an error that matters. The state, a copy, must be exact.
const convTolerance = 2e-6

// gateTolerance bounds the gates. σ(x) (β, the bounded KDA decay) is
// relative to σ·(1 + |x|), since GLSL's exp is specified to 3 + 2|x| ulp;
// a softplus decay s·a is absolute, |a|·(1 + |s|), since GLSL's log is
// specified to an absolute error of 2⁻²¹ near 1 (log(1 + eˣ) for x ≪ 0).
// Both specifications allow about 5e-7 of these bounds; lavapipe's worst
// is 3e-7.
const gateTolerance = 2e-6

// deltaTolerance bounds the delta rules, whose float32 error accumulates
// over the tokens: each token's S·k and S·q are Size-long dot products
// summed in another order than the CPU's (vectorised) ones and the state
// takes an FMA per element, each adding up to about Size·ε of the row's
// magnitude (6e-8·24 ≈ 1.4e-6, far less in practice: the roundings do
// not all fall one way) to a state the next token reads. An output may
// differ from the reference by deltaTolerance·(scale·Σ|S·q| + |out|), a
// state value by deltaTolerance·max|S[j][·]| of its row. Over 10 tokens
// the worst seen on lavapipe is 2e-7 for outputs and 5e-7 for the state,
// whatever the size — the rule with unit keys and β ≤ 1 damps old errors
// rather than growing them — and 1e-5 leaves room for a device that
// fuses, orders or exponentiates differently.
const deltaTolerance = 1e-5

// resMixTolerance bounds ResMix's outputs: |Δ| ≤ resMixTolerance·Σ_k
// |p_k·src_k|. A score is a width-long sum (the CPU's in float64, the
// GPU's in float32 in a tree), so it carries a relative error up to about
// log2(width)·ε of Σ|x·w|/rms, which the softmax turns into a relative
// error of the weights of that size times the score's magnitude (a few
// units here): 1e-5 is a few times the worst seen.
const resMixTolerance = 1e-5

// recUpload puts vals on the device at float offset off of a new buffer
// of off+len(vals)+pad floats, the rest NaN.
func recUpload(t *testing.T, d *Device, off int, vals []float32, pad int) *Buffer {
	t.Helper()
	b, err := d.Alloc(int64(off+len(vals)+pad)*4, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	poison(t, d, b, off+len(vals)+pad)
	if err := d.WriteFloats(b, int64(off), vals); err != nil {
		t.Fatal(err)
	}
	return b
}

func recRead(t *testing.T, d *Device, s Span, n int) []float32 {
	t.Helper()
	got := make([]float32, n)
	if err := d.ReadFloats(s.Buf, int64(s.Off), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// recRun records with record in a batch and runs it.
func recRun(t *testing.T, d *Device, record func(b *Batch) error) {
	t.Helper()
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := record(b); err != nil {
		b.Submit()
		t.Fatal(err)
	}
	if err := b.Submit(); err != nil {
		t.Fatal(err)
	}
}

func recNormal(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// recCompare checks got against want within tol·bound, value by value,
// and returns the worst |Δ|/bound seen.
func recCompare(t *testing.T, what string, got, want, bound []float32, tol float64) float64 {
	t.Helper()
	worst, bad := 0.0, 0
	for i := range want {
		if math.IsNaN(float64(want[i])) { // the reference refuses the value: so must the kernel
			if !math.IsNaN(float64(got[i])) {
				t.Errorf("%s: value %d is %g, reference NaN", what, i, got[i])
			}
			continue
		}
		diff := math.Abs(float64(got[i]) - float64(want[i]))
		b := float64(bound[i])
		if b > 0 {
			worst = max(worst, diff/b)
		}
		if !(diff <= tol*b+1e-37) {
			if bad < 5 {
				t.Errorf("%s: value %d is %g, reference %g (|Δ| %.3g > %.3g)", what, i, got[i], want[i], diff, tol*b)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d values of %d out of tolerance", what, bad, len(want))
	}
	return worst
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func expf32(x float32) float32 { return float32(math.Exp(float64(x))) }

func sigmoid32(x float32) float32 { return 1 / (1 + expf32(-x)) }

func softplus32(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + expf32(x))))
}

// refConvolve is the engine's convolve: window = state then x, a float
// sum in tap order, silu; state keeps the last taps−1 rows. It returns
// the bound Σ|x·w| + |out| of each output.
func refConvolve(out, state, kernel, x []float32, C, K, T int) []float32 {
	window := append(append([]float32(nil), state[:(K-1)*C]...), x[:T*C]...)
	bound := make([]float32, T*C)
	for t := range T {
		for c := range C {
			var sum, abs float32
			for i, w := range kernel[c*K : (c+1)*K] {
				sum += window[(t+i)*C+c] * w
				abs += float32(math.Abs(float64(window[(t+i)*C+c] * w)))
			}
			out[t*C+c] = sum / (1 + expf32(-sum))
			bound[t*C+c] = abs + float32(math.Abs(float64(out[t*C+c])))
		}
	}
	copy(state, window[T*C:])
	return bound
}

// TestConvSiLU runs a prompt chunk then a decode step through one state
// (so the second call reads the rows the first kept) and compares both
// outputs and the state with the reference.
func TestConvSiLU(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, sh := range []struct{ channels, taps int }{{37, 4}, {300, 2}, {5, 1}} {
			t.Run(fmt.Sprintf("%s/%dx%d", variantName(d), sh.channels, sh.taps), func(t *testing.T) {
				checkConvSiLU(t, d, sh.channels, sh.taps, []int{9, 1, 2})
			})
		}
	}
}

func checkConvSiLU(t *testing.T, d *Device, C, K int, calls []int) {
	rng := rand.New(rand.NewPCG(uint64(C), uint64(K)))
	kernel := recNormal(rng, C*K, 0.5)
	kernel[0], kernel[1] = 40, -40 // a sum far into both tails of SiLU
	state := recNormal(rng, (K-1)*C, 1)
	kb := recUpload(t, d, 3, kernel, 0)
	sb := recUpload(t, d, 2, state, 1)
	for n, rows := range calls {
		x := recNormal(rng, rows*C, 1)
		x[0] = 1e3
		if n == 1 {
			x[rows*C-1] = 0
		}
		xb := recUpload(t, d, 5, x, 2)
		db := recUpload(t, d, 1, nil, rows*C+4) // NaN throughout
		recRun(t, d, func(b *Batch) error {
			return b.ConvSiLU(Span{db, 1}, Span{sb, 2}, Span{kb, 3}, Span{xb, 5}, C, K, rows)
		})
		want := make([]float32, rows*C)
		bound := refConvolve(want, state, kernel, x, C, K, rows)
		worst := recCompare(t, fmt.Sprintf("call %d (%d rows)", n, rows), recRead(t, d, Span{db, 1}, rows*C), want, bound, convTolerance)
		t.Logf("call %d: worst |Δ|/bound %.2g", n, worst)
		if tail := recRead(t, d, Span{db, 1 + rows*C}, 3); !math.IsNaN(float64(tail[0])) {
			t.Errorf("call %d wrote past its rows", n)
		}
		zero := make([]float32, len(state))
		recCompare(t, fmt.Sprintf("state after call %d", n), recRead(t, d, Span{sb, 2}, len(state)), state, zero, 0)
	}
}

// refDeltaGates is the engine's DeltaGates.
func refDeltaGates(beta, alpha, dtBias, a []float32, heads int) {
	for i, v := range beta {
		beta[i] = sigmoid32(v)
	}
	for i, v := range alpha {
		h := i % heads
		alpha[i] = softplus32(v+dtBias[h]) * a[h]
	}
}

// refKDADecay is the engine's KDADecay.
func refKDADecay(g, dtBias, a []float32, lowerBound float32, heads, dim int) {
	inner := heads * dim
	bounded := !math.IsInf(float64(lowerBound), -1)
	for i := range g {
		ah := a[(i%inner)/dim]
		v := g[i] + dtBias[i%inner]
		if bounded {
			g[i] = sigmoid32((v*ah)*-1) * lowerBound
		} else {
			g[i] = softplus32(v) * ah
		}
	}
}

// recGateInputs is n logits spanning softplus's branches and both
// saturations of σ.
func recGateInputs(rng *rand.Rand, n int) []float32 {
	x := recNormal(rng, n, 4)
	for i, v := range []float32{25, 20.5, 19.5, -30, -90, 0, 1e-4} {
		if i < n {
			x[i] = v
		}
	}
	return x
}

func TestDeltaGates(t *testing.T) {
	const rows, heads = 9, 6
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		rng := rand.New(rand.NewPCG(3, 4))
		beta, alpha := recGateInputs(rng, rows*heads), recGateInputs(rng, rows*heads)
		dtBias, a := recNormal(rng, heads, 1), recNormal(rng, heads, 2)
		a[0] = -1e-3
		bb, ab := recUpload(t, d, 3, beta, 2), recUpload(t, d, 1, alpha, 2)
		biasB, aB := recUpload(t, d, 2, dtBias, 0), recUpload(t, d, 4, a, 0)
		recRun(t, d, func(b *Batch) error {
			return b.DeltaGates(Span{bb, 3}, Span{ab, 1}, Span{biasB, 2}, Span{aB, 4}, rows, heads)
		})
		logits := append([]float32(nil), beta...)
		refDeltaGates(beta, alpha, dtBias, a, heads)
		betaBound, alphaBound := make([]float32, len(beta)), make([]float32, len(alpha))
		for i := range beta {
			betaBound[i] = beta[i] * (1 + abs32(logits[i]))
			alphaBound[i] = abs32(a[i%heads]) + abs32(alpha[i])
		}
		name := variantName(d)
		worstBeta := recCompare(t, name+" β", recRead(t, d, Span{bb, 3}, len(beta)), beta, betaBound, gateTolerance)
		worstAlpha := recCompare(t, name+" decay", recRead(t, d, Span{ab, 1}, len(alpha)), alpha, alphaBound, gateTolerance)
		t.Logf("%s: worst |Δ|/bound β %.2g, decay %.2g", name, worstBeta, worstAlpha)
	}
}

func TestKDADecay(t *testing.T) {
	const rows, heads, dim = 9, 3, 24
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, lowerBound := range []float32{float32(math.Inf(-1)), -5} {
			rng := rand.New(rand.NewPCG(5, 6))
			g := recGateInputs(rng, rows*heads*dim)
			dtBias, a := recNormal(rng, heads*dim, 1), recNormal(rng, heads, 2)
			gb := recUpload(t, d, 7, g, 1)
			biasB, aB := recUpload(t, d, 0, dtBias, 0), recUpload(t, d, 2, a, 0)
			recRun(t, d, func(b *Batch) error {
				return b.KDADecay(Span{gb, 7}, Span{biasB, 0}, Span{aB, 2}, lowerBound, rows, heads, dim)
			})
			bound := make([]float32, len(g))
			for i, v := range g {
				ah := a[(i%(heads*dim))/dim]
				bound[i] = 1 + abs32((v+dtBias[i%(heads*dim)])*ah) // 1 + |σ's argument|
			}
			refKDADecay(g, dtBias, a, lowerBound, heads, dim)
			for i := range g {
				if math.IsInf(float64(lowerBound), -1) {
					bound[i] = abs32(a[(i%(heads*dim))/dim]) + abs32(g[i])
				} else {
					bound[i] *= abs32(g[i])
				}
			}
			what := fmt.Sprintf("%s lower bound %g", variantName(d), lowerBound)
			worst := recCompare(t, what, recRead(t, d, Span{gb, 7}, len(g)), g, bound, gateTolerance)
			t.Logf("%s: worst |Δ|/bound %.2g", what, worst)
		}
	}
}

// refDelta is the engine's deltaJob.run over flat host slices laid out as
// j says (its Spans unused), with deltaStep, deltaStepKDA and deltaUpdate
// ported below. It returns each output's bound scale·Σ|S·q| + |out|.
func refDelta(st, conv, g, beta, out []float32, j DeltaJob, kda bool) []float32 {
	Sd, H := j.Size, j.Heads
	bound := make([]float32, len(out))
	for h := range H {
		s := st[h*Sd*Sd : (h+1)*Sd*Sd]
		kh := h % j.KeyHeads
		for t := range j.Rows {
			row := conv[t*j.ConvStride:]
			q := row[j.QOff+kh*Sd : j.QOff+(kh+1)*Sd]
			k := row[j.KOff+kh*Sd : j.KOff+(kh+1)*Sd]
			v := row[j.VOff+h*Sd : j.VOff+(h+1)*Sd]
			o := out[t*j.OutStride+h*Sd:][:Sd]
			if kda {
				at := t*H*Sd + h*Sd
				refDeltaStepKDA(s, q, k, v, g[at:at+Sd], beta[t*H+h], o)
			} else {
				refDeltaStep(s, q, k, v, g[t*H+h], beta[t*H+h], o)
			}
			scale := 1 / float32(math.Sqrt(float64(Sd)))
			for r := range Sd {
				var abs float64
				for i, qi := range q {
					abs += math.Abs(float64(s[r*Sd+i] * qi))
				}
				bound[t*j.OutStride+h*Sd+r] = float32(abs)*scale + float32(math.Abs(float64(o[r])))
			}
		}
	}
	return bound
}

func refDeltaStep(state, q, k, v []float32, g, beta float32, out []float32) {
	decay := expf32(g)
	for i := range state {
		state[i] *= decay
	}
	refDeltaUpdate(state, q, k, v, beta, out)
}

func refDeltaStepKDA(state, q, k, v, g []float32, beta float32, out []float32) {
	n := len(q)
	for j := range n {
		row := state[j*n : (j+1)*n]
		for i := range row {
			row[i] *= expf32(g[i])
		}
	}
	refDeltaUpdate(state, q, k, v, beta, out)
}

func refDeltaUpdate(state, q, k, v []float32, beta float32, out []float32) {
	n := len(q)
	scale := 1 / float32(math.Sqrt(float64(n)))
	delta := make([]float32, n)
	for j := range n {
		delta[j] = (v[j] - quant.DotFloat32(state[j*n:(j+1)*n], k)) * beta
	}
	for j := range n {
		row := state[j*n : (j+1)*n]
		for i := range row {
			row[i] = quant.FMA32(k[i], delta[j], row[i])
		}
	}
	for j := range n {
		out[j] = quant.DotFloat32(state[j*n:(j+1)*n], q) * scale
	}
}

// recTokens is a delta rule's inputs token by token, laid out for a call
// by layout.
type recTokens struct {
	heads, keyHeads, size int
	kda                   bool
	q, k, v, g, beta      [][]float32
}

// newRecTokens draws n tokens as a layer feeds the rule: L2-normalised
// queries and keys, values of unit scale (one head's a thousand times
// larger), decays from none to nearly total, β in (0, 1] with 1 and 0.
func newRecTokens(rng *rand.Rand, n, heads, keyHeads, size int, kda bool) *recTokens {
	tk := &recTokens{heads: heads, keyHeads: keyHeads, size: size, kda: kda}
	unit := func(m int) []float32 {
		x := recNormal(rng, m, 1)
		for h := 0; h < m; h += size {
			var ss float64
			for _, v := range x[h : h+size] {
				ss += float64(v * v)
			}
			for i := h; i < h+size; i++ {
				x[i] /= float32(math.Sqrt(ss))
			}
		}
		return x
	}
	decays := 1
	if kda {
		decays = size
	}
	for t := range n {
		v := recNormal(rng, heads*size, 1)
		for i := range size {
			v[size+i] *= 1e3
		}
		g := make([]float32, heads*decays)
		for i := range g {
			g[i] = -float32(rng.ExpFloat64())
		}
		g[0] = 0
		if t == 2 {
			g[len(g)-1] = -30
		}
		beta := make([]float32, heads)
		for i := range beta {
			beta[i] = sigmoid32(float32(rng.NormFloat64() * 2))
		}
		beta[0] = 1
		if t == 3 {
			beta[heads-1] = 0
		}
		tk.q, tk.k, tk.v = append(tk.q, unit(keyHeads*size)), append(tk.k, unit(keyHeads*size)), append(tk.v, v)
		tk.g, tk.beta = append(tk.g, g), append(tk.beta, beta)
	}
	return tk
}

// layout lays out tokens [lo, hi) as a DeltaJob's flat inputs: the gated
// delta net's rows of [pad | q | k | v | pad], or KDA's blocks of q, k
// and v, each rows × stride; outputs padded past each row.
func (tk *recTokens) layout(lo, hi int) (conv, g, beta []float32, j DeltaJob) {
	T, kd, vd := hi-lo, tk.keyHeads*tk.size, tk.heads*tk.size
	j = DeltaJob{Rows: T, Heads: tk.heads, KeyHeads: tk.keyHeads, Size: tk.size, OutStride: vd + 5}
	if tk.kda {
		j.ConvStride, j.QOff, j.KOff, j.VOff = vd, 0, T*vd, 2*T*vd
		conv = make([]float32, 3*T*vd)
	} else {
		j.ConvStride, j.QOff, j.KOff, j.VOff = 2*kd+vd+3, 1, 1+kd, 1+2*kd
		conv = make([]float32, T*j.ConvStride)
	}
	for t := range T {
		row := conv[t*j.ConvStride:]
		copy(row[j.QOff:], tk.q[lo+t])
		copy(row[j.KOff:], tk.k[lo+t])
		copy(row[j.VOff:], tk.v[lo+t])
		g = append(g, tk.g[lo+t]...)
		beta = append(beta, tk.beta[lo+t]...)
	}
	return conv, g, beta, j
}

// recDeltaCall runs tokens [lo, hi) of tk on the device state, checks the
// outputs against the reference run on want (the reference state, which
// it advances), and returns the worst |Δ|/bound.
func recDeltaCall(t *testing.T, d *Device, tk *recTokens, lo, hi int, state Span, want []float32) float64 {
	t.Helper()
	conv, g, beta, j := tk.layout(lo, hi)
	outN := j.Rows * j.OutStride
	j.Conv = Span{recUpload(t, d, 7, conv, 0), 7}
	j.G = Span{recUpload(t, d, 3, g, 1), 3}
	j.Beta = Span{recUpload(t, d, 5, beta, 0), 5}
	j.Out = Span{recUpload(t, d, 11, nil, outN), 11}
	recRun(t, d, func(b *Batch) error {
		if tk.kda {
			return b.KDA(state, j)
		}
		return b.DeltaNet(state, j)
	})
	out := make([]float32, outN)
	bound := refDelta(want, conv, g, beta, out, j, tk.kda)
	got := recRead(t, d, j.Out, outN)
	for r := range j.Rows {
		for i := tk.heads * tk.size; i < j.OutStride; i++ {
			if at := r*j.OutStride + i; !math.IsNaN(float64(got[at])) {
				t.Fatalf("tokens %d–%d: output padding %d was written", lo, hi, at)
			}
			got[r*j.OutStride+i] = 0 // compared as exact zeros below
		}
	}
	return recCompare(t, fmt.Sprintf("tokens %d–%d", lo, hi), got, out, bound, deltaTolerance)
}

// recStateBound is each state value's bound: the largest magnitude of its
// row.
func recStateBound(st []float32, size int) []float32 {
	bound := make([]float32, len(st))
	for r := 0; r < len(st); r += size {
		var m float32
		for _, v := range st[r : r+size] {
			m = max(m, float32(math.Abs(float64(v))))
		}
		for i := r; i < r+size; i++ {
			bound[i] = m
		}
	}
	return bound
}

// TestDeltaRules runs the gated delta net and KDA, several heads over
// fewer key heads, sizes 16 and 24 (and the models' 128), from a state
// carried in: a decode step, then a prompt chunk of 9 split 4 + 5, whose
// state must match the same 9 tokens in one call.
func TestDeltaRules(t *testing.T) {
	shapes := []struct{ heads, keyHeads, size int }{{6, 2, 16}, {6, 3, 24}, {4, 4, 24}, {2, 1, 128}}
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, kda := range []bool{false, true} {
			for _, sh := range shapes {
				name := "DeltaNet"
				if kda {
					name = "KDA"
				}
				t.Run(fmt.Sprintf("%s/%s/%dx%d/%d", variantName(d), name, sh.heads, sh.keyHeads, sh.size), func(t *testing.T) {
					checkDeltaRule(t, d, sh.heads, sh.keyHeads, sh.size, kda)
				})
			}
		}
	}
}

func checkDeltaRule(t *testing.T, d *Device, heads, keyHeads, size int, kda bool) {
	rng := rand.New(rand.NewPCG(uint64(heads*size), uint64(keyHeads)))
	tk := newRecTokens(rng, 10, heads, keyHeads, size, kda)
	ssm := heads * size * size
	start := recNormal(rng, ssm, 0.3)
	split, whole := recDeviceState(t, d, start), recDeviceState(t, d, start)
	wantSplit, wantWhole := append([]float32(nil), start...), append([]float32(nil), start...)
	worst := recDeltaCall(t, d, tk, 0, 1, split.SSM(), wantSplit) // decode
	worst = max(worst, recDeltaCall(t, d, tk, 1, 5, split.SSM(), wantSplit))
	worst = max(worst, recDeltaCall(t, d, tk, 5, 10, split.SSM(), wantSplit))
	worst = max(worst, recDeltaCall(t, d, tk, 0, 1, whole.SSM(), wantWhole))
	worst = max(worst, recDeltaCall(t, d, tk, 1, 10, whole.SSM(), wantWhole))
	gotSplit, gotWhole := recRead(t, d, split.SSM(), ssm), recRead(t, d, whole.SSM(), ssm)
	worstState := recCompare(t, "state, 1+4+5 tokens", gotSplit, wantSplit, recStateBound(wantSplit, size), deltaTolerance)
	recCompare(t, "state, 1+9 tokens", gotWhole, wantWhole, recStateBound(wantWhole, size), deltaTolerance)
	recCompare(t, "state, 1+4+5 against 1+9 tokens", gotSplit, gotWhole, recStateBound(gotWhole, size), deltaTolerance)
	if conv := recRead(t, d, split.Conv(), 3); conv[0] != 0 || conv[2] != 0 {
		t.Errorf("the rule wrote the convolution's state: %v", conv)
	}
	t.Logf("worst |Δ|/bound: outputs %.2g, state %.2g", worst, worstState)
}

// recDeviceState is a Recurrent of 3 conv floats (zero) and the SSM
// values ssm.
func recDeviceState(t *testing.T, d *Device, ssm []float32) *Recurrent {
	t.Helper()
	r, err := d.NewRecurrent(3, len(ssm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Free)
	if err := d.WriteFloats(r.SSM().Buf, int64(r.SSM().Off), ssm); err != nil {
		t.Fatal(err)
	}
	return r
}

// refResMix is the engine's ResMix (rmsNorm, its sum in float64, and
// softmax as for fewer than eight sources); it returns each output's
// bound Σ_k |p_k·src_k|.
func refResMix(dst, cur []float32, checkpoints [][]float32, score []float32, eps float32, T, D int) []float32 {
	bound := make([]float32, T*D)
	sources := append(append([][]float32(nil), checkpoints...), cur)
	n := len(sources)
	p := make([]float32, n)
	for t := range T {
		for k, src := range sources {
			x := src[t*D : (t+1)*D]
			var ss float64
			for _, v := range x {
				ss += float64(v * v)
			}
			mean := float32(ss / float64(D))
			scale := float32(1) / float32(math.Sqrt(float64(mean+eps)))
			if math.IsInf(float64(mean), 1) {
				scale = float32(math.NaN()) // the engine's rmsNorm refuses an overflowed square
			}
			var sum float64
			for i, v := range x {
				sum += float64(v*scale) * float64(score[i])
			}
			p[k] = float32(sum)
		}
		m := float32(math.Inf(-1))
		for _, v := range p {
			m = max(m, v)
		}
		var sum float64
		for k, v := range p {
			p[k] = expf32(v - m)
			sum += float64(p[k])
		}
		inv := float32(1 / sum)
		for k := range p {
			p[k] *= inv
		}
		for i := range D {
			var acc, abs float32
			for k, src := range sources {
				acc += src[t*D+i] * p[k]
				abs += float32(math.Abs(float64(src[t*D+i] * p[k])))
			}
			dst[t*D+i], bound[t*D+i] = acc, abs
		}
	}
	return bound
}

// TestResMix mixes 0 to 6 checkpoints (over one and two dispatches of
// sources), some in one buffer and some in their own, rows of a width
// that is no multiple of the workgroup, with a row of zeros and rows of
// large values among them.
func TestResMix(t *testing.T) {
	const width, eps = 300, 1e-6
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, n := range []int{0, 1, 3, 6} {
			for _, rows := range []int{1, 5} {
				t.Run(fmt.Sprintf("%s/%d checkpoints/%d rows", variantName(d), n, rows), func(t *testing.T) {
					checkResMix(t, d, n, rows, width, eps)
				})
			}
		}
	}
}

func checkResMix(t *testing.T, d *Device, n, rows, width int, eps float32) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(rows)))
	rowN := rows * width
	shared := recUpload(t, d, 0, nil, 4+n*rowN) // even checkpoints live here, one after another
	var checkpoints [][]float32
	var spans []Span
	for k := range n {
		c := recNormal(rng, rowN, 1)
		switch k {
		case 1:
			clear(c[:width]) // a row of zeros scores 0
		case 2:
			for i := range c {
				c[i] *= 1e4
			}
		case 3:
			for i := (rows - 1) * width; i < rowN; i++ {
				c[i] = 3e19 // its squares overflow: the row's mix is NaN
			}
		}
		checkpoints = append(checkpoints, c)
		if k%2 == 0 {
			off := 4 + (k/2)*rowN
			if err := d.WriteFloats(shared, int64(off), c); err != nil {
				t.Fatal(err)
			}
			spans = append(spans, Span{shared, off})
		} else {
			spans = append(spans, Span{recUpload(t, d, 9, c, 0), 9})
		}
	}
	cur := recNormal(rng, rowN, 3)
	score := recNormal(rng, width, 0.1)
	curB, scoreB := recUpload(t, d, 6, cur, 0), recUpload(t, d, 1, score, 0)
	dstB := recUpload(t, d, 2, nil, rowN+3)
	scratch := recUpload(t, d, 5, nil, ResMixScratch(n, rows))
	recRun(t, d, func(b *Batch) error {
		return b.ResMix(Span{scratch, 5}, Span{dstB, 2}, Span{curB, 6}, spans, Span{scoreB, 1}, eps, rows, width)
	})
	want := make([]float32, rowN)
	bound := refResMix(want, cur, checkpoints, score, eps, rows, width)
	got := recRead(t, d, Span{dstB, 2}, rowN+1)
	if !math.IsNaN(float64(got[rowN])) {
		t.Error("ResMix wrote past its rows")
	}
	worst := recCompare(t, "mix", got[:rowN], want, bound, resMixTolerance)
	t.Logf("worst |Δ|/bound %.2g", worst)
}

// TestRecurrentSaveRestore saves a state, lets a step change it, restores
// it, and clones it: the copies are the device's, so exact.
func TestRecurrentSaveRestore(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{Staging: true})
	const conv, heads, size = 9, 2, 16
	r, err := d.NewRecurrent(conv, heads*size*size)
	if err != nil {
		t.Fatal(err)
	}
	n := conv + heads*size*size
	if got := recRead(t, d, r.Conv(), n); recCountNonzero(got) != 0 {
		t.Fatalf("a new state holds %d nonzero values", recCountNonzero(got))
	}
	if err := r.Restore(); err != nil { // nothing saved: nothing to put back
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	start := recNormal(rng, n, 1)
	if err := d.WriteFloats(r.buf, 0, start); err != nil {
		t.Fatal(err)
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	if r.Bytes() != 2*int64(n)*4 {
		t.Errorf("a saved state holds %d bytes, want %d", r.Bytes(), 2*n*4)
	}
	tk := newRecTokens(rng, 3, heads, 1, size, false)
	want := append([]float32(nil), start[conv:]...)
	recDeltaCall(t, d, tk, 0, 3, r.SSM(), want)
	if got := recRead(t, d, r.SSM(), len(want)); got[0] == start[conv] {
		t.Fatal("the step left the state as it was")
	}
	if err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	zero := make([]float32, n)
	recCompare(t, "restored state", recRead(t, d, r.Conv(), n), start, zero, 0)
	c, err := r.Clone()
	if err != nil {
		t.Fatal(err)
	}
	recCompare(t, "clone", recRead(t, d, c.Conv(), n), start, zero, 0)
	if c.Bytes() != int64(n)*4 {
		t.Errorf("a clone holds %d bytes, want %d (the saved copy is not cloned)", c.Bytes(), n*4)
	}
	if c.SSM().Off != conv {
		t.Errorf("the clone's SSM is at %d, want %d", c.SSM().Off, conv)
	}
	held, left := d.Used(), d.Used()-c.Bytes()-r.Bytes()
	c.Free()
	r.Free()
	r.Free() // a second Free does nothing
	if d.Used() != left {
		t.Errorf("freeing the states left %d bytes counted of %d, want %d", d.Used(), held, left)
	}
}

func recCountNonzero(x []float32) int {
	n := 0
	for _, v := range x {
		if v != 0 {
			n++
		}
	}
	return n
}

// TestRecurrentRefusals checks the errors for shapes the kernels do not
// take, and that empty work records nothing.
func TestRecurrentRefusals(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	buf := recUpload(t, d, 0, nil, 64)
	s := Span{buf, 0}
	recRun(t, d, func(b *Batch) error {
		if err := b.DeltaNet(s, DeltaJob{Conv: s, G: s, Beta: s, Out: s, Rows: 1, Heads: 1, KeyHeads: 1, Size: deltaMaxSize + 1}); err == nil {
			t.Error("a state size past the kernel's gave no error")
		}
		if err := b.KDA(s, DeltaJob{Conv: s, G: s, Beta: s, Out: s, Rows: 1, Heads: 2, KeyHeads: 0, Size: 4}); err == nil {
			t.Error("no key heads gave no error")
		}
		if err := b.ConvSiLU(s, s, Span{}, s, 4, 2, 1); err == nil {
			t.Error("a convolution without a kernel buffer gave no error")
		}
		if err := b.ConvSiLU(s, s, s, s, 4, 0, 1); err == nil {
			t.Error("a convolution of no taps gave no error")
		}
		return b.DeltaNet(s, DeltaJob{Rows: 0, Heads: 1, KeyHeads: 1, Size: 4})
	})
}
