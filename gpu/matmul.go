package gpu

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu/shaders"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// Weights is a weight matrix on the device, in the bytes the GGUF file
// stores (decoded by the kernels as they read it): Rows × Cols of Type,
// or a stack of Experts such matrices. A matrix larger than one storage
// buffer may hold is split into parts of whole rows; a stack of experts
// must fit one buffer (the expert-indexed kernel addresses them in it).
type Weights struct {
	Type       gguf.Type
	Rows, Cols int
	Experts    int
	rowBytes   int64
	parts      []weightPart
}

type weightPart struct {
	buf  *Buffer
	row0 int // first row (of the whole matrix) in this part
	rows int
	// expert0 and experts are a stack's experts in this part.
	expert0, experts int
}

// matmulTypes are the weight types the matmul kernels decode.
var matmulTypes = map[gguf.Type]string{
	gguf.TypeF32: "f32", gguf.TypeF16: "f16", gguf.TypeBF16: "bf16",
	gguf.TypeQ8_0: "q8_0", gguf.TypeQ4_0: "q4_0", gguf.TypeQ4_1: "q4_1", gguf.TypeQ5_0: "q5_0", gguf.TypeQ5_1: "q5_1",
	gguf.TypeQ2_K: "q2_k", gguf.TypeQ3_K: "q3_k", gguf.TypeQ4_K: "q4_k", gguf.TypeQ5_K: "q5_k", gguf.TypeQ6_K: "q6_k",
	gguf.TypeIQ1_S: "iq1_s", gguf.TypeIQ1_M: "iq1_m", gguf.TypeIQ2_XXS: "iq2_xxs", gguf.TypeIQ2_XS: "iq2_xs",
	gguf.TypeIQ2_S: "iq2_s", gguf.TypeIQ3_XXS: "iq3_xxs", gguf.TypeIQ3_S: "iq3_s", gguf.TypeIQ4_NL: "iq4_nl",
	gguf.TypeIQ4_XS: "iq4_xs", gguf.TypeMXFP4: "mxfp4",
}

// MatMulTypes lists the weight types the device kernels multiply.
func MatMulTypes() []gguf.Type {
	var ts []gguf.Type
	for t := range matmulTypes {
		ts = append(ts, t)
	}
	return ts
}

// CanMatMul reports whether the kernels decode type t.
func CanMatMul(t gguf.Type) bool { _, ok := matmulTypes[t]; return ok }

// UploadWeights puts a matrix (experts 1) or a stack of experts' matrices
// on the device. data is experts × rows rows of cols values of type t.
func (d *Device) UploadWeights(name string, t gguf.Type, rows, cols, experts int, data []byte) (*Weights, error) {
	if !CanMatMul(t) {
		return nil, &FeatureError{Device: d.info.Name, Feature: fmt.Sprintf("a kernel for %s weights (%s)", t, name)}
	}
	if int64(cols)%t.BlockSize() != 0 {
		return nil, fmt.Errorf("%s: %d columns is not a whole number of %s blocks", name, cols, t)
	}
	rowBytes := t.RowBytes(int64(cols))
	if experts < 1 {
		experts = 1
	}
	if want := rowBytes * int64(rows) * int64(experts); int64(len(data)) != want {
		return nil, fmt.Errorf("%s: %d bytes of %s, want %d for %d×%d×%d", name, len(data), t, want, experts, rows, cols)
	}
	w := &Weights{Type: t, Rows: rows, Cols: cols, Experts: experts, rowBytes: rowBytes}
	limit := int64(d.info.Limits.MaxStorageBufferRange)
	// A part is whole rows of a matrix, or whole experts of a stack, as
	// many as one storage buffer holds.
	unit, units := rowBytes, rows
	if experts > 1 {
		unit, units = rowBytes*int64(rows), experts
	}
	perPart := int(min(limit/unit, int64(units)))
	if perPart == 0 {
		what := "one row"
		if experts > 1 {
			what = "one expert"
		}
		return nil, fmt.Errorf("%s: %s is %s, more than one storage buffer of %q holds (%s)", name, what,
			iostreams.HumanBytes(unit), d.info.Name, iostreams.HumanBytes(limit))
	}
	for u0 := 0; u0 < units; u0 += perPart {
		n := min(perPart, units-u0)
		lo, hi := int64(u0)*unit, int64(u0+n)*unit
		// Rounded up to whole 32-bit words: the kernels read weights as
		// 16-bit words, and a matrix of 17-byte MXFP4 blocks may end
		// inside one.
		buf, err := d.Alloc((hi-lo+3)&^3, name)
		if err != nil {
			w.Free()
			return nil, err
		}
		part := weightPart{buf: buf, row0: u0, rows: n, expert0: 0, experts: 1}
		if experts > 1 {
			part = weightPart{buf: buf, rows: rows, expert0: u0, experts: n}
		}
		w.parts = append(w.parts, part)
		if err := d.Write(buf, 0, data[lo:hi]); err != nil {
			w.Free()
			return nil, err
		}
	}
	return w, nil
}

// Bytes is the device memory the weights hold.
func (w *Weights) Bytes() int64 {
	var n int64
	for _, p := range w.parts {
		n += p.buf.size
	}
	return n
}

// Free releases the weights.
func (w *Weights) Free() {
	for _, p := range w.parts {
		p.buf.Free()
	}
	w.parts = nil
}

// matmulPush is the kernel's push constants (matmul.comp).
type matmulPush struct {
	cols, rows, rowBytes, wOffset, xOffset, xStride, yOffset, yStride, ncols, expertBytes, xDiv, idsOffset, expert0, experts uint32
}

// matmulPushBytes is matmulPush's size.
const matmulPushBytes = 4 * 14

func (p matmulPush) words() []uint32 {
	return []uint32{p.cols, p.rows, p.rowBytes, p.wOffset, p.xOffset, p.xStride, p.yOffset, p.yStride, p.ncols, p.expertBytes, p.xDiv, p.idsOffset, p.expert0, p.experts}
}

// matmulWorkgroup is the kernels' workgroup size: a power of two for the
// shared-memory reduction, at least a subgroup.
const matmulWorkgroup = 64

// Columns of x and y: Off is the float offset of column 0, Stride the
// floats from one column to the next.
type Columns struct {
	Buf         *Buffer
	Off, Stride int
}

// MatMul records y[c] = W·x[c] for ncols columns (the rows of a batch).
func (b *Batch) MatMul(w *Weights, x, y Columns, ncols int) error {
	if w.Experts != 1 {
		return fmt.Errorf("gpu: MatMul of a stack of %d experts: use MatMulExperts", w.Experts)
	}
	numCols := uint32(1)
	for numCols < 8 && int(numCols) < ncols {
		numCols *= 2
	}
	k, err := b.r.d.matmulKernel(w.Type, numCols, false)
	if err != nil {
		return err
	}
	for _, part := range w.parts {
		push := matmulPush{cols: uint32(w.Cols), rows: uint32(part.rows), rowBytes: uint32(w.rowBytes),
			xOffset: uint32(x.Off), xStride: uint32(x.Stride), yOffset: uint32(y.Off + part.row0), yStride: uint32(y.Stride),
			ncols: uint32(ncols), xDiv: 1}
		groups := rowGroups(part.rows)
		groups[1] = (uint32(ncols) + numCols - 1) / numCols
		if err := b.Dispatch(k, groups, push.words(), part.buf, x.Buf, y.Buf, b.r.d.dummyBuffer()); err != nil {
			return err
		}
	}
	return nil
}

// MatMulExperts records, for each of n columns c, y[c] = W[ids[c]]·x[c /
// xDiv]: the routed rows of a MoE layer (xDiv = experts per token when
// every expert of a token reads that token's activations, 1 when each
// reads its own). ids holds n uint32 expert ids, as float32 bits, from
// its offset; each must be below w.Experts, which the caller (the router)
// guarantees: the kernel reads the weights of whatever id it is given.
func (b *Batch) MatMulExperts(w *Weights, ids Span, x Columns, xDiv int, y Columns, n int) error {
	if n == 0 {
		return nil
	}
	if err := checkSpans("MatMulExperts", spanUse{"ids", ids, n}); err != nil {
		return err
	}
	k, err := b.r.d.matmulKernel(w.Type, 1, true)
	if err != nil {
		return err
	}
	// One dispatch per part of the stack: each computes the columns
	// whose expert it holds and leaves the others.
	for _, part := range w.parts {
		push := matmulPush{cols: uint32(w.Cols), rows: uint32(w.Rows), rowBytes: uint32(w.rowBytes),
			xOffset: uint32(x.Off), xStride: uint32(x.Stride), yOffset: uint32(y.Off), yStride: uint32(y.Stride),
			ncols: uint32(n), expertBytes: uint32(w.rowBytes * int64(w.Rows)), xDiv: uint32(max(xDiv, 1)), idsOffset: uint32(ids.Off),
			expert0: uint32(part.expert0), experts: uint32(part.experts)}
		groups := rowGroups(w.Rows)
		groups[1] = uint32(n)
		if err := b.Dispatch(k, groups, push.words(), part.buf, x.Buf, y.Buf, ids.Buf); err != nil {
			return err
		}
	}
	return nil
}

// rowGroups spreads rows workgroups over x and z, each at most 65535 (the
// least every device dispatches).
func rowGroups(rows int) [3]uint32 {
	const most = 65535
	if rows <= most {
		return [3]uint32{uint32(rows), 1, 1}
	}
	z := (rows + most - 1) / most
	return [3]uint32{uint32((rows + z - 1) / z), 1, uint32(z)}
}

// matmulKernel picks the variant the device runs: subgroup reductions
// where it has them (unless the options ask for the plain kernels).
func (d *Device) matmulKernel(t gguf.Type, numCols uint32, experts bool) (*Kernel, error) {
	name := "matmul_" + matmulTypes[t]
	if d.UsesSubgroups() {
		name += "_sg"
	}
	ids := uint32(0)
	if experts {
		ids = 1
	}
	return d.Kernel(name, 4, matmulPushBytes, matmulWorkgroup, numCols, ids)
}

// UsesSubgroups says whether the kernels reduce with subgroup operations.
func (d *Device) UsesSubgroups() bool {
	return d.info.Features.SubgroupArithmetic && !d.opts.Plain
}

// VariantsFor names the kernel variants a device with features f runs.
func VariantsFor(f Features) []string {
	if f.SubgroupArithmetic {
		return []string{"subgroup reductions (_sg)"}
	}
	return []string{"shared-memory reductions"}
}

// Kernels lists the embedded kernel modules.
func Kernels() []string { return shaders.Names() }
