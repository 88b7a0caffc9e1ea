//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

// AVX2 kernels for the 32-value legacy types (dot_legacy_amd64.s), bit
// for bit the Go kernels in dot_legacy.go.

//go:noescape
func dotQ4_0AVX2(w, a *byte, nb int) float32

// vecDotQ4_0AVX2 is vecDotQ4_0 on AVX2, bit for bit.
func vecDotQ4_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ4_0-1]
	_ = a[nb*blockQ8_0-1]
	return dotQ4_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ4_1AVX2(w, a *byte, nb int) float32

// vecDotQ4_1AVX2 is vecDotQ4_1 on AVX2, bit for bit.
func vecDotQ4_1AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ4_1-1]
	_ = a[nb*blockQ8_1-1]
	return dotQ4_1AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ5_0AVX2(w, a *byte, nb int) float32

// vecDotQ5_0AVX2 is vecDotQ5_0 on AVX2, bit for bit.
func vecDotQ5_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ5_0-1]
	_ = a[nb*blockQ8_0-1]
	return dotQ5_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

//go:noescape
func dotQ5_1AVX2(w, a *byte, nb int) float32

// vecDotQ5_1AVX2 is vecDotQ5_1 on AVX2, bit for bit.
func vecDotQ5_1AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ5_1-1]
	_ = a[nb*blockQ8_1-1]
	return dotQ5_1AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// dotQ8_0AVX2 is the Q8_0 kernel, built like the legacy ones: four
// blocks reduced by one horizontal-add tree, their chain steps in block
// order (dot_amd64.go registers it with the four-row Q8_0 kernel).
//
//go:noescape
func dotQ8_0AVX2(w, a *byte, nb int) float32

// vecDotQ8_0AVX2 is vecDotQ8_0 on AVX2, bit for bit (see dotQ8_0AVX2).
func vecDotQ8_0AVX2(w, a []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	_ = w[nb*blockQ8_0-1]
	_ = a[nb*blockQ8_0-1]
	return dotQ8_0AVX2(unsafe.SliceData(w), unsafe.SliceData(a), nb)
}

// init registers the legacy kernels when the AVX2 level is in use.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeQ4_0].fn = vecDotQ4_0AVX2
	dotKernels[gguf.TypeQ4_1].fn = vecDotQ4_1AVX2
	dotKernels[gguf.TypeQ5_0].fn = vecDotQ5_0AVX2
	dotKernels[gguf.TypeQ5_1].fn = vecDotQ5_1AVX2
}
