package quant

// Dot products of a weight row with a row of activations, as llama.cpp's
// CPU backend computes them inside a matrix multiplication: the
// activations are first converted to the weight type's vec_dot_type
// (QuantizeActivations), then each weight row is dotted with them
// (VecDot). The kernels follow ggml_vec_dot_*_generic in
// ggml/src/ggml-cpu/quants.c as the haswell build of libggml-cpu compiles
// them: integer sums per block, then float accumulation in which GCC
// (-ffp-contract=fast) fused every product that feeds an addition into an
// FMA. fmaf reproduces those fused operations exactly and every other
// product is rounded on its own, so results do not depend on GOAMD64.
//
// Each kernel's integer inner loop is a separate function over a fixed
// number of bytes (dotI8, dotNibbles, …). Those are the places
// an assembly version can take over: any code that returns the same
// integer leaves the float result bit-identical, while the float
// accumulation stays here as the reference.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
)

// dotKernel is a weight type's dot product: vt is the activation type
// llama.cpp pairs with it (type_traits_cpu[t].vec_dot_type), fn the
// kernel over nb weight blocks, whose lengths VecDot has checked.
type dotKernel struct {
	vt gguf.Type
	fn func(w, a []byte, nb int) float32
}

var dotKernels = [gguf.TypeCount]dotKernel{
	gguf.TypeF32:     {gguf.TypeF32, vecDotF32},
	gguf.TypeF16:     {gguf.TypeF16, vecDotF16},
	gguf.TypeBF16:    {gguf.TypeBF16, vecDotBF16},
	gguf.TypeQ4_0:    {gguf.TypeQ8_0, vecDotQ4_0},
	gguf.TypeQ4_1:    {gguf.TypeQ8_1, vecDotQ4_1},
	gguf.TypeQ5_0:    {gguf.TypeQ8_0, vecDotQ5_0},
	gguf.TypeQ5_1:    {gguf.TypeQ8_1, vecDotQ5_1},
	gguf.TypeQ8_0:    {gguf.TypeQ8_0, vecDotQ8_0},
	gguf.TypeMXFP4:   {gguf.TypeQ8_0, vecDotMXFP4},
	gguf.TypeNVFP4:   {gguf.TypeQ8_0, vecDotNVFP4},
	gguf.TypeIQ4_NL:  {gguf.TypeQ8_0, vecDotIQ4_NL},
	gguf.TypeQ1_0:    {gguf.TypeQ8_0, vecDotQ1_0},
	gguf.TypeQ2_0:    {gguf.TypeQ8_0, vecDotQ2_0},
	gguf.TypeQ2_K:    {gguf.TypeQ8_K, vecDotQ2_K},
	gguf.TypeQ3_K:    {gguf.TypeQ8_K, vecDotQ3_K},
	gguf.TypeQ4_K:    {gguf.TypeQ8_K, vecDotQ4_K},
	gguf.TypeQ5_K:    {gguf.TypeQ8_K, vecDotQ5_K},
	gguf.TypeQ6_K:    {gguf.TypeQ8_K, vecDotQ6_K},
	gguf.TypeTQ1_0:   {gguf.TypeQ8_K, vecDotTQ1_0},
	gguf.TypeTQ2_0:   {gguf.TypeQ8_K, vecDotTQ2_0},
	gguf.TypeIQ4_XS:  {gguf.TypeQ8_K, vecDotIQ4_XS},
	gguf.TypeIQ1_S:   {gguf.TypeQ8_K, vecDotIQ1_S},
	gguf.TypeIQ1_M:   {gguf.TypeQ8_K, vecDotIQ1_M},
	gguf.TypeIQ2_XXS: {gguf.TypeQ8_K, vecDotIQ2_XXS},
	gguf.TypeIQ2_XS:  {gguf.TypeQ8_K, vecDotIQ2_XS},
	gguf.TypeIQ2_S:   {gguf.TypeQ8_K, vecDotIQ2_S},
	gguf.TypeIQ3_XXS: {gguf.TypeQ8_K, vecDotIQ3_XXS},
	gguf.TypeIQ3_S:   {gguf.TypeQ8_K, vecDotIQ3_S},
}

// VecDotType is the activation type llama.cpp's CPU backend pairs with
// weight type t (type_traits_cpu[t].vec_dot_type), or gguf.TypeCount,
// which is not a valid type, when the backend has no dot product for t
// (Q8_1 and Q8_K, the activation formats, the integer types and F64).
func VecDotType(t gguf.Type) gguf.Type {
	if t >= gguf.TypeCount || dotKernels[t].fn == nil {
		return gguf.TypeCount
	}
	return dotKernels[t].vt
}

// VecDot returns the dot product of w, a row of n values of type t, with
// a, the activations already in VecDotType(t): bit for bit what
// ggml_vec_dot_<t>_<vt>_generic returns in llama.cpp's haswell CPU
// backend. For F32, F16 and BF16, which have only a SIMD kernel, it
// reproduces that kernel's lanes, reduction tree and tail, bit for bit
// too.
func VecDot(t gguf.Type, w, a []byte, n int) (float32, error) {
	vt := VecDotType(t)
	if vt == gguf.TypeCount {
		return 0, fmt.Errorf("quant: no dot product for %s", t)
	}
	// Two divisions, not seven: the checks run before every row's dot
	// product, and on short rows they cost as much as the kernel.
	bs, vbs := int(t.BlockSize()), int(vt.BlockSize())
	nb, na := n/bs, n/vbs
	switch {
	case n < 0 || nb*bs != n || na*vbs != n:
		return 0, fmt.Errorf("quant: %d values are not whole %s and %s blocks", n, t, vt)
	case len(w) != nb*int(t.BlockBytes()):
		return 0, fmt.Errorf("quant: %d bytes of %s weights for %d values, want %d", len(w), t, n, nb*int(t.BlockBytes()))
	case len(a) != na*int(vt.BlockBytes()):
		return 0, fmt.Errorf("quant: %d bytes of %s activations for %d values, want %d", len(a), vt, n, na*int(vt.BlockBytes()))
	}
	return dotKernels[t].fn(w, a, nb), nil
}

// DotF32 returns Σ dequant(w)[i]·x[i] for w, whole blocks of type t, and
// x, one float per value: the products rounded to float32 and summed in
// element order, with no activation quantization. It decodes a few blocks
// at a time into a buffer on the stack, never the whole row.
func DotF32(t gguf.Type, w []byte, x []float32) (float32, error) {
	if !CanDequantize(t) {
		return 0, fmt.Errorf("quant: dequantizing %s is not supported", t)
	}
	bs, bb := int(t.BlockSize()), int(t.BlockBytes())
	if len(w)%bb != 0 || len(w)/bb*bs != len(x) {
		return 0, fmt.Errorf("quant: %d bytes of %s do not hold the %d values of x", len(w), t, len(x))
	}
	var buf [dotF32Chunk]float32
	step := dotF32Chunk / bs * bb // every block size divides the chunk
	var sum float32
	for off := 0; off < len(w); off += step {
		src := w[off:min(off+step, len(w))]
		vals := dequantizeDirect(t, buf[:0], src)
		if len(vals) != len(src)/bb*bs {
			return 0, fmt.Errorf("quant: DotF32 does not support %s", t)
		}
		xs := x[off/bb*bs:]
		for i, v := range vals {
			sum = float32(sum + float32(v*xs[i]))
		}
	}
	return sum, nil
}

// dotF32Chunk is the number of values DotF32 decodes at a time: one
// super-block, or a run of smaller blocks of the same size.
const dotF32Chunk = 256

// dequantizeDirect is the codec table's dequantizer for t, called
// directly: through the table's func value the compiler could not see
// that DotF32's buffer stays on the stack. It appends nothing for a type
// it does not list.
func dequantizeDirect(t gguf.Type, dst []float32, src []byte) []float32 {
	switch t {
	case gguf.TypeF32:
		return dequantizeF32(dst, src)
	case gguf.TypeF16:
		return dequantizeF16(dst, src)
	case gguf.TypeBF16:
		return dequantizeBF16(dst, src)
	case gguf.TypeQ8_0:
		return dequantizeQ8_0(dst, src)
	case gguf.TypeMXFP4:
		return dequantizeMXFP4(dst, src)
	case gguf.TypeQ4_0:
		return dequantizeQ4_0(dst, src)
	case gguf.TypeQ4_1:
		return dequantizeQ4_1(dst, src)
	case gguf.TypeQ5_0:
		return dequantizeQ5_0(dst, src)
	case gguf.TypeQ5_1:
		return dequantizeQ5_1(dst, src)
	case gguf.TypeQ2_K:
		return dequantizeQ2_K(dst, src)
	case gguf.TypeQ3_K:
		return dequantizeQ3_K(dst, src)
	case gguf.TypeQ4_K:
		return dequantizeQ4_K(dst, src)
	case gguf.TypeQ5_K:
		return dequantizeQ5_K(dst, src)
	case gguf.TypeQ6_K:
		return dequantizeQ6_K(dst, src)
	case gguf.TypeQ8_K:
		return dequantizeQ8_K(dst, src)
	case gguf.TypeIQ1_S:
		return dequantizeIQ1_S(dst, src)
	case gguf.TypeIQ1_M:
		return dequantizeIQ1_M(dst, src)
	case gguf.TypeIQ2_XXS:
		return dequantizeIQ2_XXS(dst, src)
	case gguf.TypeIQ2_XS:
		return dequantizeIQ2_XS(dst, src)
	case gguf.TypeIQ2_S:
		return dequantizeIQ2_S(dst, src)
	case gguf.TypeIQ3_XXS:
		return dequantizeIQ3_XXS(dst, src)
	case gguf.TypeIQ3_S:
		return dequantizeIQ3_S(dst, src)
	case gguf.TypeIQ4_NL:
		return dequantizeIQ4_NL(dst, src)
	case gguf.TypeIQ4_XS:
		return dequantizeIQ4_XS(dst, src)
	case gguf.TypeTQ1_0:
		return dequantizeTQ1_0(dst, src)
	case gguf.TypeTQ2_0:
		return dequantizeTQ2_0(dst, src)
	case gguf.TypeNVFP4:
		return dequantizeNVFP4(dst, src)
	case gguf.TypeQ1_0:
		return dequantizeQ1_0(dst, src)
	case gguf.TypeQ2_0:
		return dequantizeQ2_0(dst, src)
	}
	return dst
}

// fmaf is C's fmaf, a·b+c rounded once to float32: what an FMA
// instruction computes where GCC contracted `s += a*b`. The product is
// exact in float64, so the float64 sum is a·b+c rounded once to 53 bits;
// rounding that to float32 is right unless it landed exactly on a
// midpoint between two float32s (or in float32's subnormal range, where
// midpoints have more trailing zeros), and there rounding to odd, which
// keeps the sign of the discarded part, makes it right.
func fmaf(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	s := p + float64(c)
	bits := math.Float64bits(s)
	if bits&(1<<29-1) != 1<<28 && bits&0x7FF0000000000000 >= (1023-126)<<52 {
		return float32(s)
	}
	return float32(roundToOdd(p, float64(c), s))
}

// roundToOdd turns s = p+c rounded to nearest into p+c rounded to odd:
// when the sum was inexact and s is even, it steps one unit towards the
// exact sum (Boldo and Melquiond), so that rounding it again to float32 is
// as if the exact sum were rounded.
func roundToOdd(p, c, s float64) float64 {
	bb := s - p
	err := (p - (s - bb)) + (c - bb) // TwoSum: exactly p+c−s
	bits := math.Float64bits(s)
	if err == 0 || bits&1 == 1 || math.IsInf(s, 0) || math.IsNaN(s) {
		return s
	}
	if (err > 0) == (s > 0) {
		bits++
	} else {
		bits--
	}
	return math.Float64frombits(bits)
}

func f32At(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// Dotter is VecDot for one weight type and row length, resolved once so a
// matrix product can call it per row without re-checking the type.
type Dotter struct {
	t              gguf.Type
	nb             int
	wBytes, aBytes int
	fn             func(w, a []byte, nb int) float32
}

// NewDotter checks what VecDot checks about t and n, once.
func NewDotter(t gguf.Type, n int) (Dotter, error) {
	vt := VecDotType(t)
	if vt == gguf.TypeCount {
		return Dotter{}, fmt.Errorf("quant: no dot product for %s", t)
	}
	bs, vbs := int(t.BlockSize()), int(vt.BlockSize())
	if n <= 0 || n%bs != 0 || n%vbs != 0 {
		return Dotter{}, fmt.Errorf("quant: %d values are not whole %s and %s blocks", n, t, vt)
	}
	return Dotter{t: t, nb: n / bs, wBytes: n / bs * int(t.BlockBytes()), aBytes: n / vbs * int(vt.BlockBytes()), fn: dotKernels[t].fn}, nil
}

// Dot is VecDot(t, w, a, n). It panics if w or a has the wrong length,
// which only a caller that did not size them from the same n can cause.
func (d Dotter) Dot(w, a []byte) float32 {
	if len(w) != d.wBytes || len(a) != d.aBytes {
		panic(fmt.Sprintf("quant: Dotter(%s): %d weight and %d activation bytes, want %d and %d", d.t, len(w), len(a), d.wBytes, d.aBytes))
	}
	return d.fn(w, a, d.nb)
}

// DotFloat32 is VecDot(F32) on float slices: ggml_vec_dot_f32's arithmetic
// over the first len(x) values of x and y.
func DotFloat32(x, y []float32) float32 {
	y = y[:len(x)]
	return dotFloat32(x, y)
}

// FMA32 is the float32 fused multiply-add a·b+c, rounded once, as the FMA
// instructions ggml's kernels use compute it.
func FMA32(a, b, c float32) float32 { return fmaf(a, b, c) }

// dotKernels4 holds kernels that dot four weight rows, stride bytes apart,
// with one row of activations at once, each row's result bit-identical to
// its single-row kernel.
var dotKernels4 [gguf.TypeCount]func(w []byte, stride int, a []byte, nb int, out *[4]float32)

// Dot4 sets out[r] to Dot(w[r·stride:][:row bytes], a) for r = 0..3.
func (d Dotter) Dot4(w []byte, stride int, a []byte, out *[4]float32) {
	if len(a) != d.aBytes || stride < d.wBytes || len(w) < 3*stride+d.wBytes {
		panic(fmt.Sprintf("quant: Dotter(%s).Dot4: %d weight bytes at stride %d and %d activation bytes, want rows of %d and %d",
			d.t, len(w), stride, len(a), d.wBytes, d.aBytes))
	}
	if k := dotKernels4[d.t]; k != nil {
		k(w, stride, a, d.nb, out)
		return
	}
	for r := range out {
		out[r] = d.fn(w[r*stride:r*stride+d.wBytes], a, d.nb)
	}
}
