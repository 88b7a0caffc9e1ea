//go:build amd64 && !purego

package quant

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestLUTKernelsMatchGeneric: the AVX2 kernels of dot_lut_amd64.s return
// their Go references' bits. The row lengths reach every tail the kernels
// unroll past (4 blocks of 32, 2 NVFP4 blocks, 1 super-block).
func TestLUTKernelsMatchGeneric(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	for _, c := range []struct {
		typ       gguf.Type
		ref, vec  func(w, a []byte, nb int) float32
		maxBlocks int
	}{
		{gguf.TypeMXFP4, vecDotMXFP4, vecDotMXFP4AVX2, 40},
		{gguf.TypeIQ4_XS, vecDotIQ4_XS, vecDotIQ4_XSAVX2, 9},
		{gguf.TypeQ2_K, vecDotQ2_K, vecDotQ2_KAVX2, 9},
		{gguf.TypeIQ4_NL, vecDotIQ4_NL, vecDotIQ4_NLAVX2, 40},
		{gguf.TypeNVFP4, vecDotNVFP4, vecDotNVFP4AVX2, 9},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			checkVectorKernel(t, c.typ, c.ref, c.vec, 4000, c.maxBlocks)
		})
	}
}
