//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestVectorKernelsMatchGeneric: each vector kernel returns the generic
// kernel's bits on random blocks, extreme quants (−128, 127) and every
// class of F16 scale (zero, subnormal, normal, large, inf).
func TestVectorKernelsMatchGeneric(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	scales := []uint16{0, 1, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0x7c00, 0x1234, 0x8001}
	block := func(b []byte, mode int) {
		for i := range b {
			switch mode {
			case 0:
				b[i] = byte(rng.IntN(256))
			case 1:
				b[i] = 0x80 // −128
			default:
				b[i] = byte(127 - rng.IntN(2)*254)
			}
		}
	}
	for iter := range 20000 {
		nb := 1 + rng.IntN(40)
		w := make([]byte, nb*blockQ8_0)
		a := make([]byte, nb*blockQ8_0)
		for i := range nb {
			mode := iter % 3
			block(w[i*blockQ8_0+2:(i+1)*blockQ8_0], mode)
			block(a[i*blockQ8_0+2:(i+1)*blockQ8_0], rng.IntN(3))
			var sw, sa uint16
			if rng.IntN(4) == 0 {
				sw, sa = scales[rng.IntN(len(scales))], scales[rng.IntN(len(scales))]
			} else {
				sw, sa = uint16(rng.IntN(0x7c00)), uint16(rng.IntN(0x7c00))|uint16(rng.IntN(2))<<15
			}
			binary.LittleEndian.PutUint16(w[i*blockQ8_0:], sw)
			binary.LittleEndian.PutUint16(a[i*blockQ8_0:], sa)
		}
		n := nb*32 - rng.IntN(32)
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(40)-20)))
			y[i] = float32(rng.NormFloat64())
		}
		xb, yb := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*n), unsafe.Slice((*byte)(unsafe.Pointer(&y[0])), 4*n)
		if got, want := vecDotF32AVX2(xb, yb, n), vecDotF32(xb, yb, n); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("F32, %d values: avx2 %g, generic %g", n, got, want)
		}
		if iter%4 == 0 {
			rows := make([]byte, 4*len(w))
			for r := range 4 {
				copy(rows[r*len(w):], w)
				for i := range nb {
					rows[r*len(w)+i*blockQ8_0+2+rng.IntN(32)] = byte(rng.IntN(256))
				}
			}
			var out [4]float32
			vecDotQ8_0x4AVX2(rows, len(w), a, nb, &out)
			for r := range 4 {
				want := vecDotQ8_0(rows[r*len(w):(r+1)*len(w)], a, nb)
				if !sameBits(out[r], want) {
					t.Fatalf("Q8_0×4 row %d, %d blocks: avx2 %g, generic %g", r, nb, out[r], want)
				}
			}
		}
		got, want := vecDotQ8_0AVX2(w, a, nb), vecDotQ8_0(w, a, nb)
		if !sameBits(got, want) {
			t.Fatalf("Q8_0, %d blocks: avx2 %g (%08x), generic %g (%08x)", nb, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}
