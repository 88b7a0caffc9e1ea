//go:build amd64 && !purego

package engine

import (
	"math"
	"unsafe"

	"github.com/gguftool/gguftool/gguf/quant"
)

// Vector kernels (AVX2 + FMA, vecmath_amd64.s) for the float loops of
// prefill outside the matrix products: the exponential of softmax and
// SiLU, the attention value sum and rmsNorm's scaling. Each is bit for bit
// the Go loop it replaces, which stays in place as the reference and runs
// whenever its variable is nil: on other builds, and when
// GGUFTOOL_KERNELS=generic.

//go:noescape
func softmaxRunsAVX2(x *float32, n int, m float32, tab *[15][8]uint32) float64

//go:noescape
func siluRunsAVX2(y, x *float32, n int, tab *[15][8]uint32)

//go:noescape
func swigluRunsAVX2(y, gate, u *float32, n int, tab *[15][8]uint32)

//go:noescape
func attnAccumAVX2(out *float32, hd int, v *float32, stride int, p *float32, n int)

//go:noescape
func dotRowsAVX2(out, q, k *float32, dim, n int)

//go:noescape
func roundF16AVX2(x *float32, n int)

//go:noescape
func cvtF16RowsAVX2(dst *float32, src *byte, srcStride, width, rows int)

//go:noescape
func scaleMulAVX2(out, x, w *float32, n int, scale float32)

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func madAVX2(y, x *float32, n int, s float32)

// expTab holds vExpf's constants, each in eight lanes, in the order the
// assembly's T* offsets name them; they are built from the Go constants so
// that both sides use the same values.
var expTab = func() (t [15][8]uint32) {
	f := math.Float32bits
	vals := [...]uint32{
		f(expRound), f(expLog2e), f(expLn2Hi), f(expLn2Lo),
		f(expC5), f(expC4), f(expC3), f(expC2), f(expC1),
		f(1), 0x7fffffff, f(126), f(192), 0x82000000, 0x7f000000,
	}
	for i, v := range vals {
		for l := range t[i] {
			t[i][l] = v
		}
	}
	return t
}()

// softmaxRunsVec is vecSoftmaxRuns on AVX2; len(x) must be a multiple of 8.
func softmaxRunsVec(x []float32, m float32) float64 {
	n := len(x) &^ 7
	if n == 0 {
		return 0
	}
	return softmaxRunsAVX2(unsafe.SliceData(x), n, m, &expTab)
}

// siluRunsVec is vecSiluRuns on AVX2; len(y) must be a multiple of 8.
func siluRunsVec(y, x []float32) {
	n := len(y) &^ 7
	if n == 0 {
		return
	}
	_ = x[n-1]
	siluRunsAVX2(unsafe.SliceData(y), unsafe.SliceData(x), n, &expTab)
}

// swigluRunsVec is vecSwigluRuns on AVX2; len(y) must be a multiple of 8.
func swigluRunsVec(y, g, u []float32) {
	n := len(y) &^ 7
	if n == 0 {
		return
	}
	_ = g[n-1]
	_ = u[n-1]
	swigluRunsAVX2(unsafe.SliceData(y), unsafe.SliceData(g), unsafe.SliceData(u), n, &expTab)
}

// attnAccumVec is vecAttnAccum on AVX2; len(out) must be a multiple of 8.
func attnAccumVec(out, v []float32, stride int, p []float32) {
	hd := len(out) &^ 7
	if hd == 0 || len(p) == 0 {
		return
	}
	_ = v[(len(p)-1)*stride+hd-1]
	attnAccumAVX2(unsafe.SliceData(out), hd, unsafe.SliceData(v), stride, unsafe.SliceData(p), len(p))
}

// dotRowsVec is vecDotRows on AVX2; dim must be a multiple of 32.
func dotRowsVec(out, q, k []float32, dim int) {
	if len(out) == 0 {
		return
	}
	_ = q[dim-1]
	_ = k[len(out)*dim-1]
	dotRowsAVX2(unsafe.SliceData(out), unsafe.SliceData(q), unsafe.SliceData(k), dim, len(out))
}

// roundF16Vec is vecRoundF16 on AVX2: the runs of eight, then the Go
// loop's last few.
func roundF16Vec(x []float32) {
	n := len(x) &^ 7
	if n > 0 {
		roundF16AVX2(unsafe.SliceData(x), n)
	}
	roundF16Go(x[n:])
}

// cvtF16RowsVec is vecCvtF16Rows on AVX2; width must be a multiple of 8.
func cvtF16RowsVec(dst []float32, src []byte, srcStride, width int) {
	rows := len(dst) / width
	if rows == 0 {
		return
	}
	_ = src[(rows-1)*srcStride+2*width-1]
	cvtF16RowsAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), srcStride, width, rows)
}

// scaleMulVec is vecScaleMul on AVX2; len(out) must be a multiple of 8.
func scaleMulVec(out, x, w []float32, scale float32) {
	n := len(out) &^ 7
	if n == 0 {
		return
	}
	_ = x[n-1]
	_ = w[n-1]
	scaleMulAVX2(unsafe.SliceData(out), unsafe.SliceData(x), unsafe.SliceData(w), n, scale)
}

// scaleVec is vecScale on AVX2; len(x) must be a multiple of 8.
func scaleVec(x []float32, s float32) {
	n := len(x) &^ 7
	if n == 0 {
		return
	}
	scaleAVX2(unsafe.SliceData(x), n, s)
}

// madVec is vecMad on AVX2; len(y) must be a multiple of 8.
func madVec(y, x []float32, s float32) {
	n := len(y) &^ 7
	if n == 0 {
		return
	}
	_ = x[n-1]
	madAVX2(unsafe.SliceData(y), unsafe.SliceData(x), n, s)
}

// init enables the kernels where the dot kernels run at the AVX2 level
// or above (the CPU has AVX2, FMA and F16C and GGUFTOOL_KERNELS allows
// it).
func init() {
	if !quant.AVX2Kernels() {
		return
	}
	vecSoftmaxRuns = softmaxRunsVec
	vecSiluRuns = siluRunsVec
	vecSwigluRuns = swigluRunsVec
	vecAttnAccum = attnAccumVec
	vecDotRows = dotRowsVec
	vecCvtF16Rows = cvtF16RowsVec
	roundF16 = roundF16Vec
	vecScaleMul = scaleMulVec
	vecScale = scaleVec
	vecMad = madVec
}
