//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for the types whose 4-bit codes index a 16-level table
// (MXFP4, NVFP4, IQ4_NL, IQ4_XS), looked up with VPSHUFB, and for Q2_K.
// Each computes the reference's integer sums exactly and then the
// reference's float operations in its order; see dot_lut_amd64.s.

// e8m0Half and ue4m3Half are E8M0ToF32Half and ue4m3ToF32Half for every
// byte: the kernels look block scales up instead of decoding them.
var e8m0Half, ue4m3Half = func() (e, u [256]float32) {
	for b := range 256 {
		e[b], u[b] = E8M0ToF32Half(uint8(b)), ue4m3ToF32Half(uint8(b))
	}
	return e, u
}()

// dotMXFP4AVX2 is vecDotMXFP4 over nb >= 1 blocks. It and dotNVFP4AVX2
// need levels of magnitude at most 12 (kvaluesMXFP4), which their integer
// sums rely on; scales is the block scale decoder as a table.
//
//go:noescape
func dotMXFP4AVX2(w, a *byte, nb int, levels *[16]int8, scales *[256]float32) float32

// vecDotMXFP4AVX2 is vecDotMXFP4.
func vecDotMXFP4AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockMXFP4-1]
	_ = a[nb*blockQ8_0-1]
	return dotMXFP4AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &kvaluesMXFP4, &e8m0Half)
}

// dotIQ4_NLAVX2 is vecDotIQ4_NL over nb >= 1 blocks, levels kvaluesIQ4NL.
//
//go:noescape
func dotIQ4_NLAVX2(w, a *byte, nb int, levels *[16]int8) float32

// vecDotIQ4_NLAVX2 is vecDotIQ4_NL.
func vecDotIQ4_NLAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ4NL-1]
	_ = a[nb*blockQ8_0-1]
	return dotIQ4_NLAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &kvaluesIQ4NL)
}

// dotNVFP4AVX2 is vecDotNVFP4 over nb >= 1 blocks (see dotMXFP4AVX2).
//
//go:noescape
func dotNVFP4AVX2(w, a *byte, nb int, levels *[16]int8, scales *[256]float32) float32

// vecDotNVFP4AVX2 is vecDotNVFP4.
func vecDotNVFP4AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockNVFP4-1]
	_ = a[2*nb*blockQ8_0-1]
	return dotNVFP4AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &kvaluesMXFP4, &ue4m3Half)
}

// dotIQ4_XSAVX2 is vecDotIQ4_XS over nb >= 1 blocks, levels kvaluesIQ4NL.
//
//go:noescape
func dotIQ4_XSAVX2(w, a *byte, nb int, levels *[16]int8) float32

// vecDotIQ4_XSAVX2 is vecDotIQ4_XS.
func vecDotIQ4_XSAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockIQ4XS-1]
	_ = a[nb*blockQ8K-1]
	return dotIQ4_XSAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb, &kvaluesIQ4NL)
}

// dotQ2_KAVX2 is vecDotQ2_K over nb >= 1 blocks.
//
//go:noescape
func dotQ2_KAVX2(w, a *byte, nb int) float32

// vecDotQ2_KAVX2 is vecDotQ2_K.
func vecDotQ2_KAVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ2K-1]
	_ = a[nb*blockQ8K-1]
	return dotQ2_KAVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// init registers this file's kernels when the AVX2 level is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeMXFP4].fn = vecDotMXFP4AVX2
	dotKernels[gguf.TypeIQ4_NL].fn = vecDotIQ4_NLAVX2
	dotKernels[gguf.TypeNVFP4].fn = vecDotNVFP4AVX2
	dotKernels[gguf.TypeIQ4_XS].fn = vecDotIQ4_XSAVX2
	dotKernels[gguf.TypeQ2_K].fn = vecDotQ2_KAVX2
}
