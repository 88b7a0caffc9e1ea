package quant

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

func TestLegacyRoundTrip(t *testing.T) {
	bounds := []struct {
		typ gguf.Type
		rel float64
	}{
		{gguf.TypeQ4_0, 0.13}, {gguf.TypeQ4_1, 0.12}, {gguf.TypeQ5_0, 0.065}, {gguf.TypeQ5_1, 0.06},
	}
	for _, c := range bounds {
		e := rmsRoundTrip(t, c.typ)
		t.Logf("%s: relative RMS error %.4f", c.typ, e)
		if e > c.rel {
			t.Errorf("%s: relative RMS error %.4f > %.4f", c.typ, e, c.rel)
		}
	}
}

// TestQ4_0Layout: element j is the low nibble of byte j, element j+16 the
// high nibble, and the extreme value maps to level 0 (d = max/−8).
func TestQ4_0Layout(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[16], x[5] = -8, 4, 1
	b, err := Quantize(nil, gguf.TypeQ4_0, x)
	if err != nil {
		t.Fatal(err)
	}
	if d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8); d != 1 {
		t.Fatalf("d = %g, want 1", d)
	}
	if b[2] != 0|12<<4 || b[7] != 9|8<<4 {
		t.Fatalf("qs = % x", b[2:])
	}
	y, _ := Dequantize(nil, gguf.TypeQ4_0, b)
	for i := range x {
		if y[i] != x[i] {
			t.Fatalf("element %d: %g → %g", i, x[i], y[i])
		}
	}
}
