//go:build amd64 && !purego

package quant

import (
	"slices"
	"unsafe"
)

//go:noescape
func quantizeMXFP4AVX2(dst *byte, x *float32, nb int, scales *mxfp4Scale) int

// quantizeBlocksMXFP4Vec appends the blocks of x, from the first, that the
// vector kernel quantizes, and returns how many: it stops before a block
// with a NaN or an infinity, or whose scale needs log2f (see
// mxfp4ScaleFromBits), and does none under GGUFTOOL_KERNELS=generic.
func quantizeBlocksMXFP4Vec(dst []byte, x []float32) ([]byte, int) {
	nb := len(x) / qkMXFP4
	if nb == 0 || !useAVX2() {
		return dst, 0
	}
	dst = slices.Grow(dst, nb*blockMXFP4)
	out := dst[len(dst) : len(dst)+nb*blockMXFP4]
	done := quantizeMXFP4AVX2(unsafe.SliceData(out), unsafe.SliceData(x), nb, &mxfp4Scales[0])
	return dst[:len(dst)+done*blockMXFP4], done
}
