package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf/quant"
)

// The operations of ops.go against Go ports of the CPU backend's
// (runtime/engine: cpu_ops.go, ggmlmath.go, ops.go, route.go, kimik3.go,
// deltanet.go, attention.go's RoPE, numeric.go, sample.go), which gpu
// may not import.
//
// The tolerances, as |got − want| ≤ rel·|want| + opsFloor (a NaN must be
// a NaN, an infinity the same infinity):
const (
	// Add, Mul, AddBias, Scale and CopyRows are one correctly rounded
	// operation (or none) per value in Vulkan, as on the CPU: exact.
	exactTolerance = 0
	// σ and SiLU: the GPU's exponential is ggml's v_expf (≤ 1.5 ulps of
	// e^x, where the CPU's sigmoid takes float64's exp rounded, ≤ 0.5),
	// the sum with 1 rounds (0.5 ulp) and Vulkan bounds a division by 2.5
	// ulps; 1/(1+e) and x/(1+e) pass e's relative error on undiminished.
	// About 5 ulps, and an ulp is at most 2⁻²³ of a value: 1e-6 (8.4 ulps).
	activationTolerance = 1e-6
	// SiTU adds two tanh (Cephes' tanhf, ≤ 2 ulps, against float64's
	// rounded; 1 − 2/(e^2x + 1) near 0.625 doubles e's error) and three
	// more products to σ's 5 ulps: about 15 ulps, 2e-6.
	situTolerance = 2e-6
	// RMSNorm and L2Norm sum the squares in float32, width/256 in each
	// invocation and then in a tree of 8 levels, where the CPU sums them
	// in double: at most (width/256 + 8) ulps of the sum, though the
	// roundings of a sum of positive terms fall either way and add up as
	// the square root of their number, about 5 ulps at 4096. Half of it
	// reaches the scale (a square root), and the division, square root
	// and two products add about 4 ulps: 1e-6 (8.4 ulps) holds the widths
	// tested (to 4096) with room.
	normTolerance = 1e-6
	// RoPE's angle is the CPU's to the bit; cos and sin are within about
	// 1.5 ulps of 1 (2⁻²³·1.5 ≈ 1.8e-7) of the CPU's float64 ones, after an
	// exact reduction of the angle. A rotated value x0·c − x1·s may then
	// differ by that much of |x0| + |x1| (times |mscale|), and by its own
	// rounding of the products and the sum (1.5 ulps of the larger term):
	// ropeTolerance is per unit of (|x0| + |x1|)·|mscale|.
	ropeTolerance = 4e-7
	// opsFloor absorbs results below 1e-30 that a GPU flushes to zero (a
	// denormal, or a quotient by more than 2¹²⁶, which Vulkan leaves
	// outside its division's bound) where the CPU keeps them.
	opsFloor = 1e-30
)

// Go ports of the CPU's functions.

func refExpf(x float32) float32 { return float32(math.Exp(float64(x))) }

func refSigmoid(x float32) float32 { return 1 / (1 + refExpf(-x)) }

func refSilu(x float32) float32 { return x / (1 + refExpf(-x)) }

// refVExpf is ggml_v_expf, as the engine's vExpf.
func refVExpf(x float32) float32 {
	const (
		expRound = 0x1.8p23
		expLog2e = 0x1.715476p+0
		expLn2Hi = 0x1.62e4p-1
		expLn2Lo = 0x1.7f7d1cp-20
		expC5    = 0x1.0e4020p-7
		expC4    = 0x1.573e2ep-5
		expC3    = 0x1.555e66p-3
		expC2    = 0x1.fffdb6p-2
		expC1    = 0x1.ffffecp-1
	)
	fma := quant.FMA32
	z := fma(x, expLog2e, expRound)
	n := z - expRound
	b := fma(-n, expLn2Lo, fma(-n, expLn2Hi, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fma(fma(fma(expC5, b, expC4), u, fma(expC3, b, expC2)), u, float32(expC1*b))
	an := float32(math.Abs(float64(n)))
	if !(an > 126) {
		return fma(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma(s2, j, s2) * s1
}

func refVSilu(x float32) float32 { return x / (1 + refVExpf(0-x)) }

// refSiluRow is ggml_vec_silu_f32: v_silu on runs of eight, silu after.
func refSiluRow(y, x []float32) {
	n8 := len(y) &^ 7
	for i := range y {
		if i < n8 {
			y[i] = refVSilu(x[i])
		} else {
			y[i] = refSilu(x[i])
		}
	}
}

// refSwigluRow is ggml_vec_swiglu_f32.
func refSwigluRow(y, g, u []float32) {
	n8 := len(y) &^ 7
	for i := range y {
		if i < n8 {
			y[i] = refVSilu(g[i]) * u[i]
		} else {
			y[i] = refSilu(g[i]) * u[i]
		}
	}
}

// refSwigluOAI is the engine's swigluOAI.
func refSwigluOAI(dst, gate, up []float32) {
	const alpha, limit = 1.702, 7.0
	for i := range dst {
		x := min(gate[i], limit)
		y := min(max(up[i], -limit), limit)
		glu := x / (1 + refExpf(alpha*(-x)))
		dst[i] = glu * (y + 1)
	}
}

// refSitu is the engine's situ.apply.
func refSitu(beta, linearBeta float32) func(dst, gate, up []float32) {
	return func(dst, gate, up []float32) {
		inv, invLin := 1/beta, 1/linearBeta
		for i, g := range gate {
			t := float32(math.Tanh(float64(g*inv))) * beta
			t *= refSigmoid(g)
			u := up[i]
			if linearBeta > 0 {
				u = float32(math.Tanh(float64(u*invLin))) * linearBeta
			}
			dst[i] = t * u
		}
	}
}

// refRMSNorm is the engine's rmsNorm.
func refRMSNorm(out, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(float32(v * v))
	}
	mean := float32(sum / float64(len(x)))
	scale := float32(1) / float32(math.Sqrt(float64(mean+eps)))
	if math.IsInf(float64(mean), 1) {
		scale = float32(math.NaN())
	}
	for i := range x {
		out[i] = float32(x[i]*scale) * w[i]
	}
}

// refL2Norm is the engine's l2Norm.
func refL2Norm(x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / max(float32(math.Sqrt(float64(float32(sum)))), eps)
	for i := range x {
		x[i] *= scale
	}
}

// refArgmax is the engine's Argmax.
func refArgmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// refFirstUnnormable is the engine's firstUnnormable.
func refFirstUnnormable(x []float32) int {
	for i, v := range x {
		if v-v != 0 || v >= 0x1p64 || v <= -0x1p64 {
			return i
		}
	}
	return -1
}

// Device helpers.

// onDevice uploads vals to a new buffer, freed with the test.
func onDevice(t *testing.T, d *Device, vals []float32) *Buffer {
	t.Helper()
	b, err := d.Alloc(int64(4*max(len(vals), 1)), "test values")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	if err := d.WriteFloats(b, 0, vals); err != nil {
		t.Fatal(err)
	}
	return b
}

// fromDevice reads n floats of b from off.
func fromDevice(t *testing.T, d *Device, b *Buffer, off, n int) []float32 {
	t.Helper()
	got := make([]float32, n)
	if err := d.ReadFloats(b, int64(off), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// record runs what f records in one batch.
func record(t *testing.T, d *Device, f func(b *Batch) error) {
	t.Helper()
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := f(b); err != nil {
		b.Submit()
		t.Fatal(err)
	}
	if err := b.Submit(); err != nil {
		t.Fatal(err)
	}
}

// guard is the floats kept around every operand: a sentinel value an
// operation must leave alone, and offsets that are not 0.
const guard = 5

const sentinel = 12345.5

// guarded lays vals out between guards: the operand is at Span{b, guard}.
func guarded(t *testing.T, d *Device, vals []float32) Span {
	t.Helper()
	all := make([]float32, guard+len(vals)+guard)
	for i := range all {
		all[i] = sentinel
	}
	copy(all[guard:], vals)
	return Span{onDevice(t, d, all), guard}
}

// poisoned is an operand of n NaNs between guards, for an output.
func poisoned(t *testing.T, d *Device, n int) Span {
	t.Helper()
	nan := make([]float32, n)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	return guarded(t, d, nan)
}

// readGuarded reads the n floats of s and fails if its guards changed.
func readGuarded(t *testing.T, d *Device, s Span, n int) []float32 {
	t.Helper()
	all := fromDevice(t, d, s.Buf, 0, guard+n+guard)
	for i, v := range all {
		if (i < guard || i >= guard+n) && v != sentinel {
			t.Fatalf("the guard at %d around %d values was overwritten with %v", i-guard, n, v)
		}
	}
	return all[guard : guard+n]
}

// within says whether got is want within rel·|want| + floor; a NaN must
// be a NaN, an infinity that infinity.
func within(got, want float32, rel, floor float64) bool {
	g, w := float64(got), float64(want)
	switch {
	case math.IsNaN(w):
		return math.IsNaN(g)
	case math.IsInf(w, 0):
		return g == w
	}
	return math.Abs(g-w) <= rel*math.Abs(w)+floor
}

// compareValues fails the test for every value out of tolerance (five at
// most are described) and returns the largest relative error seen.
func compareValues(t *testing.T, what string, got, want []float32, rel float64) float64 {
	t.Helper()
	bad, worst := 0, 0.0
	for i := range want {
		if !within(got[i], want[i], rel, opsFloor) {
			if bad < 5 {
				t.Errorf("%s: value %d is %v, the CPU's %v (relative error %.3g > %.3g)", what, i, got[i], want[i],
					math.Abs(float64(got[i])-float64(want[i]))/math.Abs(float64(want[i])), rel)
			}
			bad++
		}
		if w := math.Abs(float64(want[i])); w > 1e-30 && !math.IsInf(w, 0) && !math.IsNaN(w) {
			worst = max(worst, math.Abs(float64(got[i])-float64(want[i]))/w)
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d values of %d out of tolerance", what, bad, len(want))
	}
	return worst
}

// testValues is n activations: mostly normal ones of every scale, with
// every few the values that try a kernel's edges.
func testValues(rng *rand.Rand, n int, extremes bool) []float32 {
	edges := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 20, -20, 44, -44, 87.5, -87.5, 88.8, -88.8, 100, -100, 1e30, -1e30}
	if extremes {
		edges = append(edges, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	}
	x := make([]float32, n)
	for i := range x {
		if i%11 == 5 {
			x[i] = edges[rng.IntN(len(edges))]
			continue
		}
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-2)))
	}
	return x
}

func TestOpsExact(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, width = 7, 37
	n := rows * width
	a, c := testValues(rng, n, true), testValues(rng, n, true)
	t.Run("Add/Mul", func(t *testing.T) {
		for _, op := range []string{"add", "mul"} {
			dst, as, cs := poisoned(t, d, n), guarded(t, d, a), guarded(t, d, c)
			record(t, d, func(b *Batch) error {
				if op == "add" {
					return b.Add(dst, as, cs, n)
				}
				return b.Mul(dst, as, cs, n)
			})
			want := make([]float32, n)
			for i := range want {
				want[i] = a[i] + c[i]
				if op == "mul" {
					want[i] = a[i] * c[i]
				}
			}
			compareValues(t, op, readGuarded(t, d, dst, n), want, exactTolerance)
		}
	})
	t.Run("InPlace", func(t *testing.T) {
		x := guarded(t, d, a)
		cs := guarded(t, d, c)
		record(t, d, func(b *Batch) error { return b.Add(x, x, cs, n) })
		want := make([]float32, n)
		for i := range want {
			want[i] = a[i] + c[i]
		}
		compareValues(t, "x = x + y", readGuarded(t, d, x, n), want, exactTolerance)
	})
	t.Run("AddBias", func(t *testing.T) {
		y, bias := guarded(t, d, a), c[:width]
		bs := guarded(t, d, bias)
		record(t, d, func(b *Batch) error { return b.AddBias(y, bs, rows, width) })
		want := append([]float32(nil), a...)
		for i := range want {
			want[i] += bias[i%width]
		}
		compareValues(t, "AddBias", readGuarded(t, d, y, n), want, exactTolerance)
	})
	t.Run("Scale", func(t *testing.T) {
		x := guarded(t, d, a)
		record(t, d, func(b *Batch) error { return b.Scale(x, -0.37, n) })
		want := append([]float32(nil), a...)
		for i := range want {
			want[i] *= -0.37
		}
		compareValues(t, "Scale", readGuarded(t, d, x, n), want, exactTolerance)
	})
	t.Run("CopyRows", func(t *testing.T) {
		const dstOff, dstStride, srcOff, srcStride, cw, cr = 3, 50, 2, 41, 33, 6
		dstN, srcN := dstOff+(cr-1)*dstStride+cw+4, srcOff+(cr-1)*srcStride+cw+1
		src := testValues(rng, srcN, true)
		before := testValues(rng, dstN, false)
		dst, ss := guarded(t, d, before), guarded(t, d, src)
		record(t, d, func(b *Batch) error { return b.CopyRows(dst, dstOff, dstStride, ss, srcOff, srcStride, cw, cr) })
		want := append([]float32(nil), before...)
		for r := range cr {
			copy(want[dstOff+r*dstStride:][:cw], src[srcOff+r*srcStride:][:cw])
		}
		compareValues(t, "CopyRows", readGuarded(t, d, dst, dstN), want, exactTolerance)
	})
}

// TestOpsEmptyAndOutOfRange: no values is no work; a span past its
// buffer is an error before anything is recorded.
func TestOpsEmptyAndOutOfRange(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	x := guarded(t, d, []float32{1, 2, 3})
	record(t, d, func(b *Batch) error {
		for _, err := range []error{b.Add(x, x, x, 0), b.Sigmoid(x, 0), b.RMSNorm(x, x, x, 1e-6, 0, 3),
			b.Rope(x, RopeJob{Heads: 1, Dims: 2, Base: 1e4, FreqScale: 1, AttnFactor: 1}), b.CopyRows(x, 0, 3, x, 0, 3, 3, 0)} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if got := readGuarded(t, d, x, 3); got[0] != 1 || got[2] != 3 {
		t.Errorf("an empty operation changed its operand: %v", got)
	}
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Submit()
	if err := b.Add(x, x, x, 3+guard+1); err == nil {
		t.Error("an Add past its buffer gave no error")
	}
	if err := b.L2Norm(Span{}, 1e-6, 1, 1); err == nil {
		t.Error("an L2Norm of no buffer gave no error")
	}
	if err := b.Rope(x, RopeJob{Rows: 1, Heads: 1, Dims: 2, Base: 1e4}); err == nil {
		t.Error("a Rope with a frequency scale of 0 gave no error")
	}
}

// TestOpsGridStride bounds the elementwise dispatches to two
// workgroups, so that every invocation loops over several values.
func TestOpsGridStride(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	defer func(n uint32) { maxEltwiseGroups = n }(maxEltwiseGroups)
	maxEltwiseGroups = 2
	rng := rand.New(rand.NewPCG(9, 9))
	const rows, width = 13, 101 // 1313 values: 2 workgroups of 256, 3 rounds
	n := rows * width
	a, c := testValues(rng, n, false), testValues(rng, n, false)
	dst, as, cs := poisoned(t, d, n), guarded(t, d, a), guarded(t, d, c)
	record(t, d, func(b *Batch) error { return b.GLU(GLU{Kind: GLUSwiGLU}, dst, as, cs, rows, width) })
	want := make([]float32, n)
	for r := range rows {
		refSwigluRow(want[r*width:(r+1)*width], a[r*width:(r+1)*width], c[r*width:(r+1)*width])
	}
	compareValues(t, "GLU", readGuarded(t, d, dst, n), want, activationTolerance)
	copied := poisoned(t, d, n)
	record(t, d, func(b *Batch) error { return b.CopyRows(copied, 0, width, as, 0, width, width, rows) })
	compareValues(t, "CopyRows", readGuarded(t, d, copied, n), a, exactTolerance)
}

// TestNormManyRows and TestArgmaxManyRows take more rows than one
// dimension of workgroups holds (65535): the rows spread over two.
func TestNormManyRows(t *testing.T) {
	const rows, width = 70001, 3
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		rng := rand.New(rand.NewPCG(10, 10))
		x := testValues(rng, rows*width, false)
		w := []float32{0.5, 1, -2}
		rms, l2 := make([]float32, len(x)), append([]float32(nil), x...)
		for r := range rows {
			refRMSNorm(rms[r*width:(r+1)*width], x[r*width:(r+1)*width], w, 1e-5)
			refL2Norm(l2[r*width:(r+1)*width], 1e-5)
		}
		dst, xs, ws := poisoned(t, d, len(x)), guarded(t, d, x), guarded(t, d, w)
		record(t, d, func(b *Batch) error {
			if err := b.RMSNorm(dst, xs, ws, 1e-5, rows, width); err != nil {
				return err
			}
			return b.L2Norm(xs, 1e-5, rows, width)
		})
		compareValues(t, variantName(d)+" RMSNorm", readGuarded(t, d, dst, len(x)), rms, normTolerance)
		compareValues(t, variantName(d)+" L2Norm", readGuarded(t, d, xs, len(x)), l2, normTolerance)
	}
}

func TestArgmaxManyRows(t *testing.T) {
	const rows, width = 70001, 2
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		rng := rand.New(rand.NewPCG(11, 11))
		x := make([]float32, rows*width)
		for i := range x {
			x[i] = float32(rng.IntN(3))
		}
		dst, xs := poisoned(t, d, rows), guarded(t, d, x)
		record(t, d, func(b *Batch) error { return b.Argmax(dst, xs, rows, width) })
		got := readGuarded(t, d, dst, rows)
		for r := range rows {
			if g, want := int(math.Float32bits(got[r])), refArgmax(x[r*width:(r+1)*width]); g != want {
				t.Fatalf("%s: row %d: index %d, the CPU's %d", variantName(d), r, g, want)
			}
		}
	}
}

// TestOpsOneBuffer puts every operand in one buffer, as an arena does:
// the kernels bind it several times, at different offsets.
func TestOpsOneBuffer(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		rng := rand.New(rand.NewPCG(12, 12))
		const rows, width = 3, 50
		n := rows * width
		x, y, w := testValues(rng, n, false), testValues(rng, n, false), testValues(rng, width, false)
		x[n-1] = float32(math.Inf(-1)) // one at least
		// x, y, w, the sum, the norm and the check's two words, in order.
		all := append(append(append([]float32(nil), x...), y...), w...)
		all = append(all, make([]float32, 2*n+2)...)
		s := guarded(t, d, all)
		xs, ys, ws, sum, norm, check := s, s.At(n), s.At(2*n), s.At(2*n+width), s.At(3*n+width), s.At(4*n+width)
		record(t, d, func(b *Batch) error {
			if err := b.Add(sum, xs, ys, n); err != nil {
				return err
			}
			if err := b.RMSNorm(norm, ys, ws, 1e-6, rows, width); err != nil {
				return err
			}
			return b.CheckFinite(xs, n, check)
		})
		got := readGuarded(t, d, s, len(all))
		wantSum, wantNorm := make([]float32, n), make([]float32, n)
		for i := range wantSum {
			wantSum[i] = x[i] + y[i]
		}
		for r := range rows {
			refRMSNorm(wantNorm[r*width:(r+1)*width], y[r*width:(r+1)*width], w, 1e-6)
		}
		compareValues(t, variantName(d)+" Add", got[2*n+width:3*n+width], wantSum, exactTolerance)
		compareValues(t, variantName(d)+" RMSNorm", got[3*n+width:4*n+width], wantNorm, normTolerance)
		if i, v := CheckFiniteResult([2]float32(got[4*n+width:])); i != refFirstUnnormable(x) || v != x[i] {
			t.Errorf("%s: CheckFinite found (%d, %v), the CPU %d", variantName(d), i, v, refFirstUnnormable(x))
		}
	}
}

func TestOpsActivations(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(2, 2))
	const rows, width = 9, 45
	n := rows * width
	x, g := testValues(rng, n, true), testValues(rng, n, true)
	g[0], g[1] = float32(math.Inf(1)), float32(math.NaN())
	check := func(what string, got, want []float32) {
		worst := compareValues(t, what, got, want, activationTolerance)
		t.Logf("%s: largest relative error %.3g", what, worst)
	}
	t.Run("Sigmoid", func(t *testing.T) {
		s := guarded(t, d, x)
		record(t, d, func(b *Batch) error { return b.Sigmoid(s, n) })
		want := make([]float32, n)
		for i, v := range x {
			want[i] = refSigmoid(v)
		}
		check("Sigmoid", readGuarded(t, d, s, n), want)
	})
	t.Run("GateSigmoid", func(t *testing.T) {
		s := guarded(t, d, x)
		gs := guarded(t, d, g)
		record(t, d, func(b *Batch) error { return b.GateSigmoid(s, gs, n) })
		want := make([]float32, n)
		for i, v := range x {
			want[i] = v * refSigmoid(g[i])
		}
		check("GateSigmoid", readGuarded(t, d, s, n), want)
	})
	t.Run("ScaleRowsSigmoid", func(t *testing.T) {
		s := guarded(t, d, x)
		gs := guarded(t, d, g[:rows])
		record(t, d, func(b *Batch) error { return b.ScaleRowsSigmoid(s, gs, rows, width) })
		want := make([]float32, n)
		for i, v := range x {
			want[i] = v * refSigmoid(g[i/width])
		}
		check("ScaleRowsSigmoid", readGuarded(t, d, s, n), want)
	})
	t.Run("SiLU", func(t *testing.T) {
		dst, xs := poisoned(t, d, n), guarded(t, d, x)
		record(t, d, func(b *Batch) error { return b.SiLU(dst, xs, rows, width) })
		want := make([]float32, n)
		for r := range rows {
			refSiluRow(want[r*width:(r+1)*width], x[r*width:(r+1)*width])
		}
		check("SiLU", readGuarded(t, d, dst, n), want)
	})
}

func TestGLU(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(3, 3))
	const rows, width = 5, 43 // runs of eight and a tail of three in each row
	n := rows * width
	gate, up := testValues(rng, n, true), testValues(rng, n, true)
	for i := 0; i < n; i += 17 { // around gpt-oss's clamps
		gate[i], up[i] = float32(rng.NormFloat64()*3+7), float32(rng.NormFloat64()*3-7)
	}
	cases := []struct {
		act GLU
		ref func(dst, gate, up []float32)
		tol float64
	}{
		{GLU{Kind: GLUSwiGLU}, refSwigluRow, activationTolerance},
		{GLU{Kind: GLUSwiGLUOAI}, refSwigluOAI, activationTolerance},
		{GLU{Kind: GLUSiTU, Beta: 3, LinearBeta: 2.5}, refSitu(3, 2.5), situTolerance},
		{GLU{Kind: GLUSiTU, Beta: 0.7, LinearBeta: 0}, refSitu(0.7, 0), situTolerance},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c.act), func(t *testing.T) {
			dst, gs, us := poisoned(t, d, n), guarded(t, d, gate), guarded(t, d, up)
			record(t, d, func(b *Batch) error { return b.GLU(c.act, dst, gs, us, rows, width) })
			want := make([]float32, n)
			for r := range rows {
				c.ref(want[r*width:(r+1)*width], gate[r*width:(r+1)*width], up[r*width:(r+1)*width])
			}
			worst := compareValues(t, "GLU", readGuarded(t, d, dst, n), want, c.tol)
			t.Logf("largest relative error %.3g", worst)
		})
	}
}

// normRows is rows of width values for the norms: random rows of every
// scale, and the rows that try them: zeros, tiny values (ε decides),
// values whose squares overflow float32 (2⁶⁴: the CPU's RMSNorm gives
// NaN), values whose squares do not but whose sum in float32 would
// (2⁶³), and a NaN.
func normRows(rng *rand.Rand, width int) [][]float32 {
	var rows [][]float32
	fill := func(f func(i int) float32) {
		r := make([]float32, width)
		for i := range r {
			r[i] = f(i)
		}
		rows = append(rows, r)
	}
	fill(func(int) float32 { return float32(rng.NormFloat64()) })
	fill(func(int) float32 { return float32(rng.NormFloat64() * 1e4) })
	fill(func(int) float32 { return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-4))) })
	fill(func(int) float32 { return 0 })
	fill(func(int) float32 { return float32(rng.NormFloat64() * 1e-5) })
	fill(func(i int) float32 { return float32(math.Ldexp(1+rng.Float64(), 62)) * float32(1-2*(i%2)) })
	fill(func(i int) float32 {
		if i == width/2 {
			return 0x1p64
		}
		return float32(rng.NormFloat64())
	})
	fill(func(i int) float32 {
		if i == width-1 {
			return float32(math.NaN())
		}
		return float32(rng.NormFloat64())
	})
	return rows
}

func TestRMSNorm(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, width := range []int{1, 7, 300, 4096} {
			t.Run(fmt.Sprintf("%s/%d", variantName(d), width), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(4, uint64(width)))
				rows := normRows(rng, width)
				var x, want []float32
				w := make([]float32, width)
				for i := range w {
					w[i] = float32(1 + 0.5*rng.NormFloat64())
				}
				for _, r := range rows {
					x = append(x, r...)
					out := make([]float32, width)
					refRMSNorm(out, r, w, 1e-6)
					want = append(want, out...)
				}
				n := len(x)
				dst, xs, ws := poisoned(t, d, n), guarded(t, d, x), guarded(t, d, w)
				record(t, d, func(b *Batch) error { return b.RMSNorm(dst, xs, ws, 1e-6, len(rows), width) })
				worst := compareValues(t, "RMSNorm", readGuarded(t, d, dst, n), want, normTolerance)
				inPlace := guarded(t, d, x)
				record(t, d, func(b *Batch) error { return b.RMSNorm(inPlace, inPlace, ws, 1e-6, len(rows), width) })
				worst = max(worst, compareValues(t, "RMSNorm in place", readGuarded(t, d, inPlace, n), want, normTolerance))
				t.Logf("largest relative error %.3g", worst)
			})
		}
	}
}

func TestL2Norm(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, width := range []int{1, 7, 300, 4096} {
			t.Run(fmt.Sprintf("%s/%d", variantName(d), width), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, uint64(width)))
				rows := normRows(rng, width)
				var x, want []float32
				for _, r := range rows {
					x = append(x, r...)
					out := append([]float32(nil), r...)
					refL2Norm(out, 1e-6)
					want = append(want, out...)
				}
				n := len(x)
				s := guarded(t, d, x)
				record(t, d, func(b *Batch) error { return b.L2Norm(s, 1e-6, len(rows), width) })
				worst := compareValues(t, "L2Norm", readGuarded(t, d, s, n), want, normTolerance)
				t.Logf("largest relative error %.3g", worst)
			})
		}
	}
}

func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, width := range []int{1, 3, 257, 5003} {
			t.Run(fmt.Sprintf("%s/%d", variantName(d), width), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(6, uint64(width)))
				var rows [][]float32
				row := func(f func(i int) float32) {
					r := make([]float32, width)
					for i := range r {
						r[i] = f(i)
					}
					rows = append(rows, r)
				}
				row(func(int) float32 { return float32(rng.NormFloat64()) })
				row(func(int) float32 { return float32(rng.IntN(4)) })            // many ties at the top
				row(func(int) float32 { return -inf })                            // all −Inf: 0
				row(func(int) float32 { return nan })                             // all NaN: 0
				row(func(i int) float32 { return [...]float32{nan, 5}[i%2] })     // a NaN first: 0
				row(func(i int) float32 { return [...]float32{negZero, 0}[i%2] }) // −0 = +0: 0
				row(func(i int) float32 {                                         // NaNs among the values never win
					if i%3 == 1 {
						return nan
					}
					return float32(rng.NormFloat64())
				})
				row(func(i int) float32 { // the largest last, and +Inf
					if i == width-1 {
						return inf
					}
					return float32(rng.NormFloat64()) - 10
				})
				var x []float32
				for _, r := range rows {
					x = append(x, r...)
				}
				dst, xs := poisoned(t, d, len(rows)), guarded(t, d, x)
				record(t, d, func(b *Batch) error { return b.Argmax(dst, xs, len(rows), width) })
				got := readGuarded(t, d, dst, len(rows))
				for r, vals := range rows {
					if g, want := int(math.Float32bits(got[r])), refArgmax(vals); g != want {
						t.Errorf("row %d: index %d, the CPU's %d", r, g, want)
					}
				}
			})
		}
	}
}

func TestCheckFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, n := range []int{0, 1, 37, 4099, 1<<20 + 4099} { // past one value per invocation
			rng := rand.New(rand.NewPCG(7, uint64(n)))
			base := testValues(rng, n, false)
			for i := range base {
				base[i] = min(max(base[i], -1e19), 1e19) // all normable: 2⁶⁴ ≈ 1.8e19
			}
			cases := map[string]map[int]float32{"none": nil}
			if n > 0 {
				cases["NaN last"] = map[int]float32{n - 1: nan}
				cases["+Inf first"] = map[int]float32{0: inf, n / 2: nan}
				cases["2^64 and -Inf"] = map[int]float32{n / 3: -inf, n / 5: 0x1p64}
				cases["-2^64, and below 2^64"] = map[int]float32{n / 2: -0x1p64, n / 7: 0x1.fffffep63}
			}
			for name, bad := range cases {
				t.Run(fmt.Sprintf("%s/%d/%s", variantName(d), n, name), func(t *testing.T) {
					x := append([]float32(nil), base...)
					for i, v := range bad {
						x[i] = v
					}
					result, xs := poisoned(t, d, 2), guarded(t, d, x)
					record(t, d, func(b *Batch) error { return b.CheckFinite(xs, n, result) })
					words := readGuarded(t, d, result, 2)
					i, v := CheckFiniteResult([2]float32(words))
					want := refFirstUnnormable(x)
					var wantV float32
					if want >= 0 {
						wantV = x[want]
					}
					if i != want || math.Float32bits(v) != math.Float32bits(wantV) {
						t.Errorf("first unnormable (%d, %v), the CPU's (%d, %v)", i, v, want, wantV)
					}
				})
			}
		}
	}
}

// refRopeScaling is the engine's ropeScaling.
type refRopeScaling struct {
	freqScale, extFactor, attnFactor, betaFast, betaSlow float32
	ctxOrig                                              int
}

func (j RopeJob) refScaling() refRopeScaling {
	return refRopeScaling{j.FreqScale, j.ExtFactor, j.AttnFactor, j.BetaFast, j.BetaSlow, j.CtxOrig}
}

func refLogf(x float32) float32 { return float32(math.Log(float64(x))) }

// refRopeTable is the engine's ropeTable: cos and sin of each pair.
func refRopeTable(pos, nRot int, base float32, rs refRopeScaling, sections []int) []float32 {
	var dst []float32
	thetaScale := float32(math.Pow(float64(base), float64(-2/float32(nRot))))
	var corr [2]float32
	if rs.extFactor != 0 {
		corr = refYarnCorrDims(nRot, rs.ctxOrig, base, rs.betaFast, rs.betaSlow)
	}
	theta := float32(pos)
	for i := 0; i < nRot; i += 2 {
		th := theta
		if sections != nil && !refSectionTurns(sections, i/2) {
			th = 0
		}
		c, s := refRopeYarn(th, rs, corr, i)
		dst = append(dst, c, s)
		theta *= thetaScale
	}
	return dst
}

func refSectionTurns(sections []int, i int) bool {
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

func refRopeYarn(thetaExtrap float32, rs refRopeScaling, corr [2]float32, i0 int) (cos, sin float32) {
	thetaInterp := rs.freqScale * thetaExtrap
	theta := thetaInterp
	mscale := rs.attnFactor
	if rs.extFactor != 0 {
		y := (float32(i0/2) - corr[0]) / max(0.001, corr[1]-corr[0])
		rampMix := (1 - min(1, max(0, y))) * rs.extFactor
		theta = float32(thetaInterp*(1-rampMix)) + float32(thetaExtrap*rampMix)
		mscale *= 1 + float32(0.1*refLogf(1/rs.freqScale))
	}
	return float32(math.Cos(float64(theta))) * mscale, float32(math.Sin(float64(theta))) * mscale
}

func refYarnCorrDims(nDims, ctxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	corrDim := func(nRot float32) float32 {
		return float32(float32(nDims)*refLogf(float32(ctxOrig)/(nRot*2*math.Pi))) / (2 * refLogf(base))
	}
	start := float32(math.Floor(float64(corrDim(betaFast))))
	end := float32(math.Ceil(float64(corrDim(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// refRope is the engine's Rope over x, with each value's bound on its
// error: (|x0| + |x1|)·|mscale| for a rotated one, 0 for the others.
func refRope(x []float32, j RopeJob) (want, bound []float32) {
	want, bound = append([]float32(nil), x...), make([]float32, len(x))
	mscale := float32(math.Abs(float64(refRopeTable(0, j.Dims, j.Base, j.refScaling(), nil)[0]))) // cos 0 · mscale
	half := j.Dims / 2
	for t := range j.Rows {
		cs := refRopeTable(j.Pos0+t, j.Dims, j.Base, j.refScaling(), j.Sections)
		for hd := range j.Heads {
			v := want[t*j.RowStride+hd*j.HeadStride+j.Offset:]
			for i := 0; i < half; i++ {
				c, s := cs[2*i], cs[2*i+1]
				a, b := 2*i, 2*i+1
				if j.Neox {
					a, b = i, i+half
				}
				x0, x1 := v[a], v[b]
				v[a] = float32(x0*c) - float32(x1*s)
				v[b] = float32(x0*s) + float32(x1*c)
				at := t*j.RowStride + hd*j.HeadStride + j.Offset
				bound[at+a] = (float32(math.Abs(float64(x0))) + float32(math.Abs(float64(x1)))) * mscale
				bound[at+b] = bound[at+a]
			}
		}
	}
	return want, bound
}

// runRope rotates x on the device and checks it against refRope,
// returning the largest error per unit of bound.
func runRope(t *testing.T, d *Device, x []float32, j RopeJob) float64 {
	t.Helper()
	s := guarded(t, d, x)
	record(t, d, func(b *Batch) error { return b.Rope(s, j) })
	got := readGuarded(t, d, s, len(x))
	want, bound := refRope(x, j)
	bad, worst := 0, 0.0
	for i := range want {
		diff := math.Abs(float64(got[i]) - float64(want[i]))
		if bound[i] > 0 {
			worst = max(worst, diff/float64(bound[i]))
		}
		if !(diff <= ropeTolerance*float64(bound[i])+opsFloor) {
			if bad < 5 {
				t.Errorf("value %d (row %d) is %v, the CPU's %v (|Δ| %.3g, bound %.3g)", i, i/max(j.RowStride, 1), got[i], want[i], diff, ropeTolerance*float64(bound[i]))
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%d values of %d out of tolerance", bad, len(want))
	}
	return worst
}

// yarn is the scaling of a YaRN model (a factor of 40 over 4096
// positions, as DeepSeek's), in the job's plain fields.
func yarn(j RopeJob) RopeJob {
	j.FreqScale, j.ExtFactor, j.AttnFactor, j.BetaFast, j.BetaSlow, j.CtxOrig = 1.0/40, 1, 0.7, 32, 1, 4096
	return j
}

// TestRopeTable rotates (1, 0) in every pair, so the output is the
// table of cos and sin itself, at positions to 2³¹: every pair's angle,
// with and without YaRN and sections.
func TestRopeTable(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	const dims, rows = 128, 24
	for _, pos0 := range []int{0, 32768 - rows/2, 200000, math.MaxInt32 - rows} {
		base := RopeJob{Rows: rows, RowStride: dims, Heads: 1, Dims: dims, Pos0: pos0, Base: 10000, FreqScale: 1, AttnFactor: 1}
		sections := base
		sections.Sections, sections.Neox = []int{24, 20, 20, 0}, true
		for name, j := range map[string]RopeJob{"plain": base, "yarn": yarn(base), "sections": sections} {
			t.Run(fmt.Sprintf("%s/%d", name, pos0), func(t *testing.T) {
				x := make([]float32, rows*dims)
				for i := range x {
					x[i] = float32(1 - i%2)
					if j.Neox {
						x[i] = float32(1 - i%dims/(dims/2))
					}
				}
				t.Logf("largest error %.3g of (|x0|+|x1|)·mscale", runRope(t, d, x, j))
			})
		}
	}
}

// TestRopeManyRows turns one pair at 70000 positions up to 2³¹ − 1: the
// rows spread over two dimensions of workgroups, and every angle's
// reduction by π/2 is tried at a different place.
func TestRopeManyRows(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	const rows = 70000
	x := make([]float32, 2*rows)
	for i := 0; i < len(x); i += 2 {
		x[i] = 1
	}
	for _, pos0 := range []int{0, math.MaxInt32 - rows} {
		j := RopeJob{Rows: rows, RowStride: 2, Heads: 1, Dims: 2, Pos0: pos0, Base: 10000, FreqScale: 1, AttnFactor: 1}
		t.Logf("from %d: largest error %.3g", pos0, runRope(t, d, x, j))
	}
}

// TestRopeJobs tries every field of RopeJob on random heads.
func TestRopeJobs(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	plain := func(j RopeJob) RopeJob { j.FreqScale, j.AttnFactor = 1, 1; return j }
	jobs := map[string]RopeJob{
		// llama: normal pairs over whole heads, near 32768.
		"normal": plain(RopeJob{Rows: 5, RowStride: 4 * 64, Heads: 4, HeadStride: 64, Dims: 64, Pos0: 32765, Base: 10000}),
		// NEOX on the last 32 of heads of 80 (a partial rotary), rows padded.
		"neox partial": plain(RopeJob{Rows: 3, RowStride: 4*80 + 3, Heads: 4, HeadStride: 80, Offset: 48, Dims: 32, Pos0: 100, Base: 1e6, Neox: true}),
		// the first 64 of heads of 256 (Qwen3-Next), at a long position.
		"neox first quarter": plain(RopeJob{Rows: 2, RowStride: 2 * 256, Heads: 2, HeadStride: 256, Dims: 64, Pos0: 150000, Base: 1e7, Neox: true}),
		"yarn normal":        yarn(RopeJob{Rows: 4, RowStride: 3 * 64, Heads: 3, HeadStride: 64, Dims: 64, Pos0: 32760, Base: 10000}),
		"yarn neox":          yarn(RopeJob{Rows: 4, RowStride: 2 * 192, Heads: 2, HeadStride: 192, Offset: 128, Dims: 64, Pos0: 4090, Base: 10000, Neox: true}),
		"sections":           plain(RopeJob{Rows: 3, RowStride: 2 * 128, Heads: 2, HeadStride: 128, Dims: 128, Pos0: 9, Base: 5e6, Neox: true, Sections: []int{24, 20, 20, 0}}),
		"sections uneven":    plain(RopeJob{Rows: 2, RowStride: 64, Heads: 1, HeadStride: 64, Dims: 64, Pos0: 33000, Base: 1e4, Sections: []int{3, 5, 2, 6}}),
		// more pairs than a workgroup's invocations, odd dims (the last value stays).
		"wide":     plain(RopeJob{Rows: 2, RowStride: 300, Heads: 1, HeadStride: 300, Dims: 290, Pos0: 31, Base: 10000, Neox: true}),
		"odd dims": plain(RopeJob{Rows: 3, RowStride: 2 * 8, Heads: 2, HeadStride: 8, Dims: 7, Pos0: 1, Base: 10000}),
		// heads that overlap no one else's, in the middle of a row.
		"many rows": plain(RopeJob{Rows: 300, RowStride: 2 * 16, Heads: 2, HeadStride: 16, Dims: 16, Base: 500000}),
	}
	for name, j := range jobs {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(8, uint64(j.Dims*j.Rows)))
			x := make([]float32, j.Rows*j.RowStride)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(5)-2)))
			}
			t.Logf("largest error %.3g of (|x0|+|x1|)·mscale", runRope(t, d, x, j))
		})
	}
}
