//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for Q4_K and Q5_K against Q8_K, bit for bit vecDotQ4_K and
// vecDotQ5_K (llama.cpp's haswell kernels); dot_q45k_amd64.s explains
// why.

//go:noescape
func dotQ4_KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ5_KAVX2(w, a *byte, nb int) float32

// vecDotQ4_KAVX2 is vecDotQ4_K.
func vecDotQ4_KAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ4K-1]
	_ = a[nb*blockQ8K-1]
	return dotQ4_KAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// vecDotQ5_KAVX2 is vecDotQ5_K.
func vecDotQ5_KAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ5K-1]
	_ = a[nb*blockQ8K-1]
	return dotQ5_KAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ4_Kx4AVX2(w *byte, stride int, a *byte, nb int, out *[4]float32)

// vecDotQ4_Kx4AVX2 is vecDotQ4_K for the four rows at w, w+stride, ….
func vecDotQ4_Kx4AVX2(w []byte, stride int, a []byte, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_ = w[3*stride+nb*blockQ4K-1]
	_ = a[nb*blockQ8K-1]
	dotQ4_Kx4AVX2(unsafe.SliceData(w), stride, unsafe.SliceData(a), nb, out)
}

// Registers the Q4_K and Q5_K vector kernels when AVX2 is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeQ4_K].fn = vecDotQ4_KAVX2
	dotKernels4[gguf.TypeQ4_K] = vecDotQ4_Kx4AVX2
	dotKernels[gguf.TypeQ5_K].fn = vecDotQ5_KAVX2
}
