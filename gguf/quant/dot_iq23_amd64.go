//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for the codebook i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
// and IQ3_S against Q8_K. Each assembly kernel returns the row's running
// sum sumf = fma(f16(d)·yd, float32(bsum), sumf) over the blocks, the
// chain iqSum computes, and its wrapper multiplies by the type's
// constant, as iqSum does last. dot_iq23_amd64.s says why each block sum
// bsum is exact.

// dotIQ2XXSAVX2 is the sumf of nb IQ2_XXS blocks at w against the Q8_K
// blocks at a; grid is iq2xxsGrid.
//
//go:noescape
func dotIQ2XXSAVX2(w, a *byte, nb int, grid *uint64) float32

// dotIQ2XSAVX2 is the sumf of nb IQ2_XS blocks; grid is iq2xsGrid and idx
// scratch for the grid indices of two blocks (64 uint16).
//
//go:noescape
func dotIQ2XSAVX2(w, a *byte, nb int, grid *uint64, idx *uint16) float32

// dotIQ2SAVX2 is the sumf of nb IQ2_S blocks; grid is iq2sGrid and idx
// scratch for the grid indices of two blocks (64 uint16).
//
//go:noescape
func dotIQ2SAVX2(w, a *byte, nb int, grid *uint64, idx *uint16) float32

// dotIQ3XXSAVX2 is the sumf of nb IQ3_XXS blocks; grid is iq3xxsGrid.
//
//go:noescape
func dotIQ3XXSAVX2(w, a *byte, nb int, grid *uint32) float32

// dotIQ3SAVX2 is the sumf of nb IQ3_S blocks; grid is iq3sGrid and idx
// scratch for the grid indices of two blocks (128 uint16).
//
//go:noescape
func dotIQ3SAVX2(w, a *byte, nb int, grid *uint32, idx *uint16) float32

// vecDotIQ2_XXSAVX2 is vecDotIQ2_XXS on AVX2.
func vecDotIQ2_XXSAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ2XX-1]
	_ = a[nb*blockQ8K-1]
	return 0.125 * dotIQ2XXSAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq2xxsGrid[0])
}

// vecDotIQ2_XSAVX2 is vecDotIQ2_XS on AVX2.
func vecDotIQ2_XSAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ2XS-1]
	_ = a[nb*blockQ8K-1]
	var idx [64]uint16
	return 0.125 * dotIQ2XSAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq2xsGrid[0], &idx[0])
}

// vecDotIQ2_SAVX2 is vecDotIQ2_S on AVX2.
func vecDotIQ2_SAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ2S-1]
	_ = a[nb*blockQ8K-1]
	var idx [64]uint16
	return 0.125 * dotIQ2SAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq2sGrid[0], &idx[0])
}

// vecDotIQ3_XXSAVX2 is vecDotIQ3_XXS on AVX2.
func vecDotIQ3_XXSAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ3XX-1]
	_ = a[nb*blockQ8K-1]
	return 0.25 * dotIQ3XXSAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq3xxsGrid[0])
}

// vecDotIQ3_SAVX2 is vecDotIQ3_S on AVX2; its C has no final factor
// (iqSum's 1·sumf is sumf).
func vecDotIQ3_SAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ3S-1]
	_ = a[nb*blockQ8K-1]
	var idx [128]uint16
	return dotIQ3SAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &iq3sGrid[0], &idx[0])
}

// This file's kernels replace the Go ones when the AVX2 level is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeIQ2_XXS].fn = vecDotIQ2_XXSAVX2
	dotKernels[gguf.TypeIQ2_XS].fn = vecDotIQ2_XSAVX2
	dotKernels[gguf.TypeIQ2_S].fn = vecDotIQ2_SAVX2
	dotKernels[gguf.TypeIQ3_XXS].fn = vecDotIQ3_XXSAVX2
	dotKernels[gguf.TypeIQ3_S].fn = vecDotIQ3_SAVX2
}
