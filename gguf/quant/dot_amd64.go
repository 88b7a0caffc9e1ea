//go:build amd64 && !purego

package quant

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/gguftool/gguftool/gguf"
)

// Vector kernels for amd64, chosen at start-up when the CPU has AVX2, FMA
// and F16C (the haswell level llama.cpp's reference backend targets). Each
// returns bit for bit what the Go kernel it replaces returns: the integer
// sums are exact whatever the instruction order, F16 scales convert
// exactly with VCVTPH2PS, and the float accumulation is the same sequence
// of rounded products and fused multiply-adds. GGUFTOOL_KERNELS=generic
// keeps the pure-Go kernels (the reference), as does the purego build tag.

//go:noescape
func dotF32AVX2(x, y *float32, n int) float32

func vecDotF32AVX2(w, a []byte, n int) float32 {
	if n == 0 {
		return 0
	}
	_ = w[4*n-1]
	_ = a[4*n-1]
	return dotF32AVX2((*float32)(unsafe.Pointer(unsafe.SliceData(w))), (*float32)(unsafe.Pointer(unsafe.SliceData(a))), n)
}

// dotFloat32 is DotFloat32's kernel.
var dotFloat32 = func(x, y []float32) float32 {
	return vecDotF32(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x)),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(y))), 4*len(x)), len(x))
}

//go:noescape
func dotQ8_0x4AVX2(w *byte, stride int, a *byte, nb int, out *[4]float32)

func vecDotQ8_0x4AVX2(w []byte, stride int, a []byte, nb int, out *[4]float32) {
	if nb == 0 {
		*out = [4]float32{}
		return
	}
	_ = w[3*stride+nb*blockQ8_0-1]
	_ = a[nb*blockQ8_0-1]
	dotQ8_0x4AVX2(unsafe.SliceData(w), stride, unsafe.SliceData(a), nb, out)
}

// haveAVX2 is whether the vector kernels run on this CPU.
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// haveAVX512 is whether the AVX-512 kernels run: they use 512-bit
// registers and byte and word instructions (F, BW), their 256-bit forms
// (VL) and VPDPWSSD (VNNI); x/sys/cpu reports AVX-512 only where the OS
// saves the registers.
var haveAVX512 = haveAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// bestLevel is the highest kernel level this CPU runs.
var bestLevel = func() int {
	if haveAVX512 {
		return levelAVX512
	}
	if haveAVX2 {
		return levelAVX2
	}
	return levelGeneric
}()

// Each file of vector kernels registers them in an init function when
// its level is in use; this one registers Q8_0 and F32.
func init() {
	if !useAVX2() {
		return
	}
	dotKernels[gguf.TypeQ8_0].fn = vecDotQ8_0AVX2
	dotKernels4[gguf.TypeQ8_0] = vecDotQ8_0x4AVX2
	dotKernels[gguf.TypeF32].fn = vecDotF32AVX2
	dotFloat32 = func(x, y []float32) float32 {
		if len(x) == 0 {
			return 0
		}
		return dotF32AVX2(unsafe.SliceData(x), unsafe.SliceData(y), len(x))
	}
}
