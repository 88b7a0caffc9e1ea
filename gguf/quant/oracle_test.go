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

// quantRef returns llama.cpp's codecs; without them the test is skipped,
// unless GGUFTOOL_REQUIRE_LLAMACPP=1 (CI), which makes that a failure.
func quantRef(t *testing.T) *llamacpp.QuantRef {
	t.Helper()
	q, err := llamacpp.FindQuantRef(t.TempDir())
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return q
}

const nPerRow = 4096

// testInputs returns ≥ 1M random values in rows of nPerRow, each row with
// its own scale and distribution, followed by adversarial rows: zeros,
// constant blocks, huge and tiny magnitudes, subnormals, single outliers,
// all-positive and all-negative rows, ±Inf and NaN.
func testInputs(seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var x []float32
	row := make([]float32, nPerRow)
	for i := 0; len(x) < 1<<20; i++ {
		scale := float32(math.Pow(10, r.Float64()*10-6)) // 1e-6 … 1e4
		for j := range row {
			switch i % 4 {
			case 0:
				row[j] = float32(r.NormFloat64()) * scale
			case 1:
				row[j] = (r.Float32()*2 - 1) * scale
			case 2:
				row[j] = float32(r.ExpFloat64()) * scale // all positive
			case 3:
				row[j] = float32(r.NormFloat64()*r.NormFloat64()) * scale // heavy tails
			}
		}
		x = append(x, row...)
	}
	adversarial := func(f func(j int) float32) {
		for j := range row {
			row[j] = f(j)
		}
		x = append(x, row...)
	}
	adversarial(func(j int) float32 { return 0 })
	adversarial(func(j int) float32 { return float32(j/32%5) - 2 })    // constant blocks of 32
	adversarial(func(j int) float32 { return float32(j/256%3) * 0.5 }) // constant super-blocks
	adversarial(func(j int) float32 { return float32(r.NormFloat64()) * 1e30 })
	adversarial(func(j int) float32 { return float32(r.NormFloat64()) * 1e-30 })
	adversarial(func(j int) float32 { return float32(r.NormFloat64()) * 1e-40 }) // subnormals
	adversarial(func(j int) float32 { return float32(r.NormFloat64()) * 65504 })
	adversarial(func(j int) float32 {
		if j%97 == 0 {
			return 1000
		}
		return float32(r.NormFloat64()) * 0.01
	})
	adversarial(func(j int) float32 { return -float32(r.ExpFloat64()) })
	adversarial(func(j int) float32 { return float32(j%7) * 0.25 }) // exactly representable levels
	adversarial(func(j int) float32 {
		switch j % 64 {
		case 5:
			return float32(math.Inf(1))
		case 9:
			return float32(math.Inf(-1))
		}
		return float32(r.NormFloat64())
	})
	adversarial(func(j int) float32 {
		if j%50 == 3 {
			return float32(math.NaN())
		}
		return float32(r.NormFloat64())
	})
	return x
}

// types lists the types for which has reports true.
func types(has func(gguf.Type) bool) []gguf.Type {
	var out []gguf.Type
	for t := range gguf.TypeCount {
		if t.Valid() && has(t) {
			out = append(out, t)
		}
	}
	return out
}

// TestQuantizeMatchesLlamaCpp: every type gguftool quantizes matches
// ggml_quantize_chunk byte for byte, without an importance matrix (the
// reference path) and with one.
func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	ref := quantRef(t)
	x := testInputs(1)
	r := rand.New(rand.NewPCG(3, 3))
	imatrix := make([]float32, nPerRow)
	for i := range imatrix {
		imatrix[i] = float32(math.Exp(r.NormFloat64() * 2)) // positive, spread over orders of magnitude
	}
	for _, typ := range types(quant.CanQuantize) {
		for _, im := range [][]float32{nil, imatrix} {
			name := typ.String()
			if im != nil {
				name += "/imatrix"
			}
			t.Run(name, func(t *testing.T) {
				if im == nil && quant.RequiresImatrix(typ) {
					t.Skip("needs an importance matrix")
				}
				want, err := ref.Quantize(context.Background(), uint32(typ), x, nPerRow, im)
				if err != nil {
					t.Fatal(err)
				}
				got, err := quant.QuantizeRows(nil, typ, x, nPerRow, im)
				if err != nil {
					t.Fatal(err)
				}
				compareBlocks(t, typ, got, want, x)
			})
		}
	}
}

func compareBlocks(t *testing.T, typ gguf.Type, got, want []byte, x []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d bytes, llama.cpp wrote %d", len(got), len(want))
	}
	bb, bs := int(typ.BlockBytes()), int(typ.BlockSize())
	bad := 0
	for b := 0; b < len(got)/bb; b++ {
		g, w := got[b*bb:(b+1)*bb], want[b*bb:(b+1)*bb]
		if string(g) != string(w) {
			if bad < 3 {
				t.Errorf("block %d (values %d…): got % x\nwant % x\ninput %v", b, b*bs, g, w, x[b*bs:min((b+1)*bs, b*bs+8)])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d blocks differ", bad, len(got)/bb)
	}
}

// TestDequantizeMatchesLlamaCpp decodes random block bytes (every bit
// pattern, scales included) and llama.cpp's own quantizations; the floats
// must be bit-identical.
func TestDequantizeMatchesLlamaCpp(t *testing.T) {
	ref := quantRef(t)
	r := rand.New(rand.NewPCG(7, 7))
	for _, typ := range types(quant.CanDequantize) {
		t.Run(typ.String(), func(t *testing.T) {
			data := make([]byte, int(typ.BlockBytes())*(1<<20/int(typ.BlockSize())))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			want, err := ref.Dequantize(context.Background(), uint32(typ), data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := quant.Dequantize(nil, typ, data)
			if err != nil {
				t.Fatal(err)
			}
			compareFloats(t, got, want)
		})
	}
}

func compareFloats(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, llama.cpp gave %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if g != w && !(got[i] != got[i] && want[i] != want[i]) {
			if bad < 3 {
				t.Errorf("value %d: got %g (%#08x), want %g (%#08x)", i, got[i], g, want[i], w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values differ", bad, len(got))
	}
}

// TestValidateMatchesLlamaCpp: Validate accepts exactly what
// ggml_validate_row_data accepts, on blocks whose scales are random (so
// NaN and infinity appear) and on well-formed ones.
func TestValidateMatchesLlamaCpp(t *testing.T) {
	ref := quantRef(t)
	r := rand.New(rand.NewPCG(11, 11))
	for typ := range gguf.TypeCount {
		if !typ.Valid() || typ.BlockBytes() == 0 {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			for trial := range 64 {
				data := make([]byte, int(typ.BlockBytes())*4)
				for i := range data {
					data[i] = byte(r.Uint32())
				}
				if trial%2 == 0 { // mostly-valid data: small exponents everywhere
					for i := 1; i < len(data); i += 2 {
						data[i] &= 0x3B
					}
				}
				want, err := ref.Validate(context.Background(), uint32(typ), data)
				if err != nil {
					t.Fatal(err)
				}
				if got := quant.Validate(typ, data) == nil; got != want {
					t.Fatalf("trial %d: Validate says %v, llama.cpp %v: % x", trial, got, want, data)
				}
			}
		})
	}
}
