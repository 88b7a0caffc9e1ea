package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// refRounded is x on grid as the CPU backend multiplies it: converted by
// quant.QuantizeActivations (llama.cpp's haswell from_float, byte for
// byte) and each stored value decoded as its dot product reads it, d·q.
func refRounded(t *testing.T, grid gguf.Type, x []float32) []float32 {
	t.Helper()
	enc, err := quant.QuantizeActivations(nil, grid, x)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 0, len(x))
	le := binary.LittleEndian
	switch grid {
	case gguf.TypeF16:
		for i := range x {
			out = append(out, quant.F16ToF32(le.Uint16(enc[2*i:])))
		}
	case gguf.TypeBF16:
		for i := range x {
			out = append(out, math.Float32frombits(uint32(le.Uint16(enc[2*i:]))<<16))
		}
	case gguf.TypeQ8_0, gguf.TypeQ8_1:
		head := 2 // d
		if grid == gguf.TypeQ8_1 {
			head = 4 // d and s
		}
		for b := 0; b < len(enc); b += head + 32 {
			d := quant.F16ToF32(le.Uint16(enc[b:]))
			for _, q := range enc[b+head : b+head+32] {
				out = append(out, d*float32(int8(q)))
			}
		}
	case gguf.TypeQ8_K:
		for b := 0; b < len(enc); b += 4 + 256 + 32 {
			d := math.Float32frombits(le.Uint32(enc[b:]))
			for _, q := range enc[b+4 : b+260] {
				out = append(out, d*float32(int8(q)))
			}
		}
	}
	return out
}

// roundingInputs is blocks of bs values for grid: random values of many
// scales, a block of zeros, and blocks made of the values where rounding
// decides (ties of the levels, binary16's overflow, subnormal halves).
func roundingInputs(rng *rand.Rand, grid gguf.Type, bs, blocks int) []float32 {
	x := make([]float32, 0, bs*blocks)
	for b := range blocks {
		scale := math.Pow(10, float64(rng.IntN(9)-4))
		for i := range bs {
			v := float32(rng.NormFloat64() * scale)
			switch {
			case b == 1:
				v = 0
			case b == 2 && bs > 1:
				// With max 127 the levels are the values: x.5 ties.
				v = float32(i%127) + 0.5
				if i == 0 {
					v = -127
				}
			}
			x = append(x, v)
		}
	}
	if bs == 1 { // the edges of binary16 and bfloat16
		for _, v := range []float64{65504, 65519.99, 65520, 1e30, math.Inf(1), math.Inf(-1), 0x1p-14, 0x1.ffcp-15,
			0x1p-24, 0x1p-25, 0x1.000002p-25, 0x3p-26, 0x1.8p-24, 0x1p-130, -0x1p-24, math.Copysign(0, -1),
			3.4e38, 0x1.00018p0, 0x1.00008p0, 0x1.00004p0, 0x1.ffffp127} {
			x = append(x, float32(v))
		}
		for range 64 { // random bit patterns, of every exponent
			x = append(x, math.Float32frombits(rng.Uint32()))
		}
	}
	return x
}

// TestRoundActivations: the values RoundActivations writes are, bit for
// bit, the CPU's converted activations as its dot products read them (a
// zero's sign aside, which no product sees), on every grid.
func TestRoundActivations(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(30, 1))
	for _, grid := range []gguf.Type{gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ8_1, gguf.TypeQ8_K} {
		t.Run(grid.String(), func(t *testing.T) {
			bs := int(grid.BlockSize())
			x := roundingInputs(rng, grid, bs, 1+3000/bs)
			x = x[:len(x)/bs*bs]
			want := refRounded(t, grid, x)
			xs, dst := guarded(t, d, x), poisoned(t, d, len(x))
			record(t, d, func(b *Batch) error { return b.RoundActivations(dst, xs, grid, len(x)) })
			got := readGuarded(t, d, dst, len(x))
			bad := 0
			for i := range want {
				same := math.Float32bits(got[i]) == math.Float32bits(want[i]) || (got[i] == 0 && want[i] == 0) ||
					(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i])))
				if !same {
					if bad < 5 {
						t.Errorf("value %d (%g, %#08x): got %g (%#08x), the CPU's %g (%#08x)", i, x[i], math.Float32bits(x[i]),
							got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ", bad, len(want))
			}
		})
	}
}

// TestRoundActivationsInPlaceAndBounds: dst may be x; a count that is
// not whole blocks, or a grid that is not an activation type, is refused.
func TestRoundActivationsInPlaceAndBounds(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(30, 2))
	x := roundingInputs(rng, gguf.TypeQ8_0, 32, 4)
	want := refRounded(t, gguf.TypeQ8_0, x)
	xs := guarded(t, d, x)
	record(t, d, func(b *Batch) error { return b.RoundActivations(xs, xs, gguf.TypeQ8_0, len(x)) })
	compareValues(t, "in place", readGuarded(t, d, xs, len(x)), want, exactTolerance)

	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Submit()
	if err := b.RoundActivations(xs, xs, gguf.TypeQ8_K, len(x)); err == nil {
		t.Error("128 values onto Q8_K's blocks of 256 was accepted")
	}
	if err := b.RoundActivations(xs, xs, gguf.TypeQ4_K, len(x)); err == nil {
		t.Error("rounding onto Q4_K, a weight type, was accepted")
	}
	if err := b.RoundActivations(xs, xs, gguf.TypeQ8_0, len(x)+32); err == nil {
		t.Error("a span past its buffer was accepted")
	}
}
