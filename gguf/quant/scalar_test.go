package quant

import (
	"math"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

func TestF16RoundTripsEveryHalf(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		got := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7FFF != 0x7E00 || got&0x8000 != uint16(h)&0x8000 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, got)
		}
	}
}

func TestF16Rounding(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {65520, 0x7C00}, // rounds up to +Inf
		{float32(math.Inf(-1)), 0xFC00}, {5.960464477539063e-08, 0x0001}, // smallest subnormal
		{2.980232238769531e-08, 0x0000}, // half of it: ties to even (0)
		{1 + 1.0/2048, 0x3C00},          // tie between 1 and next: even
		{1 + 3.0/2048, 0x3C02},          // tie: rounds up to even
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	if F32ToBF16(1) != 0x3F80 || BF16ToF32(0x3F80) != 1 {
		t.Fatal("1.0")
	}
	// 1 + 2^-8 is a tie between 0x3F80 and 0x3F81: even wins.
	if got := F32ToBF16(math.Float32frombits(0x3F808000)); got != 0x3F80 {
		t.Fatalf("tie: %#04x", got)
	}
	if got := F32ToBF16(math.Float32frombits(0x3F818000)); got != 0x3F82 {
		t.Fatalf("tie up: %#04x", got)
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7F80 != 0x7F80 || got&0x7F == 0 {
		t.Fatalf("NaN: %#04x", got)
	}
}

func TestQ8_0(t *testing.T) {
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i-20) / 7
	}
	b, err := Quantize(nil, gguf.TypeQ8_0, x)
	if err != nil || len(b) != 68 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	// Block 0: amax = 20/7, d = amax/127; the element of largest |x| maps to ±127.
	if int8(b[2]) != -127 {
		t.Fatalf("first quant %d, want -127", int8(b[2]))
	}
	y, err := Dequantize(nil, gguf.TypeQ8_0, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if d := math.Abs(float64(y[i] - x[i])); d > 0.025 { // half a step of block 1 (amax 43/7)
			t.Fatalf("element %d: %g → %g", i, x[i], y[i])
		}
	}
	zero, _ := Quantize(nil, gguf.TypeQ8_0, make([]float32, 32))
	for _, c := range zero {
		if c != 0 {
			t.Fatal("zero block is not all zero bytes")
		}
	}
	if _, err := Quantize(nil, gguf.TypeQ8_0, x[:33]); err == nil {
		t.Fatal("partial block accepted")
	}
}

func TestMXFP4(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i%8) * 0.5 * float32(1-2*(i/16))
	}
	b, err := Quantize(nil, gguf.TypeMXFP4, x)
	if err != nil || len(b) != 17 {
		t.Fatal(err)
	}
	// amax 3.5: e = floor(log2 3.5) − 2 + 127 = 126, scale 2^-2; 3.5 = 14×0.25 → nearest table value 12 or 16? table has 12 → 3.0.
	if b[0] != 126 {
		t.Fatalf("e = %d, want 126", b[0])
	}
	y, _ := Dequantize(nil, gguf.TypeMXFP4, b)
	for i := range x {
		if d := math.Abs(float64(y[i] - x[i])); d > 0.51 {
			t.Fatalf("element %d: %g → %g", i, x[i], y[i])
		}
	}
	if E8M0ToF32Half(0) != float32(math.Ldexp(1, -128)) || E8M0ToF32Half(130) != 4 {
		t.Fatal("E8M0")
	}
}
