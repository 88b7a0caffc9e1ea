//go:build amd64 && !purego

package quant

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
)

// TestQ4_Kx4AVX2: each row of the four-row kernel equals the reference
// on that row alone, for rows of 1–9 blocks, packed or with a gap
// between them.
func TestQ4_Kx4AVX2(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(44, 45))
	for iter := range 2000 {
		nb := 1 + rng.IntN(9)
		rowBytes := nb * blockQ4K
		stride := rowBytes + rng.IntN(2)*rng.IntN(300)
		w := make([]byte, 3*stride+rowBytes)
		for r := range 4 {
			copy(w[r*stride:], checkWeights(rng, gguf.TypeQ4_K, nb, (iter+r)%5))
		}
		a := checkActivations(rng, gguf.TypeQ8_K, nb*qkK, nb*blockQ8K, iter%3)
		var out [4]float32
		vecDotQ4_Kx4AVX2(w, stride, a, nb, &out)
		for r, got := range out {
			want := vecDotQ4_K(w[r*stride:r*stride+rowBytes], a, nb)
			if !sameBits(got, want) {
				t.Fatalf("iteration %d, row %d of %d blocks (stride %d): x4 %g (%#08x), reference %g (%#08x)",
					iter, r, nb, stride, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

// TestQ45KNoAlloc: the reference kernels keep their lanes on the stack.
func TestQ45KNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, k := range []struct {
		typ gguf.Type
		fn  func(w, a []byte, nb int) float32
	}{{gguf.TypeQ4_K, vecDotQ4_K}, {gguf.TypeQ5_K, vecDotQ5_K}} {
		w := checkWeights(rng, k.typ, 3, 1)
		a := checkActivations(rng, gguf.TypeQ8_K, 3*qkK, 3*blockQ8K, 1)
		if n := testing.AllocsPerRun(100, func() { k.fn(w, a, 3) }); n != 0 {
			t.Errorf("%s: %v allocations per call", k.typ, n)
		}
	}
}

// TestQ45KMatchesLlamaCppOnGarbage: the reference equals llama.cpp's
// haswell kernels on checkVectorKernel's rows, whose random Q8_K blocks
// have bsums unrelated to their quants, so that VPHADDW's int16 pair sums
// wrap. Skipped without llama.cpp unless GGUFTOOL_REQUIRE_LLAMACPP=1.
func TestQ45KMatchesLlamaCppOnGarbage(t *testing.T) {
	ref, err := llamacpp.FindDotRef(t.TempDir())
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	const nb, rows = 4, 300
	for _, k := range []struct {
		typ gguf.Type
		fn  func(w, a []byte, nb int) float32
	}{{gguf.TypeQ4_K, vecDotQ4_K}, {gguf.TypeQ5_K, vecDotQ5_K}} {
		rng := rand.New(rand.NewPCG(uint64(k.typ), 99))
		var w, a []byte
		for r := range rows {
			w = append(w, checkWeights(rng, k.typ, nb, r%5)...)
			a = append(a, checkActivations(rng, gguf.TypeQ8_K, nb*qkK, nb*blockQ8K, r/5%3)...)
		}
		want, err := ref.VecDot(context.Background(), uint32(k.typ), false, nb*qkK, w, a)
		if err != nil {
			t.Fatal(err)
		}
		wr, ar := nb*int(k.typ.BlockBytes()), nb*blockQ8K
		for r := range rows {
			got := k.fn(w[r*wr:(r+1)*wr], a[r*ar:(r+1)*ar], nb)
			if math.Float32bits(got) != math.Float32bits(want[r]) && !(got != got && want[r] != want[r]) {
				t.Errorf("%s row %d: got %g (%#08x), llama.cpp %g (%#08x)", k.typ, r, got, math.Float32bits(got), want[r], math.Float32bits(want[r]))
			}
		}
	}
}
