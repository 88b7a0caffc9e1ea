package engine

import "github.com/gguftool/gguftool/gguf/quant"

// The vector kernels in use, set by vecmath_amd64.go; nil where the Go
// loops run (other builds, GGUFTOOL_KERNELS=generic). Each takes whole
// runs of eight values (the callers keep the last few):
//   - vecSoftmaxRuns: softmax's v_expf(x − m) in place, returning the
//     double sum of the runs' reduced lanes;
//   - vecSiluRuns and vecSwigluRuns: siluInto's and swiglu's ggml_v_silu;
//   - vecAttnAccum: out[d] += float32(v[j·stride+d]·p[j]) for each j in
//     order;
//   - vecScaleMul: out = float32(x·scale)·w (rmsNorm);
//   - vecScale: x *= s (softmax's normalisation);
//   - vecMad: y = fma(x, s, y) (the delta rule's state update);
//   - vecDotRows: out[p] = the F16 dot kernel's result for key row p of
//     k (dim floats converted from F16) and q (floats that are F16
//     values), dim a multiple of 32: attention's scores over a block of
//     cached keys;
//   - vecCvtF16Rows: rows of width F16 values, srcStride bytes apart, to
//     consecutive rows of floats (width a multiple of 8), converted as
//     the F16 dot kernel converts.
var (
	vecSoftmaxRuns func(x []float32, m float32) float64
	vecSiluRuns    func(y, x []float32)
	vecSwigluRuns  func(y, g, u []float32)
	vecAttnAccum   func(out, v []float32, stride int, p []float32)
	vecScaleMul    func(out, x, w []float32, scale float32)
	vecScale       func(x []float32, s float32)
	vecMad         func(y, x []float32, s float32)
	vecDotRows     func(out, q, k []float32, dim int)
	vecCvtF16Rows  func(dst []float32, src []byte, srcStride, width int)
)

// roundF16 rounds x to F16 values, x[i] = F16ToF32(F32ToF16(x[i])): the
// Go loop, or its AVX2 kernel where the vector kernels run.
var roundF16 = roundF16Go

func roundF16Go(x []float32) {
	for i, v := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
}
