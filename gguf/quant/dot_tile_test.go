package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// tiledTypes are the weight types that have a tile kernel at every
// vector level.
var tiledTypes = []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_1, gguf.TypeQ5_1, gguf.TypeNVFP4, gguf.TypeTQ2_0, gguf.TypeQ5_0, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_S, gguf.TypeIQ4_XS, gguf.TypeIQ2_XXS, gguf.TypeIQ3_XXS, gguf.TypeQ4_0, gguf.TypeIQ4_NL, gguf.TypeMXFP4, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K}

// TestDotTileMatchesDot: every output of DotTile is Dot's bits for its
// pair of rows, for every weight type (the tile kernels where a vector
// level runs them, the four-row fallback for the others), on the
// checker's weights and activations (extreme quants, NaN and infinite
// scales), with activation counts that leave every size of partial last
// group, weight rows padded apart, and output strides wider than a tile;
// nothing outside the tile is written, and one TileActs is reused
// throughout.
func TestDotTileMatchesDot(t *testing.T) {
	for typ := range gguf.TypeCount {
		if referenceDots[typ].fn == nil {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			if Kernels() != "generic" && slices.Contains(tiledTypes, typ) && !hasDotTile[typ] && !hasDotSpan[typ] {
				t.Fatalf("no %s tile kernel at the %s level", typ, Kernels())
			}
			maxBlocks, iters := 9, 40
			switch {
			case typ.BlockSize() == 1:
				maxBlocks, iters = 300, 10
			case typ.BlockSize() == 256:
				maxBlocks = 3
			case typ == gguf.TypeQ8_0:
				maxBlocks, iters = 40, 400
			}
			if hasDotTile[typ] || hasDotSpan[typ] {
				iters *= 4
			}
			if err := tileMismatch(typ, maxBlocks, iters); err != nil {
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
		n := 1 + rng.IntN(3*TileSpan/2)
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
		if err := spanMismatch(d, w, stride, &ta, a, n, rng); err != nil {
			return fmt.Errorf("%s iteration %d, %d blocks: %w", typ, iter, nb, err)
		}
	}
	return nil
}

// spanMismatch runs DotTileSpan over the n activation rows ta holds, or
// over a random first part of them, and returns the first output that is
// not Dot's, or that was written outside the span.
func spanMismatch(d Dotter, w []byte, stride int, ta *TileActs, a []byte, n int, rng *rand.Rand) error {
	outStride := TileRows + rng.IntN(3)*rng.IntN(20)
	end := n
	if rng.IntN(2) == 0 {
		end = rng.IntN(n + 1) // a span that stops short of the rows ta holds
	}
	n = end
	for j := 0; j < n; j += TileSpan {
		out := make([]float32, TileSpan*outStride+TileRows)
		for i := range out {
			out[i] = math.Float32frombits(tileOutside)
		}
		d.DotTileSpan(w, stride, ta, j, end, out, outStride)
		for i, got := range out {
			c, r := i/outStride, i%outStride
			if r >= TileRows || c >= TileSpan || j+c >= n {
				if math.Float32bits(got) != tileOutside {
					return fmt.Errorf("DotTileSpan(j=%d) wrote out[%d], outside its span", j, i)
				}
				continue
			}
			want := d.Dot(w[r*stride:r*stride+d.wBytes], a[(j+c)*d.aBytes:(j+c+1)*d.aBytes])
			if !sameBits(got, want) {
				return fmt.Errorf("%d activation rows: DotTileSpan(j=%d): weight row %d × activation row %d: %g (%#08x), Dot %g (%#08x)",
					n, j, r, j+c, got, math.Float32bits(got), want, math.Float32bits(want))
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

// BenchmarkDotTile: a matrix of each type with a tile kernel that fits
// in the caches against 32 rows of activations, as a prompt's
// projections run it: tiles, the four-row kernel once per activation
// row, and the single-row kernel. ns/block is the time per weight block
// dotted with one activation row.
func BenchmarkDotTile(b *testing.B) {
	for _, typ := range tiledTypes {
		b.Run(typ.String(), func(b *testing.B) { benchmarkDotTile(b, typ) })
	}
}

func benchmarkDotTile(b *testing.B, typ gguf.Type) {
	const cols, rows, n = 1024, 64, 32
	rng := rand.New(rand.NewPCG(1, 2))
	d, err := NewDotter(typ, cols)
	if err != nil {
		b.Fatal(err)
	}
	// Quantized normal values: finite scales, no subnormal arithmetic.
	var w, a []byte
	for range rows {
		w = append(w, checkWeights(rng, typ, d.nb, 0)...)
	}
	vt := VecDotType(typ)
	for range n {
		a = append(a, checkActivations(rng, vt, cols, d.aBytes, 0)...)
	}
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
	b.Run("span", func(b *testing.B) {
		var ta TileActs
		for range b.N {
			d.PrepareTile(&ta, a, n)
			for j := 0; j < n; j += TileSpan {
				for r := 0; r < rows; r += TileRows {
					d.DotTileSpan(w[r*d.wBytes:], d.wBytes, &ta, j, n, out[j*rows+r:], rows)
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

// FuzzTileKernels: for any weight type and any bytes (NaN, infinite and
// subnormal scales, −128 quants, bsums that do not match their quants),
// every result of a tile, whole or partial, is the Go reference's bits
// for its pair of rows.
func FuzzTileKernels(f *testing.F) {
	var tiled []gguf.Type // the fuzzer's type byte picks one of these
	for typ := range gguf.TypeCount {
		if hasDotTile[typ] || hasDotSpan[typ] {
			tiled = append(tiled, typ)
		}
	}
	f.Add(uint8(0), uint8(1), uint8(8), []byte{1, 2, 3})
	f.Add(uint8(1), uint8(3), uint8(5), []byte{0x80, 0x7f})
	f.Add(uint8(2), uint8(2), uint8(13), []byte{0xff, 0x00, 0x7c})
	f.Fuzz(func(t *testing.T, typ, blocks, rows uint8, seed []byte) {
		if len(tiled) == 0 || len(seed) == 0 {
			return
		}
		ty := tiled[int(typ)%len(tiled)]
		d, err := NewDotter(ty, (1+int(blocks)%6)*int(ty.BlockSize()))
		if err != nil {
			return
		}
		n := 1 + int(rows)%(TileSpan+TileCols+1)
		stride := d.wBytes + int(blocks)/6
		w := make([]byte, (TileRows-1)*stride+d.wBytes)
		a := make([]byte, n*d.aBytes)
		for i := range w {
			w[i] = seed[i%len(seed)] ^ byte(i*131)
		}
		for i := range a {
			a[i] = seed[(i+len(w))%len(seed)] ^ byte(i*71)
		}
		var ta TileActs
		d.PrepareTile(&ta, a, n)
		tiles, spans := make([]float32, n*TileRows), make([]float32, n*TileRows)
		for j := 0; j < n; j += TileCols {
			d.DotTile(w, stride, &ta, j, tiles[j*TileRows:], TileRows)
		}
		for j := 0; j < n; j += TileSpan {
			d.DotTileSpan(w, stride, &ta, j, n, spans[j*TileRows:], TileRows)
		}
		for c := range n {
			for r := range TileRows {
				want := referenceDots[ty].fn(w[r*stride:r*stride+d.wBytes], a[c*d.aBytes:(c+1)*d.aBytes], d.nb)
				for name, out := range map[string][]float32{"DotTile": tiles, "DotTileSpan": spans} {
					if got := out[c*TileRows+r]; !sameBits(got, want) {
						t.Fatalf("%s, %d blocks, level %s: %s, weight row %d × activation row %d of %d: %g (%#08x), reference %g (%#08x)",
							ty, d.nb, Kernels(), name, r, c, n, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		}
	})
}
