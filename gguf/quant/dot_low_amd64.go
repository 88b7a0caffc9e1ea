//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for the low-bit types IQ1_S, IQ1_M, TQ2_0, TQ1_0 (against
// Q8_K) and Q2_0, Q1_0 (against Q8_0). Each returns the bits of the Go
// kernel it replaces; dot_low_amd64.s says why each integer sum is exact.

// iq1ScaleTabs[s] serves the IQ1 kernels' sub-block scale ls = 2s+1:
// VPSHUFB of a grid byte g ∈ {−1, 0, 1} into (ls, 2ls, 0, …) is (g+1)·ls
// (the top bit of −1 selects zero), and of byte 0 ls itself.
var iq1ScaleTabs = func() (t [8][16]byte) {
	for s := range t {
		t[s][0], t[s][1] = byte(2*s+1), byte(4*s+2)
	}
	return t
}()

//go:noescape
func dotIQ1SAVX2(w, a *byte, nb int, grid *uint64, scales *[8][16]byte) float32

// vecDotIQ1_SAVX2 is vecDotIQ1_S on AVX2.
func vecDotIQ1_SAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ1S-1]
	_ = a[nb*blockQ8K-1]
	return dotIQ1SAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq1sGrid[0], &iq1ScaleTabs)
}

// iq1mScalePairs[s1 + 8·s2] holds, for an IQ1_M group whose halves have
// the scale codes s1 and s2, iq1ScaleTabs[s1] in its low 16 bytes and
// iq1ScaleTabs[s2] in its high 16, one per 128-bit lane.
var iq1mScalePairs = func() (t [64][32]byte) {
	for i := range t {
		copy(t[i][0:16], iq1ScaleTabs[i&7][:])
		copy(t[i][16:32], iq1ScaleTabs[i>>3][:])
	}
	return t
}()

//go:noescape
func dotIQ1MAVX2(w, a *byte, nb int, grid *uint64, scales *[64][32]byte) float32

// vecDotIQ1_MAVX2 is vecDotIQ1_M on AVX2.
func vecDotIQ1_MAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ1M-1]
	_ = a[nb*blockQ8K-1]
	return dotIQ1MAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq1sGrid[0], &iq1mScalePairs)
}

//go:noescape
func dotTQ2_0AVX2(w, a *byte, nb int) float32

// vecDotTQ2_0AVX2 is vecDotTQ2_0 on AVX2.
func vecDotTQ2_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockTQ2-1]
	_ = a[nb*blockQ8K-1]
	return dotTQ2_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotTQ1_0AVX2(w, a *byte, nb int) float32

// vecDotTQ1_0AVX2 is vecDotTQ1_0 on AVX2.
func vecDotTQ1_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockTQ1-1]
	_ = a[nb*blockQ8K-1]
	return dotTQ1_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ2_0AVX2(w, a *byte, nb int) float32

// vecDotQ2_0AVX2 is vecDotQ2_0 on AVX2.
func vecDotQ2_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ2_0-1]
	_ = a[2*nb*blockQ8_0-1]
	return dotQ2_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ1_0AVX2(w, a *byte, nb int) float32

// vecDotQ1_0AVX2 is vecDotQ1_0 on AVX2.
func vecDotQ1_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ1_0-1]
	_ = a[4*nb*blockQ8_0-1]
	return dotQ1_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// Registers the kernels of this file when the AVX2 level is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeIQ1_S].fn = vecDotIQ1_SAVX2
	dotKernels[gguf.TypeIQ1_M].fn = vecDotIQ1_MAVX2
	dotKernels[gguf.TypeTQ2_0].fn = vecDotTQ2_0AVX2
	dotKernels[gguf.TypeTQ1_0].fn = vecDotTQ1_0AVX2
	dotKernels[gguf.TypeQ2_0].fn = vecDotQ2_0AVX2
	dotKernels[gguf.TypeQ1_0].fn = vecDotQ1_0AVX2
}
