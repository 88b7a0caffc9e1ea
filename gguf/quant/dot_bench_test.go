package quant_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// The benchmarks time gguftool's kernels per type over the same rows as
// llama.cpp's haswell backend, which dotref times with as many passes,
// and report both throughputs in GB/s of weight bytes and their ratio
// (go/llama.cpp, above 1 when gguftool is faster). Without llama.cpp they
// report gguftool's numbers alone.
//
//	go test ./gguf/quant -run NONE -bench 'VecDot|DotF32|Dequantize'

const benchRows = 16 // rows of dotN values: a few hundred KiB at most, cache-resident

// benchWeights returns benchRows rows of random blocks of type t, and
// matching activation rows in its vec_dot_type (nil if it has none).
func benchWeights(b *testing.B, t gguf.Type) (w, a []byte) {
	r := rand.New(rand.NewPCG(uint64(t), 41))
	w = validBlocks(r, t, benchRows*dotN/int(t.BlockSize()))
	if vt := quant.VecDotType(t); vt != gguf.TypeCount {
		var err error
		if a, err = quant.QuantizeActivations(nil, vt, floatRows(r, benchRows, dotN)); err != nil {
			b.Fatal(err)
		}
	}
	return w, a
}

// reportVs reports gguftool's throughput over the b.N passes just timed of
// nbytes weight bytes each, and, when llama.cpp is there, its throughput
// over as many passes, timed by llamaSeconds, and the ratio.
func reportVs(b *testing.B, nbytes int, llamaSeconds func(reps int) (float64, error)) {
	b.Helper()
	goGBps := float64(nbytes) * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(goGBps, "GB/s")
	if llamaSeconds == nil {
		return
	}
	sec, err := llamaSeconds(b.N)
	if err != nil {
		b.Fatal(err)
	}
	sec = max(sec, float64(time.Nanosecond)/float64(time.Second))
	llamaGBps := float64(nbytes) * float64(b.N) / sec / 1e9
	b.ReportMetric(llamaGBps, "llama.cpp-GB/s")
	b.ReportMetric(goGBps/llamaGBps, "go/llama.cpp")
}

// BenchmarkVecDot: VecDot against the backend's SIMD ggml_vec_dot_*, row
// by row over the same weights and activations.
func BenchmarkVecDot(b *testing.B) {
	ref, _ := findDotRef(b)
	for _, typ := range dotTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			w, a := benchWeights(b, typ)
			wr, ar := len(w)/benchRows, len(a)/benchRows
			for b.Loop() {
				for i := range benchRows {
					if _, err := quant.VecDot(typ, w[i*wr:(i+1)*wr], a[i*ar:(i+1)*ar], dotN); err != nil {
						b.Fatal(err)
					}
				}
			}
			var llama func(int) (float64, error)
			if ref != nil {
				llama = func(reps int) (float64, error) {
					return ref.BenchVecDot(context.Background(), uint32(typ), dotN, w, a, reps)
				}
			}
			reportVs(b, len(w), llama)
		})
	}
}

// BenchmarkDotF32: DotF32, which decodes as it goes, against the
// backend's conversion to float alone over the same weights.
func BenchmarkDotF32(b *testing.B) {
	benchDecode(b, func(typ gguf.Type, w []byte, x []float32, _ []float32) {
		wr, n := len(w)/benchRows, len(x)/benchRows
		for i := range benchRows {
			if _, err := quant.DotF32(typ, w[i*wr:(i+1)*wr], x[i*n:(i+1)*n]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDequantize: quant.Dequantize against the backend's conversion
// to float (ggml-base's to_float; the backend's own SIMD converters for
// F16 and BF16).
func BenchmarkDequantize(b *testing.B) {
	benchDecode(b, func(typ gguf.Type, w []byte, _ []float32, dst []float32) {
		if _, err := quant.Dequantize(dst[:0], typ, w); err != nil {
			b.Fatal(err)
		}
	})
}

// benchDecode times pass over each dequantizable type's weights and
// compares it with dotref bench-dequantize.
func benchDecode(b *testing.B, pass func(typ gguf.Type, w []byte, x, dst []float32)) {
	ref, _ := findDotRef(b)
	for _, typ := range types(quant.CanDequantize) {
		b.Run(typ.String(), func(b *testing.B) {
			w, _ := benchWeights(b, typ)
			x := floatRows(rand.New(rand.NewPCG(43, 43)), benchRows, dotN)
			dst := make([]float32, 0, len(x))
			for b.Loop() {
				pass(typ, w, x, dst)
			}
			var llama func(int) (float64, error)
			if ref != nil {
				llama = func(reps int) (float64, error) {
					return ref.BenchDequantize(context.Background(), uint32(typ), w, reps)
				}
			}
			reportVs(b, len(w), llama)
		})
	}
}
