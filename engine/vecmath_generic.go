//go:build !amd64 || purego

package engine

// This build has no vector kernels for the float loops of prefill: every
// variable stays nil and the Go loops run (see vecmath_amd64.go).
var (
	vecSoftmaxRuns func(x []float32, m float32) float64
	vecSiluRuns    func(y, x []float32)
	vecSwigluRuns  func(y, g, u []float32)
	vecAttnAccum   func(out, v []float32, stride int, p []float32)
	vecScaleMul    func(out, x, w []float32, scale float32)
	vecScale       func(x []float32, s float32)
)
