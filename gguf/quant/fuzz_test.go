package quant_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// FuzzDequantize feeds arbitrary bytes to every codec entry point that
// reads blocks: wrong sizes must be errors, whole blocks must decode to
// exactly blocks × block size values, and nothing may panic.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(gguf.TypeQ4_K), make([]byte, 144))
	f.Add(uint8(gguf.TypeIQ2_XXS), make([]byte, 66*2))
	f.Add(uint8(gguf.TypeQ8_0), []byte{0, 0x3c, 1, 2, 3})
	f.Add(uint8(gguf.TypeIQ1_M), make([]byte, 56))
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		ty := gguf.Type(typ % uint8(gguf.TypeCount+2))
		y, err := quant.Dequantize(nil, ty, data)
		_ = quant.Validate(ty, data)
		if !quant.CanDequantize(ty) {
			if err == nil {
				t.Fatalf("%s: unsupported type decoded", ty)
			}
			return
		}
		bb := int(ty.BlockBytes())
		if len(data)%bb != 0 {
			if err == nil {
				t.Fatalf("%s: %d bytes (not whole blocks) accepted", ty, len(data))
			}
			return
		}
		if err != nil || len(y) != len(data)/bb*int(ty.BlockSize()) {
			t.Fatalf("%s: %d values from %d bytes, %v", ty, len(y), len(data), err)
		}
	})
}

// FuzzQuantize quantizes arbitrary floats (NaN, infinities and
// subnormals included) with arbitrary row widths and importance
// matrices: malformed requests are errors, and whatever is written
// decodes again.
func FuzzQuantize(f *testing.F) {
	f.Add(uint8(gguf.TypeQ4_K), uint16(256), make([]byte, 1024), false)
	f.Add(uint8(gguf.TypeIQ4_XS), uint16(256), make([]byte, 2048), true)
	f.Add(uint8(gguf.TypeQ4_0), uint16(32), []byte{0, 0, 0xc0, 0x7f}, true)
	f.Fuzz(func(t *testing.T, typ uint8, nPerRow uint16, raw []byte, weighted bool) {
		ty := gguf.Type(typ % uint8(gguf.TypeCount+2))
		x := make([]float32, len(raw)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		var im []float32
		if weighted && nPerRow > 0 {
			im = make([]float32, nPerRow)
			for i := range im {
				im[i] = float32(i%7) + 0.5
			}
		}
		q, err := quant.QuantizeRows(nil, ty, x, int(nPerRow), im)
		if err != nil {
			return
		}
		if !quant.CanQuantize(ty) {
			t.Fatalf("%s: unsupported type quantized", ty)
		}
		if want := int64(len(x)) / ty.BlockSize() * ty.BlockBytes(); int64(len(q)) != want {
			t.Fatalf("%s: %d bytes for %d values, want %d", ty, len(q), len(x), want)
		}
		if y, err := quant.Dequantize(nil, ty, q); err != nil || len(y) != len(x) {
			t.Fatalf("%s: output does not decode: %v", ty, err)
		}
	})
}

// FuzzVecDot: the dot products accept only consistent lengths and never
// panic, whatever the bytes (NaN and infinite scales included).
func FuzzVecDot(f *testing.F) {
	f.Add(uint8(gguf.TypeQ4_K), uint16(256), make([]byte, 144), make([]byte, 292))
	f.Add(uint8(gguf.TypeQ8_0), uint16(32), make([]byte, 34), make([]byte, 34))
	f.Add(uint8(gguf.TypeIQ2_S), uint16(256), make([]byte, 82), make([]byte, 292))
	f.Fuzz(func(t *testing.T, typ uint8, n uint16, w, a []byte) {
		ty := gguf.Type(typ % uint8(gguf.TypeCount+2))
		if _, err := quant.VecDot(ty, w, a, int(n)); err == nil {
			vt := quant.VecDotType(ty)
			if int64(len(w)) != int64(n)/ty.BlockSize()*ty.BlockBytes() || int64(len(a)) != int64(n)/vt.BlockSize()*vt.BlockBytes() {
				t.Fatalf("%s: inconsistent lengths accepted", ty)
			}
		}
		x := make([]float32, len(a)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		}
		_, _ = quant.DotF32(ty, w, x)
	})
}
