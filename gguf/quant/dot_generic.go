//go:build !amd64 || purego

package quant

// haveAVX2 is false where there are no vector kernels.
const haveAVX2 = false
