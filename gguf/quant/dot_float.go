package quant

// The float types' dot products. llama.cpp has no generic C for them: the
// haswell backend runs ggml_vec_dot_f32/f16/bf16 (ggml-cpu/vec.cpp) with
// AVX2, and these reproduce that arithmetic lane by lane. Each chunk of 32
// values goes into its own one of 32 float accumulators (four registers of
// eight lanes), the accumulators are reduced by a fixed tree, and the
// values past the last whole chunk are added after that.

import "math"

const simdChunk = 32

// vecDotF32: fused multiply-adds into the accumulators, the hadd
// reduction, then the tail as GCC compiled it: rounded products added one
// at a time in runs of eight and four, the last one to three fused.
func vecDotF32(w, a []byte, n int) float32 {
	x, y := w[:4*n], a[:4*n]
	np := n &^ (simdChunk - 1)
	var acc [simdChunk]float32
	for i := 0; i < np; i += simdChunk {
		for l := range acc {
			acc[l] = fmaf(f32At(x[4*(i+l):]), f32At(y[4*(i+l):]), acc[l])
		}
	}
	sumf := reduceHadd(&acc)
	i := np
	for ; i < n&^3; i++ {
		sumf = float32(sumf + float32(f32At(x[4*i:])*f32At(y[4*i:])))
	}
	for ; i < n; i++ {
		sumf = fmaf(f32At(x[4*i:]), f32At(y[4*i:]), sumf)
	}
	return sumf
}

// vecDotF16: the products of two halves are exact in float32, so the fused
// multiply-adds are plain additions. The tail is summed in double.
func vecDotF16(w, a []byte, n int) float32 {
	x, y := w[:2*n], a[:2*n]
	np := n &^ (simdChunk - 1)
	var acc [simdChunk]float32
	for i := 0; i < np; i += simdChunk {
		for l := range acc {
			acc[l] += float32(f16At(x[2*(i+l):]) * f16At(y[2*(i+l):]))
		}
	}
	sumf := float64(reduceHadd(&acc))
	for i := np; i < n; i++ {
		sumf += float64(float32(f16At(x[2*i:]) * f16At(y[2*i:])))
	}
	return float32(sumf)
}

// vecDotBF16: GCC fused the kernel's multiply and add, which differs from
// rounding the exact bfloat16 product only where it under- or overflows.
// The reduction ends with movehl instead of hadd, and the tail is summed
// in double.
func vecDotBF16(w, a []byte, n int) float32 {
	x, y := w[:2*n], a[:2*n]
	np := n &^ (simdChunk - 1)
	var acc [simdChunk]float32
	for i := 0; i < np; i += simdChunk {
		for l := range acc {
			acc[l] = fmaf(bf16At(x[2*(i+l):]), bf16At(y[2*(i+l):]), acc[l])
		}
	}
	sumf := float64(reduceMovehl(&acc))
	for i := np; i < n; i++ {
		sumf += float64(float32(bf16At(x[2*i:]) * bf16At(y[2*i:])))
	}
	return float32(sumf)
}

// reduceLanes adds the four registers of accumulators into one, pairing
// the first with the third and the second with the fourth.
func reduceLanes(acc *[simdChunk]float32) (t [8]float32) {
	for l := range t {
		t[l] = (acc[l] + acc[16+l]) + (acc[8+l] + acc[24+l])
	}
	return t
}

// reduceHadd is GGML_F32x8_REDUCE: the register's halves added, then two
// horizontal adds.
func reduceHadd(acc *[simdChunk]float32) float32 {
	t := reduceLanes(acc)
	var u [4]float32
	for k := range u {
		u[k] = t[k] + t[k+4]
	}
	return (u[0] + u[1]) + (u[2] + u[3])
}

// reduceMovehl is ggml_vec_dot_bf16's reduction: the halves added, then
// the upper pair onto the lower, then lane 1 onto lane 0.
func reduceMovehl(acc *[simdChunk]float32) float32 {
	t := reduceLanes(acc)
	var u [4]float32
	for k := range u {
		u[k] = t[k] + t[k+4]
	}
	return (u[0] + u[2]) + (u[1] + u[3])
}

func bf16At(b []byte) float32 { return math.Float32frombits(uint32(b[0])<<16 | uint32(b[1])<<24) }
