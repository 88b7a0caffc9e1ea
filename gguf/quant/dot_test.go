package quant_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/llamacpp"
)

// dotRef returns the haswell backend's kernels; without them the test is
// skipped, unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI), which makes that a
// failure.
func dotRef(t testing.TB) *llamacpp.DotRef {
	t.Helper()
	d, err := findDotRef(t)
	if d == nil {
		t.Skip(err)
	}
	return d
}

// findDotRef is dotRef for benchmarks, which run without llama.cpp: nil
// and the reason when it is missing and not required.
func findDotRef(t testing.TB) (*llamacpp.DotRef, error) {
	t.Helper()
	d, err := llamacpp.FindDotRef(t.TempDir())
	if err != nil && os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
		t.Fatal(err)
	}
	return d, err
}

const dotN = 4096 // values per row: whole blocks of every type

// dotTypes are the weight types VecDot supports.
func dotTypes() []gguf.Type {
	return types(func(t gguf.Type) bool { return quant.VecDotType(t) != gguf.TypeCount })
}

// floatRows returns rows of n values, each row with its own scale and
// distribution.
func floatRows(r *rand.Rand, rows, n int) []float32 {
	x := make([]float32, 0, rows*n)
	for i := range rows {
		scale := float32(math.Pow(10, r.Float64()*6-3))
		for range n {
			var v float64
			switch i % 4 {
			case 0:
				v = r.NormFloat64()
			case 1:
				v = r.Float64()*2 - 1
			case 2:
				v = r.ExpFloat64()
			case 3:
				v = r.NormFloat64() * r.NormFloat64()
			}
			x = append(x, float32(v)*scale)
		}
	}
	return x
}

// activationRows returns random rows of n activations followed by
// adversarial ones: zeros, huge, tiny and subnormal values, blocks whose
// scaled values fall exactly halfway between integers, ±Inf and NaNs with
// random payloads (quiet and signalling, either sign) among ordinary
// values and at every position of a block, and a row of NaNs.
func activationRows(r *rand.Rand, rows, n int) []float32 {
	x := floatRows(r, rows, n)
	row := make([]float32, n)
	add := func(f func(j int) float32) {
		for j := range row {
			row[j] = f(j)
		}
		x = append(x, row...)
	}
	nan := func() float32 {
		return math.Float32frombits(r.Uint32()&0x807FFFFF | 0x7F800000 | 1<<r.IntN(23))
	}
	add(func(int) float32 { return 0 })
	add(func(int) float32 { return float32(r.NormFloat64()) * 1e30 })
	add(func(int) float32 { return float32(r.NormFloat64()) * 1e-30 })
	add(func(int) float32 { return float32(r.NormFloat64()) * 1e-40 })
	add(func(j int) float32 {
		if j%32 == 0 {
			return 127 // a scale of exactly 1: the others are ties
		}
		return float32(r.IntN(253)-126) + 0.5
	})
	add(func(j int) float32 {
		switch j % 37 {
		case 3:
			return float32(math.Inf(1 - 2*(j%2)))
		case 5:
			return nan()
		}
		return float32(r.NormFloat64())
	})
	add(func(j int) float32 { // block b's NaN at position b mod 32: AVX2's max keeps it at only one
		if j%32 == j/32%32 {
			return nan()
		}
		return float32(r.NormFloat64()) * 3
	})
	add(func(j int) float32 {
		if j%32 == (j/32+5)%32 {
			return float32(math.Inf(1 - 2*(j/32%2)))
		}
		return float32(r.NormFloat64()) * 3
	})
	add(func(int) float32 { return nan() })
	return x
}

// validBlocks returns nb blocks of random bytes whose scales are finite:
// each block is redrawn until Validate accepts it.
func validBlocks(r *rand.Rand, t gguf.Type, nb int) []byte {
	bb := int(t.BlockBytes())
	out := make([]byte, nb*bb)
	for b := range nb {
		blk := out[b*bb : (b+1)*bb]
		for {
			for i := range blk {
				blk[i] = byte(r.Uint32())
			}
			if quant.Validate(t, blk) == nil {
				break
			}
		}
	}
	return out
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// weightRows returns rows of n values of type typ: quantized from random
// floats (by quant.Quantize, or by llama.cpp where gguftool has no
// quantizer, with an importance matrix), random blocks with finite scales,
// and two rows of random bytes.
func weightRows(t *testing.T, r *rand.Rand, typ gguf.Type, rows, n int) []byte {
	t.Helper()
	x := floatRows(r, rows, n)
	var w []byte
	var err error
	if quant.CanQuantize(typ) && !quant.RequiresImatrix(typ) {
		w, err = quant.Quantize(nil, typ, x)
	} else {
		imatrix := make([]float32, n)
		for i := range imatrix {
			imatrix[i] = float32(math.Exp(r.NormFloat64()))
		}
		w, err = quantRef(t).Quantize(context.Background(), uint32(typ), x, n, imatrix)
	}
	if err != nil {
		t.Fatal(err)
	}
	nb := n / int(typ.BlockSize())
	w = append(w, validBlocks(r, typ, rows*nb)...)
	return append(w, randomBytes(r, 2*nb*int(typ.BlockBytes()))...)
}

// sameFloat is bit equality, with any two NaNs equal.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// goVecDots dots each row of w with the matching row of a.
func goVecDots(t testing.TB, typ gguf.Type, w, a []byte, n int) []float32 {
	t.Helper()
	wr, ar := int(typ.RowBytes(int64(n))), int(quant.VecDotType(typ).RowBytes(int64(n)))
	out := make([]float32, len(w)/wr)
	for i := range out {
		s, err := quant.VecDot(typ, w[i*wr:(i+1)*wr], a[i*ar:(i+1)*ar], n)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

// activationsFor quantizes one row of activations for each row of w,
// cycling through x's rows.
func activationsFor(t testing.TB, vt gguf.Type, x []float32, rows, n int, generic bool) []byte {
	t.Helper()
	quantize := quant.QuantizeActivations
	if generic {
		quantize = quant.QuantizeActivationsGeneric
	}
	var a []byte
	for i := range rows {
		k := i % (len(x) / n)
		var err error
		if a, err = quantize(a, vt, x[k*n:(k+1)*n]); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestQuantizeActivationsMatchesLlamaCpp: the activation quantizers match
// the haswell backend's (quantize_row_q8_0 … ggml_cpu_fp32_to_fp16) and
// the generic C beside them byte for byte, row by row, on random and
// adversarial rows. The float types also run rows whose length leaves a
// tail after the SIMD blocks.
func TestQuantizeActivationsMatchesLlamaCpp(t *testing.T) {
	ref := dotRef(t)
	for _, vt := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ8_1, gguf.TypeQ8_K} {
		lengths := []int{dotN}
		if vt.BlockSize() == 1 {
			lengths = append(lengths, 1, 3, 7, 13, 1027)
		}
		for _, generic := range []bool{false, true} {
			name := vt.String() + "/simd"
			quantize := quant.QuantizeActivations
			if generic {
				name, quantize = vt.String()+"/generic", quant.QuantizeActivationsGeneric
			}
			t.Run(name, func(t *testing.T) {
				for _, n := range lengths {
					x := activationRows(rand.New(rand.NewPCG(uint64(n), uint64(vt))), 64, n)
					want, err := ref.QuantizeActivations(context.Background(), uint32(vt), generic, x, n)
					if err != nil {
						t.Fatal(err)
					}
					var got []byte
					for r := 0; r < len(x); r += n {
						if got, err = quantize(got, vt, x[r:r+n]); err != nil {
							t.Fatal(err)
						}
					}
					compareBlocks(t, vt, got, want, x)
				}
			})
		}
	}
}

// followsSIMD lists the quantized types whose reference sums in the order
// of llama.cpp's haswell AVX2 kernel instead of the generic C's: the
// generic order keeps eight float accumulators by value index mod 8, which
// vector code cannot reach at speed.
var followsSIMD = map[gguf.Type]bool{gguf.TypeQ3_K: true, gguf.TypeQ4_K: true, gguf.TypeQ5_K: true, gguf.TypeQ6_K: true}

// TestVecDotMatchesLlamaCpp: for every weight type, VecDot equals
// ggml_vec_dot_*_generic of the haswell backend bit for bit, on quantized,
// random and garbage weight rows against random and adversarial
// activations (quantized by the backend's own SIMD quantizer and by the
// generic one). F32, F16 and BF16 have no generic kernel, and the types in
// followsSIMD are defined by the SIMD one: they must equal that. For the
// others the test logs how far llama.cpp's SIMD kernels, which sum in
// another order, are from the generic result.
func TestVecDotMatchesLlamaCpp(t *testing.T) {
	ref := dotRef(t)
	ctx := context.Background()
	for _, typ := range dotTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(typ), 17))
			vt := quant.VecDotType(typ)
			w := weightRows(t, r, typ, 24, dotN)
			rows := len(w) / int(typ.RowBytes(dotN))
			const randomActs = 24 // then the adversarial rows
			x := activationRows(r, randomActs, dotN)
			float := typ.BlockSize() == 1
			for _, generic := range []bool{false, true} {
				a := activationsFor(t, vt, x, rows, dotN, generic)
				got := goVecDots(t, typ, w, a, dotN)
				simd, err := ref.VecDot(ctx, uint32(typ), false, dotN, w, a)
				if err != nil {
					t.Fatal(err)
				}
				want := simd
				if !float && !followsSIMD[typ] {
					if want, err = ref.VecDot(ctx, uint32(typ), true, dotN, w, a); err != nil {
						t.Fatal(err)
					}
				}
				compareDots(t, got, want)
				if !float && !followsSIMD[typ] && !generic {
					// Only rows with random activations: an adversarial
					// row's NaN can become a −128 level, which the SIMD
					// kernels' _mm256_sign_epi8 cannot negate, so their
					// results for those rows are wholly different.
					mags := magnitudes(t, typ, w, a, dotN)
					var g, s []float32
					var m []float64
					for i := range got {
						if i%(len(x)/dotN) < randomActs {
							g, s, m = append(g, got[i]), append(s, simd[i]), append(m, mags[i])
						}
					}
					maxRel, maxScaled, same := deviation(g, s, m)
					t.Logf("SIMD ggml_vec_dot_%s: %d of %d rows identical; max |Δ|/|simd| %.3g, max |Δ|/Σ|w·a| %.3g", typ, same, len(g), maxRel, maxScaled)
				}
			}
		})
	}
}

// TestVecDotFloatTails: the float kernels' tails past the last block of
// 32 (runs of eight and four, then one to three fused) match the SIMD C
// for every remainder.
func TestVecDotFloatTails(t *testing.T) {
	ref := dotRef(t)
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16} {
		t.Run(typ.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(typ), 23))
			lengths := []int{95, 100, 1027}
			for n := range 64 {
				lengths = append(lengths, n+1)
			}
			for _, n := range lengths {
				x := floatRows(r, 16, n)
				w, err := quant.Quantize(nil, typ, x)
				if err != nil {
					t.Fatal(err)
				}
				w = append(w, validBlocks(r, typ, 16*n)...)
				a := activationsFor(t, typ, activationRows(r, 8, n), 32, n, false)
				want, err := ref.VecDot(context.Background(), uint32(typ), false, n, w, a)
				if err != nil {
					t.Fatal(err)
				}
				compareDots(t, goVecDots(t, typ, w, a, n), want)
			}
		})
	}
}

func compareDots(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d dot products, llama.cpp gave %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		if !sameFloat(got[i], want[i]) {
			if bad < 3 {
				t.Errorf("row %d: got %g (%#08x), want %g (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rows differ", bad, len(got))
	}
}

// deviation compares got with the SIMD results over the rows where both,
// and the magnitudes, are finite: the largest |got−simd|/|simd|, which rows that cancel to
// near zero dominate, the largest |got−simd|/Σ|w·a|, the error against
// the size of the terms summed, and how many rows are identical.
func deviation(got, simd []float32, mags []float64) (maxRel, maxScaled float64, same int) {
	for i := range got {
		if sameFloat(got[i], simd[i]) {
			same++
			continue
		}
		g, s := float64(got[i]), float64(simd[i])
		if math.IsInf(g, 0) || math.IsInf(s, 0) || math.IsInf(mags[i], 0) || g != g || s != s || mags[i] != mags[i] {
			continue
		}
		maxRel = max(maxRel, math.Abs(g-s)/max(math.Abs(s), math.SmallestNonzeroFloat32))
		maxScaled = max(maxScaled, math.Abs(g-s)/max(mags[i], math.SmallestNonzeroFloat32))
	}
	return maxRel, maxScaled, same
}

// magnitudes returns Σ|w_i·a_i| for each row, from the decoded weights
// and activations.
func magnitudes(t *testing.T, typ gguf.Type, w, a []byte, n int) []float64 {
	t.Helper()
	wv, err := quant.Dequantize(nil, typ, w)
	if err != nil {
		t.Fatal(err)
	}
	vt := quant.VecDotType(typ)
	if vt == gguf.TypeQ8_1 { // Q8_0 blocks with s inserted after d
		var q8 []byte
		for b := 0; b < len(a); b += 36 {
			q8 = append(append(q8, a[b:b+2]...), a[b+4:b+36]...)
		}
		a, vt = q8, gguf.TypeQ8_0
	}
	av, err := quant.Dequantize(nil, vt, a)
	if err != nil {
		t.Fatal(err)
	}
	mags := make([]float64, len(wv)/n)
	for i, v := range wv {
		mags[i/n] += math.Abs(float64(v) * float64(av[i]))
	}
	return mags
}

// TestVecDotRejects: inconsistent lengths and types without a dot product
// are errors, not panics.
func TestVecDotRejects(t *testing.T) {
	w := make([]byte, 2*18)
	a := make([]byte, 2*34)
	if _, err := quant.VecDot(gguf.TypeQ4_0, w, a, 64); err != nil {
		t.Fatalf("valid call: %v", err)
	}
	for _, c := range []struct {
		name string
		typ  gguf.Type
		w, a []byte
		n    int
	}{
		{"n not whole blocks", gguf.TypeQ4_0, w, a, 63},
		{"negative n", gguf.TypeQ4_0, w, a, -32},
		{"short weights", gguf.TypeQ4_0, w[:35], a, 64},
		{"long activations", gguf.TypeQ4_0, w, append(a, 0), 64},
		{"activation blocks", gguf.TypeQ1_0, make([]byte, 18), make([]byte, 34), 128}, // Q1_0's 128 values need four Q8_0 blocks
		{"Q8_K has no dot product", gguf.TypeQ8_K, make([]byte, 292), make([]byte, 292), 256},
		{"Q8_1 has no dot product", gguf.TypeQ8_1, make([]byte, 36), make([]byte, 36), 32},
		{"I8", gguf.TypeI8, make([]byte, 4), make([]byte, 4), 4},
		{"unknown type", gguf.TypeCount + 5, w, a, 64},
	} {
		if _, err := quant.VecDot(c.typ, c.w, c.a, c.n); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if vt := quant.VecDotType(gguf.TypeQ8_K); vt != gguf.TypeCount {
		t.Errorf("VecDotType(Q8_K) = %v", vt)
	}
	for _, c := range []struct {
		vt gguf.Type
		n  int
	}{{gguf.TypeQ8_0, 31}, {gguf.TypeQ8_K, 32}, {gguf.TypeQ4_0, 32}, {gguf.TypeI32, 1}} {
		if _, err := quant.QuantizeActivations(nil, c.vt, make([]float32, c.n)); err == nil {
			t.Errorf("QuantizeActivations(%s, %d values): no error", c.vt, c.n)
		}
	}
}

// TestVecDotTypeMatchesLlamaCpp pins the pairing of
// type_traits_cpu[].vec_dot_type in ggml-cpu.c.
func TestVecDotTypeMatchesLlamaCpp(t *testing.T) {
	want := map[gguf.Type]gguf.Type{
		gguf.TypeF32: gguf.TypeF32, gguf.TypeF16: gguf.TypeF16, gguf.TypeBF16: gguf.TypeBF16,
		gguf.TypeQ1_0: gguf.TypeQ8_0, gguf.TypeQ2_0: gguf.TypeQ8_0, gguf.TypeQ4_0: gguf.TypeQ8_0,
		gguf.TypeQ4_1: gguf.TypeQ8_1, gguf.TypeQ5_0: gguf.TypeQ8_0, gguf.TypeQ5_1: gguf.TypeQ8_1,
		gguf.TypeQ8_0: gguf.TypeQ8_0, gguf.TypeMXFP4: gguf.TypeQ8_0, gguf.TypeNVFP4: gguf.TypeQ8_0,
		gguf.TypeIQ4_NL: gguf.TypeQ8_0,
	}
	for _, typ := range []gguf.Type{gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
		gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeIQ2_S, gguf.TypeIQ1_S,
		gguf.TypeIQ1_M, gguf.TypeIQ4_XS, gguf.TypeTQ1_0, gguf.TypeTQ2_0} {
		want[typ] = gguf.TypeQ8_K
	}
	for typ := range gguf.TypeCount + 1 {
		w, ok := want[typ]
		if !ok {
			w = gguf.TypeCount
		}
		if got := quant.VecDotType(typ); got != w {
			t.Errorf("VecDotType(%s) = %s, want %s", typ, got, w)
		}
	}
}

// TestDotF32MatchesDequantize: DotF32 is Dequantize followed by a float32
// sum of the products in element order, for every type, on quantized and
// random blocks.
func TestDotF32MatchesDequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 29))
	for _, typ := range types(quant.CanDequantize) {
		t.Run(typ.String(), func(t *testing.T) {
			nb := dotN / int(typ.BlockSize())
			for _, w := range [][]byte{validBlocks(r, typ, nb), randomBytes(r, nb*int(typ.BlockBytes())), validBlocks(r, typ, 1)} {
				vals, err := quant.Dequantize(nil, typ, w)
				if err != nil {
					t.Fatal(err)
				}
				x := floatRows(r, 1, len(vals))
				var want float32
				for i, v := range vals {
					want = float32(want + float32(v*x[i]))
				}
				got, err := quant.DotF32(typ, w, x)
				if err != nil {
					t.Fatal(err)
				}
				if !sameFloat(got, want) {
					t.Errorf("%d bytes: DotF32 = %g, Dequantize and sum = %g", len(w), got, want)
				}
			}
			w := validBlocks(r, typ, 2)
			x := make([]float32, 2*typ.BlockSize())
			if allocs := testing.AllocsPerRun(10, func() { _, _ = quant.DotF32(typ, w, x) }); allocs != 0 {
				t.Errorf("DotF32 allocates %v times", allocs)
			}
			if _, err := quant.DotF32(typ, w, x[1:]); err == nil {
				t.Error("x one value short: no error")
			}
			if _, err := quant.DotF32(typ, w[1:], x); err == nil {
				t.Error("w not whole blocks: no error")
			}
		})
	}
	if _, err := quant.DotF32(gguf.TypeI8, make([]byte, 4), make([]float32, 4)); err == nil {
		t.Error("I8: no error")
	}
}
