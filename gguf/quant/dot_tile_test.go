package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestDotTileMatchesDot: every output of DotTile is Dot's bits for its
// pair of rows, for Q8_0 (the tile kernel where AVX2 runs) and for types
// that take the four-row fallback, on the checker's weights and
// activations (extreme quants, NaN and infinite scales), with activation
// counts that leave every size of partial last group, weight rows padded
// apart, and output strides wider than a tile; nothing outside the tile
// is written, and one TileActs is reused throughout.
func TestDotTileMatchesDot(t *testing.T) {
	for _, c := range []struct {
		typ       gguf.Type
		maxBlocks int
		iters     int
	}{
		{gguf.TypeQ8_0, 40, 400},
		{gguf.TypeQ4_0, 9, 60},
		{gguf.TypeQ4_K, 3, 60},
		{gguf.TypeQ6_K, 3, 30},
		{gguf.TypeIQ4_XS, 3, 60},
		{gguf.TypeF32, 40, 30},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			if c.typ == gguf.TypeQ8_0 && Kernels() == "avx2" && !hasDotTile[c.typ] {
				t.Fatal("no Q8_0 tile kernel at the avx2 level")
			}
			if err := tileMismatch(c.typ, c.maxBlocks, c.iters); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tileOutside marks the outputs DotTile must leave alone.
const tileOutside = 0x7FC0DEAD

// tileMismatch runs iters random tiles of typ through DotTile and
// returns the first output that is not Dot's, or that was written
// outside the tile.
func tileMismatch(typ gguf.Type, maxBlocks, iters int) error {
	rng := rand.New(rand.NewPCG(uint64(typ), 0x711e))
	vt := VecDotType(typ)
	bs, vbs := int(typ.BlockSize()), int(vt.BlockSize())
	var ta TileActs
	for iter := range iters {
		nb := 1 + rng.IntN(maxBlocks)
		cols := nb * bs
		d, err := NewDotter(typ, cols)
		if err != nil {
			return err
		}
		stride := d.wBytes + rng.IntN(3)*rng.IntN(40)
		w := make([]byte, (TileRows-1)*stride+d.wBytes)
		fillRandom(rng, w)
		for r := range TileRows {
			copy(w[r*stride:], checkWeights(rng, typ, nb, (iter+r)%5))
		}
		n := 1 + rng.IntN(3*TileCols)
		a := make([]byte, 0, n*d.aBytes)
		for range n {
			a = append(a, checkActivations(rng, vt, cols, cols/vbs*int(vt.BlockBytes()), rng.IntN(3))...)
		}
		d.PrepareTile(&ta, a, n)
		outStride := TileRows + rng.IntN(3)*rng.IntN(20)
		for j := 0; j < n; j += TileCols {
			out := make([]float32, TileCols*outStride+TileRows)
			for i := range out {
				out[i] = math.Float32frombits(tileOutside)
			}
			d.DotTile(w, stride, &ta, j, out, outStride)
			for i, got := range out {
				c, r := i/outStride, i%outStride
				if r >= TileRows || c >= TileCols || j+c >= n {
					if math.Float32bits(got) != tileOutside {
						return fmt.Errorf("%s iteration %d: DotTile(j=%d) wrote out[%d], outside its tile", typ, iter, j, i)
					}
					continue
				}
				want := d.Dot(w[r*stride:r*stride+d.wBytes], a[(j+c)*d.aBytes:(j+c+1)*d.aBytes])
				if !sameBits(got, want) {
					return fmt.Errorf("%s iteration %d, %d blocks, %d activation rows: weight row %d × activation row %d: DotTile %g (%#08x), Dot %g (%#08x)",
						typ, iter, nb, n, r, j+c, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
	return nil
}

// TestDotTileRejectsBadShapes: DotTile panics on what only a caller that
// sized its buffers wrongly can pass.
func TestDotTileRejectsBadShapes(t *testing.T) {
	d, err := NewDotter(gguf.TypeQ8_0, 64)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, TileRows*d.wBytes)
	var ta TileActs
	d.PrepareTile(&ta, make([]byte, 10*d.aBytes), 10)
	for name, call := range map[string]func(){
		"short weights":     func() { d.DotTile(w[:len(w)-1], d.wBytes, &ta, 0, make([]float32, 64), TileRows) },
		"narrow stride":     func() { d.DotTile(w, d.wBytes-1, &ta, 0, make([]float32, 64), TileRows) },
		"j not a group":     func() { d.DotTile(w, d.wBytes, &ta, 3, make([]float32, 64), TileRows) },
		"j past the rows":   func() { d.DotTile(w, d.wBytes, &ta, 16, make([]float32, 64), TileRows) },
		"short output":      func() { d.DotTile(w, d.wBytes, &ta, 8, make([]float32, TileRows+TileRows-1), TileRows) },
		"narrow out stride": func() { d.DotTile(w, d.wBytes, &ta, 0, make([]float32, 64), TileRows-1) },
		"ragged rows":       func() { d.PrepareTile(&ta, make([]byte, 10*d.aBytes-1), 10) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			call()
		}()
	}
}

// BenchmarkDotTile: a Q8_0 matrix that fits in the caches against 32
// rows of activations, as a prompt's projections run it: tiles, the
// four-row kernel once per activation row, and the single-row kernel.
// ns/block is the time per weight block dotted with one activation row.
func BenchmarkDotTile(b *testing.B) {
	const cols, rows, n = 1024, 64, 32
	rng := rand.New(rand.NewPCG(1, 2))
	d, err := NewDotter(gguf.TypeQ8_0, cols)
	if err != nil {
		b.Fatal(err)
	}
	w := make([]byte, rows*d.wBytes)
	fillRandom(rng, w)
	for i := 1; i < len(w); i += blockQ8_0 {
		w[i] &= 0x3B // finite scales
	}
	a := make([]byte, n*d.aBytes)
	copy(a, w)
	out := make([]float32, n*rows)
	blocks := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*n*d.nb), "ns/block")
	}
	b.Run("tile", func(b *testing.B) {
		var ta TileActs
		for range b.N {
			d.PrepareTile(&ta, a, n)
			for j := 0; j < n; j += TileCols {
				for r := 0; r < rows; r += TileRows {
					d.DotTile(w[r*d.wBytes:], d.wBytes, &ta, j, out[j*rows+r:], rows)
				}
			}
		}
		blocks(b)
	})
	b.Run("dot4", func(b *testing.B) {
		for range b.N {
			for r := 0; r < rows; r += 4 {
				for t := range n {
					d.Dot4(w[r*d.wBytes:], d.wBytes, a[t*d.aBytes:(t+1)*d.aBytes], (*[4]float32)(out[t*rows+r:]))
				}
			}
		}
		blocks(b)
	})
	b.Run("dot", func(b *testing.B) {
		for range b.N {
			for r := range rows {
				for t := range n {
					out[t*rows+r] = d.Dot(w[r*d.wBytes:(r+1)*d.wBytes], a[t*d.aBytes:(t+1)*d.aBytes])
				}
			}
		}
		blocks(b)
	})
}
