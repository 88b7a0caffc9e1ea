//go:build !amd64 || purego

package quant

import "unsafe"

// dotFloat32 is DotFloat32's kernel.
var dotFloat32 = func(x, y []float32) float32 {
	return vecDotF32(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x)),
		unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(y))), 4*len(x)), len(x))
}

// haveAVX2 is false where there are no vector kernels.
const haveAVX2 = false

// bestLevel is generic where there are no vector kernels.
const bestLevel = levelGeneric
