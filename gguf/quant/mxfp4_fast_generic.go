//go:build !amd64 || purego

package quant

// quantizeBlocksMXFP4Vec quantizes no blocks without a vector kernel:
// quantizeBlockMXFP4 does them all.
func quantizeBlocksMXFP4Vec(dst []byte, _ []float32) ([]byte, int) { return dst, 0 }
