//go:build amd64 && !purego

package quant

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestIQ23AVX2MatchesGeneric: the AVX2 kernels of IQ2_XXS, IQ3_XXS,
// IQ2_XS, IQ3_S and IQ2_S return the Go kernels' bits on rows of 1 to 9
// blocks, which reach every path of their block loops (the first block,
// the last, and those between, which prepare the next).
func TestIQ23AVX2MatchesGeneric(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	for _, k := range []struct {
		typ      gguf.Type
		ref, vec func(w, a []byte, nb int) float32
	}{
		{gguf.TypeIQ2_XXS, vecDotIQ2_XXS, vecDotIQ2_XXSAVX2},
		{gguf.TypeIQ3_XXS, vecDotIQ3_XXS, vecDotIQ3_XXSAVX2},
		{gguf.TypeIQ2_XS, vecDotIQ2_XS, vecDotIQ2_XSAVX2},
		{gguf.TypeIQ3_S, vecDotIQ3_S, vecDotIQ3_SAVX2},
		{gguf.TypeIQ2_S, vecDotIQ2_S, vecDotIQ2_SAVX2},
	} {
		t.Run(k.typ.String(), func(t *testing.T) {
			checkVectorKernel(t, k.typ, k.ref, k.vec, 4000, 9)
		})
	}
}
