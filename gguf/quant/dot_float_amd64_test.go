//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestVecDotFloatAVX2: the F16 and BF16 kernels return the Go kernels'
// bits on random and extreme rows of every length up to 300 (every tail
// past a chunk of 32, several chunks) from the checker's generators and
// floatRow's, then on the checker's own mix.
func TestVecDotFloatAVX2(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	kernels := []struct {
		typ      gguf.Type
		ref, vec func(w, a []byte, n int) float32
	}{
		{gguf.TypeF16, vecDotF16, vecDotF16AVX2},
		{gguf.TypeBF16, vecDotBF16, vecDotBF16AVX2},
	}
	for _, k := range kernels {
		t.Run(k.typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(k.typ), 300))
			for n := 1; n <= 300; n++ {
				for mode := range 15 {
					rows := [][2][]byte{
						{checkWeights(rng, k.typ, n, mode%5), checkActivations(rng, k.typ, n, 2*n, mode/5)},
						{floatRow(k.typ, n, mode), floatRow(k.typ, n, mode/5)},
					}
					for _, r := range rows {
						if got, want := k.vec(r[0], r[1], n), k.ref(r[0], r[1], n); !sameBits(got, want) {
							t.Fatalf("length %d, mode %d: avx2 %g (%#08x), generic %g (%#08x)", n, mode, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
				}
			}
			checkVectorKernel(t, k.typ, k.ref, k.vec, 4000, 300)
		})
	}
}

// floatRow returns n random 16-bit floats of typ: mode%5 picks normal
// values, any bits (NaNs and infinities included), huge values whose
// products overflow, tiny ones whose products underflow, or signed zeros.
func floatRow(typ gguf.Type, n, mode int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(mode)))
	b := make([]byte, 2*n)
	for i := range n {
		var h uint16
		switch mode % 5 {
		case 0:
			f := float32(rng.NormFloat64())
			h = F32ToF16(f)
			if typ == gguf.TypeBF16 {
				h = F32ToBF16(f)
			}
		case 1:
			h = uint16(rng.Uint32())
		case 2:
			h = 0x7B00 | uint16(rng.IntN(0x100)) | uint16(rng.IntN(2))<<15
			if typ == gguf.TypeBF16 {
				h = 0x7E00 | uint16(rng.IntN(0x7F)) | uint16(rng.IntN(2))<<15
			}
		case 3:
			h = uint16(rng.IntN(0x300)) | uint16(rng.IntN(2))<<15
		default:
			h = uint16(rng.IntN(2)) << 15
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// TestDequantizeFloatAVX2: the vector converters give the Go converters'
// exact bits (NaN payloads and signalling NaNs included) for all 65536
// halves and bfloat16s, at every offset within a run of eight and of 32
// and for every length of tail.
func TestDequantizeFloatAVX2(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	all := make([]byte, 2*65536)
	for h := range 65536 {
		binary.LittleEndian.PutUint16(all[2*h:], uint16(h))
	}
	for _, c := range []struct {
		name      string
		ref, vec  dequantizeFunc
		convertTo func(uint16) float32
	}{
		{"F16", dequantizeF16, dequantizeF16AVX2, F16ToF32},
		{"BF16", dequantizeBF16, dequantizeBF16AVX2, BF16ToF32},
	} {
		t.Run(c.name, func(t *testing.T) {
			for shift := 0; shift < 64; shift += 2 { // every value in every lane of a run of 32
				src := append(append([]byte(nil), all[shift:]...), all[:shift]...)
				got := c.vec(nil, src)
				for i, v := range got {
					h := binary.LittleEndian.Uint16(src[2*i:])
					if math.Float32bits(v) != math.Float32bits(c.convertTo(h)) {
						t.Fatalf("%#04x at %d: avx2 %#08x, want %#08x", h, i, math.Float32bits(v), math.Float32bits(c.convertTo(h)))
					}
				}
			}
			rng := rand.New(rand.NewPCG(7, 7))
			for n := 0; n <= 100; n++ {
				off := 2 * rng.IntN(65536-n)
				src := all[off : off+2*n]
				prefix := []float32{1, 2, 3}
				got := c.vec(append([]float32(nil), prefix...), src)
				want := c.ref(append([]float32(nil), prefix...), src)
				if len(got) != len(want) {
					t.Fatalf("%d values: %d out, want %d", n, len(got), len(want))
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%d values, value %d: avx2 %#08x, want %#08x", n, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}
