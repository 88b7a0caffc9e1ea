//go:build amd64 && !purego

package quant

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestLegacyKernelsAVX2: each legacy vector kernel returns its Go
// kernel's bits on rows of 1–40 blocks, which reach every tail of the
// four-block loop.
func TestLegacyKernelsAVX2(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	kernels := []struct {
		typ      gguf.Type
		ref, vec func(w, a []byte, nb int) float32
	}{
		{gguf.TypeQ4_0, vecDotQ4_0, vecDotQ4_0AVX2},
		{gguf.TypeQ4_1, vecDotQ4_1, vecDotQ4_1AVX2},
		{gguf.TypeQ5_0, vecDotQ5_0, vecDotQ5_0AVX2},
		{gguf.TypeQ5_1, vecDotQ5_1, vecDotQ5_1AVX2},
		{gguf.TypeQ8_0, vecDotQ8_0, vecDotQ8_0AVX2},
	}
	for _, k := range kernels {
		t.Run(k.typ.String(), func(t *testing.T) {
			checkVectorKernel(t, k.typ, k.ref, k.vec, 4000, 40)
		})
	}
}
