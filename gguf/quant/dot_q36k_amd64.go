//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for Q3_K and Q6_K (dot_q36k_amd64.s), bit for bit
// vecDotQ3_K and vecDotQ6_K: the same int32 lanes, then the same fused
// multiply-adds and final reduction.

//go:noescape
func dotQ3_KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ6_KAVX2(w, a *byte, nb int) float32

// vecDotQ3_KAVX2 is vecDotQ3_K on AVX2.
func vecDotQ3_KAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ3K-1]
	_ = a[nb*blockQ8K-1]
	return dotQ3_KAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// vecDotQ6_KAVX2 is vecDotQ6_K on AVX2.
func vecDotQ6_KAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ6K-1]
	_ = a[nb*blockQ8K-1]
	return dotQ6_KAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// init registers the Q3_K and Q6_K kernels when the AVX2 level is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeQ3_K].fn = vecDotQ3_KAVX2
	dotKernels[gguf.TypeQ6_K].fn = vecDotQ6_KAVX2
}
