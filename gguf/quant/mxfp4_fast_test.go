package quant

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
)

// mxfp4Mismatch returns the first x of xs for which the grid's index
// differs from the reference search, and whether there is one.
func mxfp4Mismatch(g *mxfp4Grid, xs []float32) (float32, bool) {
	for _, x := range xs {
		if g.index(x) != bestIndexMXFP4(x, g.d) {
			return x, true
		}
	}
	return 0, false
}

// mxfp4Probes returns, for block scale d, the inputs where the index can
// turn: every level and every midpoint between neighbouring levels (both
// signs), ±8 ulps around each, the fast path's limit 16·d and the
// neighbouring binades' edges likewise, plus random values below 16·d,
// random bit patterns (NaN, ±Inf, subnormals) and signed zeros.
func mxfp4Probes(rng *rand.Rand, d float32) []float32 {
	var marks []float32
	m := mxfp4Mags[:]
	for j, v := range m {
		marks = append(marks, v*d)
		if j+1 < len(m) {
			marks = append(marks, (v+m[j+1])/2*d)
		}
	}
	for p := -3; p <= 5; p++ {
		marks = append(marks, float32(math.Ldexp(float64(d), p)), float32(math.Ldexp(float64(d), p)*1.5))
	}
	var xs []float32
	for _, v := range marks {
		for _, s := range []float32{1, -1} {
			b := math.Float32bits(s * v)
			for k := -8; k <= 8; k++ {
				xs = append(xs, math.Float32frombits(uint32(int64(b)+int64(k))))
			}
		}
	}
	lim := math.Float32bits(min(16*d, math.MaxFloat32))
	for range 4000 {
		x := math.Float32frombits(rng.Uint32N(lim + 1))
		xs = append(xs, x, -x, math.Float32frombits(rng.Uint32()))
	}
	return append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
}

// TestMXFP4GridMatchesSearch: for every one of the 256 block scales, the
// grid's index is the reference search's on each level, each midpoint and
// the 8 floats either side of them, the limits, and random values.
func TestMXFP4GridMatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for e := range 256 {
		g := newMXFP4Grid(uint8(e))
		if x, bad := mxfp4Mismatch(&g, mxfp4Probes(rng, g.d)); bad {
			t.Fatalf("e=%d, x=%g (%#08x): grid %d, search %d", e, x, math.Float32bits(x), g.index(x), bestIndexMXFP4(x, g.d))
		}
	}
}

// TestMXFP4GridExhaustive (GGUFTOOL_EXHAUSTIVE=1, CPU-minutes): every
// float32 of either sign below 16·d, the fast path's whole domain, against
// the search, under the block scales of both ends (1/d split in two, 1/d
// subnormal, levels that overflow to +Inf) and one from the middle.
func TestMXFP4GridExhaustive(t *testing.T) {
	if os.Getenv("GGUFTOOL_EXHAUSTIVE") != "1" {
		t.Skip("set GGUFTOOL_EXHAUSTIVE=1")
	}
	for _, e := range []uint8{0, 1, 2, 3, 127, 254, 255} {
		g := newMXFP4Grid(e)
		end := min(uint64(math.Float32bits(g.lim)), 0x7f800000) // the floats below lim
		workers := runtime.GOMAXPROCS(0)
		bad := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				xs := make([]float32, 1<<16)
				for base := uint64(w) << 16; base < end; base += uint64(workers) << 16 {
					xs = xs[:0]
					for b := base; b < min(base+1<<16, end); b++ {
						xs = append(xs, math.Float32frombits(uint32(b)), -math.Float32frombits(uint32(b)))
					}
					if x, ok := mxfp4Mismatch(&g, xs); ok {
						bad[w] = fmt.Errorf("e=%d, x=%#08x: grid %d, search %d", e, math.Float32bits(x), g.index(x), bestIndexMXFP4(x, g.d))
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range bad {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// refQuantizeBlockMXFP4 is quantize_row_mxfp4_ref for one block as the
// reference writes it: the log2 for the scale, the search for each index.
func refQuantizeBlockMXFP4(dst []byte, x []float32) []byte {
	var amax float32
	for _, v := range x {
		if amax < abs32(v) {
			amax = abs32(v)
		}
	}
	e := refScaleMXFP4(amax)
	d := E8M0ToF32Half(e)
	dst = append(dst, e)
	for j := range qkMXFP4 / 2 {
		dst = append(dst, bestIndexMXFP4(x[j], d)|bestIndexMXFP4(x[j+qkMXFP4/2], d)<<4)
	}
	return dst
}

// refScaleMXFP4 is the reference's block scale for amax.
func refScaleMXFP4(amax float32) uint8 {
	if amax > 0 {
		return uint8(int32(float32(math.Floor(float64(float32(math.Log2(float64(amax)))))) - 2 + 127))
	}
	return 0
}

// mxfp4Block fills x with one block of a kind picked by mode, each at a
// random scale: 0 normal values, 1 the grid's levels and midpoints a few
// ulps off, 2 a NaN among normal values, 3 zeros, 4 any bits, 5 an
// infinity among normal values, 6 values just below a power of two
// (whose scale needs log2f).
func mxfp4Block(rng *rand.Rand, x []float32, mode int) {
	scale := math.Ldexp(1, rng.IntN(300)-150)
	for i := range x {
		switch mode {
		case 0, 2, 5:
			x[i] = float32(rng.NormFloat64() * scale)
		case 1:
			v := float32(float64(rng.IntN(49)-24) / 2 * scale)
			x[i] = math.Float32frombits(uint32(int32(math.Float32bits(v)) + int32(rng.IntN(9)-4)))
		case 3:
			x[i] = 0
		case 4:
			x[i] = math.Float32frombits(rng.Uint32())
		default:
			x[i] = math.Float32frombits(uint32(rng.IntN(254)+1)<<23 | 0x7fff00 + uint32(rng.IntN(256)))
		}
	}
	switch mode {
	case 2:
		x[rng.IntN(len(x))] = float32(math.NaN())
	case 5:
		x[rng.IntN(len(x))] = float32(math.Inf(1 - 2*rng.IntN(2)))
	}
}

// TestQuantizeMXFP4MatchesSearch: whole rows, through the vector kernel
// where there is one, equal the reference block by block. The kernel
// stops exactly before the first block whose scale needs log2f (and
// quantizeRowMXFP4 resumes after it), so NaNs and zeros do not stop it.
func TestQuantizeMXFP4MatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	x := make([]float32, 64*qkMXFP4)
	for iter := range 2000 {
		n, kinds := 1+rng.IntN(64), 4+3*(iter%2)
		stop := n
		for b := n - 1; b >= 0; b-- {
			blk := x[b*qkMXFP4 : (b+1)*qkMXFP4]
			mxfp4Block(rng, blk, rng.IntN(kinds))
			var amax float32
			for _, v := range blk {
				if amax < abs32(v) {
					amax = abs32(v)
				}
			}
			if _, exact := mxfp4ScaleFromBits(amax); !exact {
				stop = b
			}
		}
		row := x[:n*qkMXFP4]
		if _, done := quantizeBlocksMXFP4Vec(nil, row); useAVX2() && done != stop {
			t.Fatalf("iteration %d: the vector kernel stopped after %d of %d blocks, want %d", iter, done, n, stop)
		}
		got := quantizeRowMXFP4([]byte{0xAA}, row, nil)[1:]
		for b := range n {
			want := refQuantizeBlockMXFP4(nil, x[b*qkMXFP4:(b+1)*qkMXFP4])
			if g := got[b*blockMXFP4 : (b+1)*blockMXFP4]; string(g) != string(want) {
				t.Fatalf("iteration %d, block %d of %d: % x, reference % x (x %v)", iter, b, n, g, want, x[b*qkMXFP4:(b+1)*qkMXFP4])
			}
		}
	}
}

// TestMXFP4ScaleFromBits: where mxfp4ScaleFromBits says its scale is
// exact, it is the log2f one, for every exponent and the mantissas around
// its threshold and at random; with GGUFTOOL_EXHAUSTIVE=1 for every
// positive float.
func TestMXFP4ScaleFromBits(t *testing.T) {
	check := func(b uint32) bool {
		a := math.Float32frombits(b)
		e, exact := mxfp4ScaleFromBits(a)
		if !exact {
			return true
		}
		if want := refScaleMXFP4(a); e != want {
			t.Errorf("amax %g (%#08x): %d, log2f gives %d", a, b, e, want)
			return false
		}
		return true
	}
	if os.Getenv("GGUFTOOL_EXHAUSTIVE") == "1" {
		for b := uint32(0); b < 0x7f800000; b++ {
			if !check(b) {
				return
			}
		}
		return
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for exp := uint32(0); exp < 256; exp++ {
		for m := uint32(0x7ffe00); m < 0x800000; m++ {
			if !check(exp<<23 | m) {
				return
			}
		}
		for range 2000 {
			if !check(exp<<23 | rng.Uint32N(1<<23)) {
				return
			}
		}
	}
}

// BenchmarkQuantizeMXFP4: quantizeRowMXFP4 against llama.cpp's
// quantize_row_mxfp4_ref (ggml_quantize_chunk) on the same 64Ki normal
// values, in GB/s of float input and go/llama.cpp.
func BenchmarkQuantizeMXFP4(b *testing.B) {
	const rows, n = 16, 4096
	rng := rand.New(rand.NewPCG(6, 6))
	x := make([]float32, rows*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * float32(math.Ldexp(1, i/n-8))
	}
	dst := make([]byte, 0, len(x)/qkMXFP4*blockMXFP4)
	for b.Loop() {
		for r := range rows {
			dst = quantizeRowMXFP4(dst[:0], x[r*n:(r+1)*n], nil)
		}
	}
	goGBps := float64(4*len(x)) * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(goGBps, "GB/s")
	ref, err := llamacpp.FindQuantRef(b.TempDir())
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			b.Fatal(err)
		}
		return
	}
	sec, err := ref.BenchQuantize(context.Background(), uint32(gguf.TypeMXFP4), x, n, b.N)
	if err != nil {
		b.Fatal(err)
	}
	sec = max(sec, time.Nanosecond.Seconds())
	llamaGBps := float64(4*len(x)) * float64(b.N) / sec / 1e9
	b.ReportMetric(llamaGBps, "llama.cpp-GB/s")
	b.ReportMetric(goGBps/llamaGBps, "go/llama.cpp")
}
