package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

func TestNearestInt(t *testing.T) {
	cases := []struct {
		f    float32
		want int
	}{
		{0, 0}, {0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.5, -2},
		{0.49999997, 0}, {4194303, 4194303}, {-4194303, -4194303},
		// Outside the asserted range the bit trick still defines a value.
		{float32(math.NaN()), 0}, {float32(math.Inf(1)), -0x400000}, {float32(math.Inf(-1)), -0x400000},
	}
	for _, c := range cases {
		if got := nearestInt(c.f); got != c.want {
			t.Errorf("nearestInt(%g) = %d, want %d", c.f, got, c.want)
		}
	}
}

// rmsRoundTrip quantizes a Gaussian row, with and without an importance
// matrix, and returns the worse relative RMS error of the decoded values.
func rmsRoundTrip(t *testing.T, typ gguf.Type) float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(11, uint64(typ)))
	x := make([]float32, 4096)
	im := make([]float32, len(x))
	var ss float64
	for i := range x {
		x[i] = float32(r.NormFloat64()) * 0.02
		im[i] = float32(r.ExpFloat64())
		ss += float64(x[i]) * float64(x[i])
	}
	worst := 0.0
	for _, w := range [][]float32{nil, im} {
		b, err := QuantizeRows(nil, typ, x, len(x), w)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(x)) / typ.BlockSize() * typ.BlockBytes(); int64(len(b)) != want {
			t.Fatalf("%s: %d bytes, want %d", typ, len(b), want)
		}
		y, err := Dequantize(nil, typ, b)
		if err != nil {
			t.Fatal(err)
		}
		var se float64
		for i := range x {
			d := float64(y[i] - x[i])
			se += d * d
		}
		worst = max(worst, math.Sqrt(se/ss))
	}
	return worst
}

func TestKQuantRoundTrip(t *testing.T) {
	// Bounds sit well above the measured errors, and each is below the
	// next coarser type's.
	bounds := []struct {
		typ gguf.Type
		rel float64
	}{
		{gguf.TypeQ2_K, 0.40}, {gguf.TypeQ3_K, 0.22}, {gguf.TypeQ4_K, 0.11},
		{gguf.TypeQ5_K, 0.055}, {gguf.TypeQ6_K, 0.03}, {gguf.TypeQ8_K, 0.01},
	}
	for _, c := range bounds {
		e := rmsRoundTrip(t, c.typ)
		t.Logf("%s: relative RMS error %.4f", c.typ, e)
		if e > c.rel {
			t.Errorf("%s: relative RMS error %.4f > %.4f", c.typ, e, c.rel)
		}
	}
}

func TestKQuantZeroRow(t *testing.T) {
	x := make([]float32, 512)
	for _, typ := range []gguf.Type{gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ8_K} {
		b, err := Quantize(nil, typ, x)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := Dequantize(nil, typ, b)
		for i, v := range y {
			if v != 0 {
				t.Fatalf("%s: element %d decodes to %g", typ, i, v)
			}
		}
	}
}

func TestQ8_KBsums(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	x := make([]float32, 512)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	b, _ := Quantize(nil, gguf.TypeQ8_K, x)
	for blk := 0; blk < len(b); blk += blockQ8K {
		qs := b[blk+4 : blk+260]
		maxAbs := 0
		for j := range 16 {
			sum := 0
			for _, q := range qs[16*j : 16*j+16] {
				sum += int(int8(q))
				maxAbs = max(maxAbs, int(int8(q)), -int(int8(q)))
			}
			if got := int(int16(binary.LittleEndian.Uint16(b[blk+260+2*j:]))); got != sum {
				t.Fatalf("block %d bsum %d = %d, want %d", blk/blockQ8K, j, got, sum)
			}
		}
		if maxAbs != 127 {
			t.Fatalf("block %d: largest |q| %d, want 127", blk/blockQ8K, maxAbs)
		}
	}
}
