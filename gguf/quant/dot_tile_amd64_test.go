//go:build amd64 && !purego

package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestQ8_0TileKernelMatchesGeneric: the AVX2 Q8_0 tile kernel returns the
// Go reference's bits for each of its 32 pairs of rows, whatever kernel
// level runs, on the checker's weights (quantized, random, extreme bytes,
// NaN and infinite scales) and activations (−128 and 127 runs included),
// on rows of 1–40 blocks.
func TestQ8_0TileKernelMatchesGeneric(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(8, 0x711e))
	for iter := range 1500 {
		nb := 1 + rng.IntN(40)
		rowBytes := nb * blockQ8_0
		stride := rowBytes + rng.IntN(2)*rng.IntN(70)
		w := make([]byte, (TileRows-1)*stride+rowBytes)
		fillRandom(rng, w)
		for r := range TileRows {
			copy(w[r*stride:], checkWeights(rng, gguf.TypeQ8_0, nb, (iter+r)%5))
		}
		n := TileCols - rng.IntN(2)*rng.IntN(TileCols)
		a := make([]byte, 0, n*rowBytes)
		for range n {
			a = append(a, checkActivations(rng, gguf.TypeQ8_0, nb*32, rowBytes, rng.IntN(3))...)
		}
		var tile [TileCols][TileRows]float32
		vecDotQ8_0Tile(w, stride, packTileQ8_0(nil, a, n, nb), nb, &tile)
		for c := range n {
			for r := range TileRows {
				got := tile[c][r]
				want := vecDotQ8_0(w[r*stride:r*stride+rowBytes], a[c*rowBytes:(c+1)*rowBytes], nb)
				if !sameBits(got, want) {
					t.Fatalf("iteration %d, %d blocks: weight row %d × activation row %d: tile %g (%#08x), generic %g (%#08x)",
						iter, nb, r, c, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestPackTileQ8_0: the assembly packer writes packTileQ8_0Ref's bytes,
// for every size of last group, and appends to what dst holds.
func TestPackTileQ8_0(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(9, 0x711e))
	var dst []byte
	for iter := range 200 {
		nb, n := 1+rng.IntN(5), 1+rng.IntN(3*TileCols)
		a := make([]byte, n*nb*blockQ8_0)
		fillRandom(rng, a)
		head := make([]byte, rng.IntN(3))
		fillRandom(rng, head)
		dst = packTileQ8_0(append(dst[:0], head...), a, n, nb)
		if want := packTileQ8_0Ref(append([]byte(nil), head...), a, n, nb); !bytes.Equal(dst, want) {
			t.Fatalf("iteration %d, %d rows of %d blocks: packed bytes differ", iter, n, nb)
		}
	}
}

// packTileQ8_0Ref is packTileQ8_0 in Go, value by value: the reference
// its assembly is checked against.
func packTileQ8_0Ref(dst, a []byte, n, nb int) []byte {
	groups := (n + TileCols - 1) / TileCols
	size := groups * nb * tileQ8_0Block
	off := len(dst)
	dst = append(dst, make([]byte, size)...)
	out := dst[off:]
	rowBytes := nb * blockQ8_0
	for t := range n {
		g, c := t/TileCols, t%TileCols
		row := a[t*rowBytes : (t+1)*rowBytes]
		for b := range nb {
			x := row[b*blockQ8_0 : (b+1)*blockQ8_0]
			blk := out[(g*nb+b)*tileQ8_0Block:][:tileQ8_0Block]
			scale := math.Float32bits(f16At(x))
			if f16At(x) != f16At(x) {
				scale |= 1 << 22 // VCVTPH2PS quiets a signalling NaN, which the product would
			}
			binary.LittleEndian.PutUint32(blk[4*c:], scale)
			for k := range 16 {
				lo, hi := uint16(int16(int8(x[2+2*k]))), uint16(int16(int8(x[3+2*k])))
				binary.LittleEndian.PutUint32(blk[4*TileCols*(k+1)+4*c:], uint32(lo)|uint32(hi)<<16)
			}
		}
	}
	return dst
}
