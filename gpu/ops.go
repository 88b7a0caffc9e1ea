package gpu

import (
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
)

// The engine's operations other than matrix products, attention and the
// recurrent layers (shaders/src/ops_*.comp): each records one or a few
// dispatches computing what the CPU backend's method of the same name
// computes, within the tolerances ops_test.go states. Shapes are rows of
// floats from each Span's offset, as the engine's Backend takes them; a
// weight vector (norm weights, a bias) is a Span of float32 too.

// eltwiseWorkgroup is the elementwise kernels' workgroup size.
const (
	eltwiseWorkgroup = 256
	// reduceWorkgroup is the row reductions' (norms, argmax, the finite
	// check): a power of two, for the shared-memory tree.
	reduceWorkgroup = 256
	// finiteGroups bounds the finite check's workgroups: each invocation
	// scans ⌈n / (finiteGroups·reduceWorkgroup)⌉ values at most.
	finiteGroups = 4096
	// ropeWorkgroup is the invocations of one (row, head), a rotated pair
	// each (looping where a head has more).
	ropeWorkgroup = 64
)

// maxEltwiseGroups bounds an elementwise dispatch (to what every device
// dispatches): the invocations loop over the values, so any count runs
// in it. A variable so that the tests can make the loop go round.
var maxEltwiseGroups uint32 = 65535

// spanUse is a Span an operation reads or writes n floats of.
type spanUse struct {
	what string
	s    Span
	n    int
}

// checkSpans refuses a missing buffer or a span that runs past its
// buffer, naming the operation.
func checkSpans(op string, uses ...spanUse) error {
	for _, u := range uses {
		if u.s.Buf == nil {
			return fmt.Errorf("gpu: %s: %s has no buffer", op, u.what)
		}
		if u.s.Off < 0 || u.n < 0 || int64(u.s.Off+u.n)*4 > u.s.Buf.size || u.s.Off+u.n > math.MaxUint32 {
			return fmt.Errorf("gpu: %s: %s [%d, %d) runs past its buffer of %d floats", op, u.what, u.s.Off, u.s.Off+u.n, u.s.Buf.size/4)
		}
	}
	return nil
}

// checkShape refuses negative counts and products that would overflow
// the kernels' 32-bit indices.
func checkShape(op string, dims ...int) error {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return fmt.Errorf("gpu: %s: a negative count (%v)", op, dims)
		}
		n *= int64(d)
		if n > math.MaxUint32/2 {
			return fmt.Errorf("gpu: %s: %v values is more than one dispatch indexes", op, dims)
		}
	}
	return nil
}

// reductionKernel is a row reduction's pipeline: the _sg variant where
// the device reduces with subgroup operations.
func (d *Device) reductionKernel(name string, bindings, pushBytes int, spec ...uint32) (*Kernel, error) {
	if d.UsesSubgroups() {
		name += "_sg"
	}
	return d.Kernel(name, bindings, pushBytes, append([]uint32{reduceWorkgroup}, spec...)...)
}

// orDummy is b, or the device's dummy buffer where a kernel's binding
// goes unused.
func (b *Batch) orDummy(buf *Buffer) *Buffer {
	if buf == nil {
		return b.r.d.dummyBuffer()
	}
	return buf
}

func f32(v float32) uint32 { return math.Float32bits(v) }

// eltwisePush is ops_eltwise.comp's push constants.
type eltwisePush struct {
	n, dOff, aOff, bOff, width, dStride, aStride uint32
	p                                            [4]float32
}

// eltwise records elementwise kernel op over push.n values; a and c are
// nil where the operation does not read them.
func (b *Batch) eltwise(op string, push eltwisePush, dst, a, c *Buffer) error {
	if push.n == 0 {
		return nil
	}
	k, err := b.r.d.Kernel("ops_"+op, 3, 48, eltwiseWorkgroup)
	if err != nil {
		return err
	}
	groups := min((push.n+eltwiseWorkgroup-1)/eltwiseWorkgroup, maxEltwiseGroups)
	words := []uint32{push.n, push.dOff, push.aOff, push.bOff, push.width, push.dStride, push.aStride,
		f32(push.p[0]), f32(push.p[1]), f32(push.p[2]), f32(push.p[3]), 0}
	return b.Dispatch(k, [3]uint32{groups, 1, 1}, words, dst, b.orDummy(a), b.orDummy(c))
}

// elementwise2 records dst = a op c over n values.
func (b *Batch) elementwise2(op string, dst, a, c Span, n int) error {
	if err := checkShape(op, n); err != nil {
		return err
	}
	if err := checkSpans(op, spanUse{"dst", dst, n}, spanUse{"a", a, n}, spanUse{"b", c, n}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(n), dOff: uint32(dst.Off), aOff: uint32(a.Off), bOff: uint32(c.Off)}
	return b.eltwise(op, push, dst.Buf, a.Buf, c.Buf)
}

// AddBias adds bias (width values) to each row of y (rows × width).
func (b *Batch) AddBias(y, bias Span, rows, width int) error {
	if err := checkShape("AddBias", rows, width); err != nil {
		return err
	}
	if err := checkSpans("AddBias", spanUse{"y", y, rows * width}, spanUse{"bias", bias, width}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(rows * width), dOff: uint32(y.Off), bOff: uint32(bias.Off), width: uint32(width)}
	return b.eltwise("add_bias", push, y.Buf, nil, bias.Buf)
}

// Add sets dst = x + y over n values; dst may be x or y.
func (b *Batch) Add(dst, x, y Span, n int) error { return b.elementwise2("add", dst, x, y, n) }

// Mul sets dst = x · y over n values; dst may be x or y.
func (b *Batch) Mul(dst, x, y Span, n int) error { return b.elementwise2("mul", dst, x, y, n) }

// Scale sets x *= s over n values.
func (b *Batch) Scale(x Span, s float32, n int) error {
	if err := checkShape("Scale", n); err != nil {
		return err
	}
	if err := checkSpans("Scale", spanUse{"x", x, n}); err != nil {
		return err
	}
	return b.eltwise("scale", eltwisePush{n: uint32(n), dOff: uint32(x.Off), p: [4]float32{s}}, x.Buf, nil, nil)
}

// CopyRows is the engine's Copy (Batch.Copy copies bytes): rows of width
// values, src's row r at srcOff + r·srcStride to dst's at dstOff +
// r·dstStride. The rows copied must not overlap those written.
func (b *Batch) CopyRows(dst Span, dstOff, dstStride int, src Span, srcOff, srcStride, width, rows int) error {
	if err := checkShape("CopyRows", rows, width); err != nil {
		return err
	}
	if rows == 0 || width == 0 {
		return nil
	}
	if dstOff < 0 || srcOff < 0 || dstStride < 0 || srcStride < 0 {
		return fmt.Errorf("gpu: CopyRows: negative offsets or strides (%d, %d, %d, %d)", dstOff, dstStride, srcOff, srcStride)
	}
	dst, src = dst.At(dstOff), src.At(srcOff)
	if err := checkSpans("CopyRows", spanUse{"dst", dst, (rows-1)*dstStride + width}, spanUse{"src", src, (rows-1)*srcStride + width}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(rows * width), dOff: uint32(dst.Off), aOff: uint32(src.Off), width: uint32(width),
		dStride: uint32(dstStride), aStride: uint32(srcStride)}
	return b.eltwise("copy_rows", push, dst.Buf, src.Buf, nil)
}

// Sigmoid sets x = σ(x) over n values.
func (b *Batch) Sigmoid(x Span, n int) error {
	if err := checkShape("Sigmoid", n); err != nil {
		return err
	}
	if err := checkSpans("Sigmoid", spanUse{"x", x, n}); err != nil {
		return err
	}
	return b.eltwise("sigmoid", eltwisePush{n: uint32(n), dOff: uint32(x.Off)}, x.Buf, nil, nil)
}

// GateSigmoid sets x *= σ(g) over n values.
func (b *Batch) GateSigmoid(x, g Span, n int) error {
	if err := checkShape("GateSigmoid", n); err != nil {
		return err
	}
	if err := checkSpans("GateSigmoid", spanUse{"x", x, n}, spanUse{"g", g, n}); err != nil {
		return err
	}
	return b.eltwise("gate_sigmoid", eltwisePush{n: uint32(n), dOff: uint32(x.Off), aOff: uint32(g.Off)}, x.Buf, g.Buf, nil)
}

// ScaleRowsSigmoid multiplies row r of x (rows × width) by σ(g[r]).
func (b *Batch) ScaleRowsSigmoid(x, g Span, rows, width int) error {
	if err := checkShape("ScaleRowsSigmoid", rows, width); err != nil {
		return err
	}
	if err := checkSpans("ScaleRowsSigmoid", spanUse{"x", x, rows * width}, spanUse{"g", g, rows}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(rows * width), dOff: uint32(x.Off), aOff: uint32(g.Off), width: uint32(width)}
	return b.eltwise("scale_rows_sigmoid", push, x.Buf, g.Buf, nil)
}

// GLUKind names a gated activation, as the engine's GLUKind.
type GLUKind uint8

// The gated activations.
const (
	GLUSwiGLU    GLUKind = iota // silu(gate)·up
	GLUSwiGLUOAI                // gpt-oss's clamped SwiGLU
	GLUSiTU                     // Kimi-K3's situ, with Beta and LinearBeta
)

// GLU is a gated activation with its parameters, as the engine's GLU.
type GLU struct {
	Kind             GLUKind
	Beta, LinearBeta float32 // situ's
}

// GLU writes act(gate, up) to dst, rows × width each.
func (b *Batch) GLU(act GLU, dst, gate, up Span, rows, width int) error {
	if err := checkShape("GLU", rows, width); err != nil {
		return err
	}
	n := rows * width
	if err := checkSpans("GLU", spanUse{"dst", dst, n}, spanUse{"gate", gate, n}, spanUse{"up", up, n}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(n), dOff: uint32(dst.Off), aOff: uint32(gate.Off), bOff: uint32(up.Off)}
	op := "swiglu"
	switch act.Kind {
	case GLUSwiGLU:
	case GLUSwiGLUOAI:
		op = "swiglu_oai"
	case GLUSiTU:
		// The reciprocals rounded as the CPU's situ rounds them.
		op = "situ"
		push.p = [4]float32{act.Beta, 1 / act.Beta, act.LinearBeta, 1 / act.LinearBeta}
	default:
		return fmt.Errorf("gpu: GLU: no kernel for activation kind %d", act.Kind)
	}
	return b.eltwise(op, push, dst.Buf, gate.Buf, up.Buf)
}

// SiLU writes silu(x) to dst, rows × width.
func (b *Batch) SiLU(dst, x Span, rows, width int) error {
	if err := checkShape("SiLU", rows, width); err != nil {
		return err
	}
	n := rows * width
	if err := checkSpans("SiLU", spanUse{"dst", dst, n}, spanUse{"x", x, n}); err != nil {
		return err
	}
	return b.eltwise("silu", eltwisePush{n: uint32(n), dOff: uint32(dst.Off), aOff: uint32(x.Off)}, dst.Buf, x.Buf, nil)
}

// rowNorm records a norm kernel over rows × width.
func (b *Batch) rowNorm(op string, dst, x, w Span, eps float32, rows, width int) error {
	if rows == 0 || width == 0 {
		return nil
	}
	k, err := b.r.d.reductionKernel("ops_"+op, 3, 32)
	if err != nil {
		return err
	}
	push := []uint32{uint32(rows), uint32(width), uint32(dst.Off), uint32(x.Off), uint32(w.Off), f32(eps), 0, 0}
	return b.Dispatch(k, rowGroups(rows), push, dst.Buf, x.Buf, b.orDummy(w.Buf))
}

// RMSNorm writes each row of x (rows × width), RMS-normalised and
// weighted by w (width values), to dst; dst may be x.
func (b *Batch) RMSNorm(dst, x, w Span, eps float32, rows, width int) error {
	if err := checkShape("RMSNorm", rows, width); err != nil {
		return err
	}
	n := rows * width
	if err := checkSpans("RMSNorm", spanUse{"dst", dst, n}, spanUse{"x", x, n}, spanUse{"w", w, width}); err != nil {
		return err
	}
	return b.rowNorm("rms_norm", dst, x, w, eps, rows, width)
}

// L2Norm scales each row of x (rows × width) to unit length (by
// 1/max(‖row‖, eps)).
func (b *Batch) L2Norm(x Span, eps float32, rows, width int) error {
	if err := checkShape("L2Norm", rows, width); err != nil {
		return err
	}
	if err := checkSpans("L2Norm", spanUse{"x", x, rows * width}); err != nil {
		return err
	}
	return b.rowNorm("l2_norm", x, x, Span{}, eps, rows, width)
}

// Argmax writes to dst, for each row of x (rows × width), the index of
// its largest value, the first among equals (as engine.Argmax): word r
// of dst is row r's index as a uint32 (math.Float32bits of the float
// read back). NaNs never win, and a row that starts with one gives 0, as
// on the CPU.
func (b *Batch) Argmax(dst, x Span, rows, width int) error {
	if err := checkShape("Argmax", rows, width); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	if width == 0 {
		return fmt.Errorf("gpu: Argmax of rows of no values")
	}
	if err := checkSpans("Argmax", spanUse{"dst", dst, rows}, spanUse{"x", x, rows * width}); err != nil {
		return err
	}
	k, err := b.r.d.reductionKernel("ops_argmax", 2, 16)
	if err != nil {
		return err
	}
	return b.Dispatch(k, rowGroups(rows), []uint32{uint32(rows), uint32(width), uint32(x.Off), uint32(dst.Off)}, dst.Buf, x.Buf)
}

// CheckFinite writes to result's two words the first of x's n values
// that is NaN, infinite, or too large (2⁶⁴ or more in magnitude) for the
// next RMSNorm to square in float32: its index as an int32, −1 when there
// is none, and its value (0 when none). CheckFiniteResult reads them.
func (b *Batch) CheckFinite(x Span, n int, result Span) error {
	if err := checkShape("CheckFinite", n); err != nil {
		return err
	}
	if err := checkSpans("CheckFinite", spanUse{"x", x, n}, spanUse{"result", result, 2}); err != nil {
		return err
	}
	scan, err := b.r.d.reductionKernel("ops_check_finite", 2, 16, 0)
	if err != nil {
		return err
	}
	finish, err := b.r.d.reductionKernel("ops_check_finite", 2, 16, 1)
	if err != nil {
		return err
	}
	b.Zero(result, 1) // no value found yet
	push := []uint32{uint32(n), uint32(x.Off), uint32(result.Off), 0}
	if n > 0 {
		groups := min((uint32(n)+reduceWorkgroup-1)/reduceWorkgroup, finiteGroups)
		if err := b.Dispatch(scan, [3]uint32{groups, 1, 1}, push, result.Buf, x.Buf); err != nil {
			return err
		}
	}
	return b.Dispatch(finish, [3]uint32{1, 1, 1}, push, result.Buf, x.Buf)
}

// CheckFiniteResult decodes the two words CheckFinite wrote: the index
// (−1 for none) and the value there.
func CheckFiniteResult(words [2]float32) (i int, v float32) {
	i = int(int32(math.Float32bits(words[0])))
	if i < 0 {
		return -1, 0
	}
	return i, words[1]
}

// RopeJob says where RoPE turns the values of x, as the engine's RopeJob:
// rows of RowStride floats, each holding Heads heads HeadStride apart,
// whose first Dims values from Offset are rotated (in pairs, NEOX or
// normal style) at position Pos0+row, with the frequency scaling
// ggml_rope_ext takes (the engine's ropeScaling). Plain RoPE has
// FreqScale 1, ExtFactor 0 and AttnFactor 1.
type RopeJob struct {
	Rows, RowStride, Heads, HeadStride, Offset int
	Dims                                       int
	Pos0                                       int
	Base                                       float32
	FreqScale                                  float32 // 1/factor
	ExtFactor                                  float32 // YaRN's extrapolation mix: 1 for yarn, else 0
	AttnFactor                                 float32 // YaRN's magnitude scale
	BetaFast, BetaSlow                         float32 // YaRN's ramp
	CtxOrig                                    int     // the context the model was trained on
	Neox                                       bool
	Sections                                   []int // multi-section RoPE (four), or nil
}

// Rope rotates each head of each row of x in place at the row's
// position, as the CPU's ropeTable and rope: the same float32 angle, with
// cos and sin within a few ulps of the CPU's.
func (b *Batch) Rope(x Span, j RopeJob) error {
	if err := checkShape("Rope", j.Rows, j.Heads, j.Dims); err != nil {
		return err
	}
	if j.Rows == 0 || j.Heads == 0 || j.Dims < 2 {
		return nil
	}
	push, err := ropePush(j)
	if err != nil {
		return err
	}
	last := (j.Rows-1)*j.RowStride + (j.Heads-1)*j.HeadStride + j.Offset + j.Dims
	if err := checkSpans("Rope", spanUse{"x", x, last}); err != nil {
		return err
	}
	push[0] = uint32(x.Off)
	k, err := b.r.d.Kernel("ops_rope", 1, 4*len(push), ropeWorkgroup)
	if err != nil {
		return err
	}
	groups := rowGroups(j.Rows)
	groups[1] = uint32(j.Heads)
	return b.Dispatch(k, groups, push, x.Buf)
}

// ropePush checks a job and makes ops_rope.comp's push constants (the
// first, x's offset, left to the caller): what depends on no position —
// base^(−2/dims), YaRN's correction dims and magnitude — computed here as
// the CPU computes it.
func ropePush(j RopeJob) ([]uint32, error) {
	switch {
	case j.RowStride < 0 || j.HeadStride < 0 || j.Offset < 0 || j.Pos0 < 0:
		return nil, fmt.Errorf("gpu: Rope: negative strides, offset or position (%+v)", j)
	case j.Heads > 65535:
		return nil, fmt.Errorf("gpu: Rope: %d heads is more than one dispatch holds", j.Heads)
	case int64(j.Pos0)+int64(j.Rows) > math.MaxInt32:
		return nil, fmt.Errorf("gpu: Rope: positions from %d past 2³¹", j.Pos0)
	case !(j.Base > 0) || !(j.FreqScale > 0) || j.AttnFactor == 0:
		return nil, fmt.Errorf("gpu: Rope: base %v, frequency scale %v and magnitude %v (plain RoPE: 1 and 1)", j.Base, j.FreqScale, j.AttnFactor)
	}
	var sections [5]uint32
	if j.Sections != nil {
		if len(j.Sections) != 4 || j.Sections[0] < 0 || j.Sections[1] < 0 || j.Sections[2] < 0 || j.Sections[3] < 0 ||
			j.Sections[0]+j.Sections[1]+j.Sections[2]+j.Sections[3] <= 0 || j.Sections[0]+j.Sections[1]+j.Sections[2]+j.Sections[3] > 1<<20 {
			return nil, fmt.Errorf("gpu: Rope: sections %v are not four counts of pairs", j.Sections)
		}
		sections = [5]uint32{1, uint32(j.Sections[0]), uint32(j.Sections[1]), uint32(j.Sections[2]), uint32(j.Sections[3])}
	}
	thetaScale := float32(math.Pow(float64(j.Base), float64(-2/float32(j.Dims))))
	mscale := j.AttnFactor
	var corr0, corrSpan int32
	if j.ExtFactor != 0 {
		corr := yarnCorrDims(j.Dims, j.CtxOrig, j.Base, j.BetaFast, j.BetaSlow)
		span := corr[1] - corr[0]
		if math.IsNaN(float64(corr[0])) || math.IsNaN(float64(span)) {
			return nil, fmt.Errorf("gpu: Rope: YaRN's correction dims are %v (context %d, β %v and %v)", corr, j.CtxOrig, j.BetaFast, j.BetaSlow)
		}
		// Past ±2²⁴ no pair's ramp changes: every one is below corr0, or
		// the span is below 1.
		corr0, corrSpan = int32(clampF32(corr[0], 1<<24)), int32(clampF32(span, 1<<24))
		mscale *= 1 + float32(0.1*logf(1/j.FreqScale))
	}
	neox := uint32(0)
	if j.Neox {
		neox = 1
	}
	return []uint32{0, uint32(j.Rows), uint32(j.RowStride), uint32(j.HeadStride), uint32(j.Offset), uint32(j.Dims), uint32(j.Pos0),
		f32(thetaScale), f32(j.FreqScale), f32(j.ExtFactor), f32(mscale), uint32(corr0), uint32(corrSpan), neox,
		sections[0], sections[1], sections[2], sections[3], sections[4]}, nil
}

func clampF32(v, limit float32) float32 { return min(max(v, -limit), limit) }

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// yarnCorrDims is ggml_rope_yarn_corr_dims, as the engine computes it:
// the first and last rotated dims YaRN's ramp blends between.
func yarnCorrDims(nDims, ctxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	corrDim := func(nRot float32) float32 {
		return float32(float32(nDims)*logf(float32(ctxOrig)/(nRot*2*math.Pi))) / (2 * logf(base))
	}
	start := float32(math.Floor(float64(corrDim(betaFast))))
	end := float32(math.Ceil(float64(corrDim(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// activationGrids are the grids RoundActivations puts values on: the
// activation types of llama.cpp's CPU dot products (Q8_1's levels and
// scale are Q8_0's).
var activationGrids = map[gguf.Type]string{
	gguf.TypeF16: "f16", gguf.TypeBF16: "bf16", gguf.TypeQ8_0: "q8_0", gguf.TypeQ8_1: "q8_0", gguf.TypeQ8_K: "q8_k",
}

// RoundActivations writes to dst x's n values on grid (an activation type:
// F16, BF16, Q8_0, Q8_1 or Q8_K) as floats: what llama.cpp's CPU backend
// multiplies a weight row by after converting the activations to the
// weight type's vec_dot_type, so that a product on dst differs from the
// CPU's only in the order of its sums. n is a whole number of the grid's
// blocks; dst may be x. Q8_1's s (its scale times the sum of the levels,
// rounded to binary16, which Q4_1 and Q5_1 dots take their minimum's term
// from) is not kept: those products sum the levels themselves.
func (b *Batch) RoundActivations(dst, x Span, grid gguf.Type, n int) error {
	name, ok := activationGrids[grid]
	if !ok {
		return fmt.Errorf("gpu: RoundActivations onto %s, which is not an activation type", grid)
	}
	if err := checkShape("RoundActivations", n); err != nil {
		return err
	}
	if bs := int(grid.BlockSize()); n%bs != 0 {
		return fmt.Errorf("gpu: RoundActivations: %d values are not whole %s blocks of %d", n, grid, bs)
	}
	if err := checkSpans("RoundActivations", spanUse{"dst", dst, n}, spanUse{"x", x, n}); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	k, err := b.r.d.Kernel("ops_round_"+name, 2, 16, eltwiseWorkgroup)
	if err != nil {
		return err
	}
	units := uint32(n / int(grid.BlockSize()))
	groups := min((units+eltwiseWorkgroup-1)/eltwiseWorkgroup, maxEltwiseGroups)
	return b.Dispatch(k, [3]uint32{groups, 1, 1}, []uint32{uint32(n), uint32(dst.Off), uint32(x.Off), 0}, dst.Buf, x.Buf)
}

// AddExpertBias adds to row r of y (rows × width) the bias of expert
// ids[r]: row ids[r] of bias, a stack of experts × width floats. ids
// holds the rows' expert ids as float32 bits (as MatMulExperts reads
// them); an id of experts or more adds nothing.
func (b *Batch) AddExpertBias(y, bias, ids Span, experts, rows, width int) error {
	if err := checkShape("AddExpertBias", rows, width); err != nil {
		return err
	}
	if err := checkShape("AddExpertBias", experts, width); err != nil {
		return err
	}
	if err := checkSpans("AddExpertBias", spanUse{"y", y, rows * width}, spanUse{"ids", ids, rows},
		spanUse{"bias", bias, experts * width}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(rows * width), dOff: uint32(y.Off), aOff: uint32(ids.Off), bOff: uint32(bias.Off),
		width: uint32(width), dStride: uint32(experts)}
	return b.eltwise("add_expert_bias", push, y.Buf, ids.Buf, bias.Buf)
}

// MoESum writes, for each of tokens rows of dst (width values), the sum
// over its k routed rows of y (tokens·k rows of width, a token's rows
// together) each times its weight (tokens·k floats): the products and
// then the sums rounded one by one in slot order, as the CPU adds the
// experts' contributions.
func (b *Batch) MoESum(dst, y, weights Span, tokens, k, width int) error {
	if err := checkShape("MoESum", tokens, k, width); err != nil {
		return err
	}
	if k < 1 {
		return fmt.Errorf("gpu: MoESum: %d experts per token", k)
	}
	if err := checkSpans("MoESum", spanUse{"dst", dst, tokens * width}, spanUse{"y", y, tokens * k * width},
		spanUse{"weights", weights, tokens * k}); err != nil {
		return err
	}
	push := eltwisePush{n: uint32(tokens * width), dOff: uint32(dst.Off), aOff: uint32(y.Off), bOff: uint32(weights.Off),
		width: uint32(width), aStride: uint32(k)}
	return b.eltwise("moe_sum", push, dst.Buf, y.Buf, weights.Buf)
}

// RouteGating is how Route turns router logits into probabilities.
type RouteGating uint32

const (
	RouteSoftmax       RouteGating = 1 // softmax over every expert
	RouteSigmoid       RouteGating = 2 // each logit's sigmoid
	RouteSoftmaxWeight RouteGating = 3 // the logits; softmax over the chosen (gpt-oss)
)

// MaxRouteK and MaxRouteGroups bound what Route chooses: experts per
// token, and expert groups.
const (
	MaxRouteK      = 32
	MaxRouteGroups = 32
)

// RouteJob is one MoE layer's routing of Tokens tokens over Experts
// experts: the K best after the gating, the selection bias (when Bias is
// set) and the group limit (Groups > 1: only the GroupsUsed best groups,
// a group scored by its two best), the weights renormalised when
// Normalize and scaled by Scale (0 or 1: not scaled).
type RouteJob struct {
	Tokens, Experts, K int
	Gating             RouteGating
	Groups, GroupsUsed int
	Bias               Span // Experts floats, or no buffer
	Normalize          bool
	Scale              float32
}

// Route records the routing of logits (Tokens × Experts) into out:
// Tokens·K expert ids (uint32 as float32 bits, best first, as
// MatMulExperts reads them), then their Tokens·K weights, then each
// token's top-k margin (the K-th selection score minus the next; 1 when
// none). scratch is 2·Tokens·Experts floats of working memory.
func (b *Batch) Route(out, logits, scratch Span, j RouteJob) error {
	if err := checkShape("Route", j.Tokens, j.Experts, 2); err != nil {
		return err
	}
	groups := max(j.Groups, 1)
	switch {
	case j.K < 1 || j.K > MaxRouteK || j.K > j.Experts:
		return fmt.Errorf("gpu: Route: %d experts per token of %d (at most %d)", j.K, j.Experts, MaxRouteK)
	case groups > MaxRouteGroups || j.Experts%groups != 0 || (groups > 1 && (j.GroupsUsed < 1 || j.GroupsUsed > groups)):
		return fmt.Errorf("gpu: Route: %d experts in %d groups, %d used (at most %d groups)", j.Experts, groups, j.GroupsUsed, MaxRouteGroups)
	case j.Gating < RouteSoftmax || j.Gating > RouteSoftmaxWeight:
		return fmt.Errorf("gpu: Route: gating %d", j.Gating)
	}
	uses := []spanUse{{"out", out, j.Tokens * (2*j.K + 1)}, {"logits", logits, j.Tokens * j.Experts}, {"scratch", scratch, 2 * j.Tokens * j.Experts}}
	flags := uint32(0)
	if j.Bias.Buf != nil {
		flags |= 1
		uses = append(uses, spanUse{"bias", j.Bias, j.Experts})
	}
	if j.Normalize {
		flags |= 2
	}
	if err := checkSpans("Route", uses...); err != nil {
		return err
	}
	if j.Tokens == 0 {
		return nil
	}
	const workgroup = 64
	k, err := b.r.d.Kernel("ops_route", 4, 48, workgroup)
	if err != nil {
		return err
	}
	push := []uint32{uint32(j.Tokens), uint32(j.Experts), uint32(j.K), uint32(logits.Off), uint32(j.Bias.Off), uint32(out.Off),
		uint32(scratch.Off), uint32(j.Gating), uint32(groups), uint32(j.GroupsUsed), flags, f32(j.Scale)}
	groupsX := (uint32(j.Tokens) + workgroup - 1) / workgroup
	return b.Dispatch(k, [3]uint32{groupsX, 1, 1}, push, logits.Buf, b.orDummy(j.Bias.Buf), out.Buf, scratch.Buf)
}
