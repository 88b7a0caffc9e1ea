package engine

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
//   - vecMad: y = fma(x, s, y) (the delta rule's state update).
var (
	vecSoftmaxRuns func(x []float32, m float32) float64
	vecSiluRuns    func(y, x []float32)
	vecSwigluRuns  func(y, g, u []float32)
	vecAttnAccum   func(out, v []float32, stride int, p []float32)
	vecScaleMul    func(out, x, w []float32, scale float32)
	vecScale       func(x []float32, s float32)
	vecMad         func(y, x []float32, s float32)
)
