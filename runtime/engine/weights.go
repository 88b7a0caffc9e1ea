package engine

import (
	"fmt"
	"io"
	"iter"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// tensorTable is where a model's tensors come from: a GGUF file or split
// set, or a pack's resident GGUF.
type tensorTable interface {
	// find returns a tensor's description and a reader over its bytes.
	find(name string) (*gguf.TensorInfo, *io.SectionReader, bool)
	// where names the file(s) in errors.
	where() string
	// names lists every tensor's name.
	names() iter.Seq[string]
}

type setTable struct{ s *gguf.Set }

func (t setTable) find(name string) (*gguf.TensorInfo, *io.SectionReader, bool) {
	st, ok := t.s.Tensor(name)
	if !ok {
		return nil, nil, false
	}
	return &st.TensorInfo, t.s.TensorData(st), true
}

func (t setTable) where() string { return t.s.Prefix }

func (t setTable) names() iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range t.s.Tensors {
			if !yield(t.s.Tensors[i].Name) {
				return
			}
		}
	}
}

type fileTable struct{ f *gguf.File }

func (t fileTable) find(name string) (*gguf.TensorInfo, *io.SectionReader, bool) {
	i, ok := t.f.TensorIndex(name)
	if !ok {
		return nil, nil, false
	}
	return &t.f.Tensors[i], t.f.TensorData(i), true
}

func (t fileTable) where() string { return t.f.Name }

func (t fileTable) names() iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range t.f.Tensors {
			if !yield(t.f.Tensors[i].Name) {
				return
			}
		}
	}
}

// matrix is a weight matrix in RAM, in its file type: rows of cols values,
// each row rowBytes long. A [cols, rows, n] tensor of experts is n such
// matrices one after the other.
type matrix struct {
	name     string
	typ      gguf.Type
	vt       gguf.Type // the activation type its dot product takes
	cols     int
	rows     int
	rowBytes int
	data     []byte
	dot      quant.Dotter
	dev      any // a device backend's copy of the weights, once prepared
}

func (m *matrix) row(r int) []byte { return m.data[r*m.rowBytes : (r+1)*m.rowBytes] }

// dequantizeRow appends row r of m, as float32s, to dst.
func dequantizeRow(dst []float32, m *matrix, r int) ([]float32, error) {
	return quant.Dequantize(dst, m.typ, m.row(r))
}

// bytes is the size of one [cols, rows] matrix.
func (m *matrix) bytes() int { return m.rows * m.rowBytes }

// slice returns matrix i of a stacked tensor.
func (m *matrix) slice(i int) matrix {
	s := *m
	s.data = m.data[i*m.bytes() : (i+1)*m.bytes()]
	return s
}

// checkMatrix says whether the runtime can multiply by a [cols, ·]
// matrix of type t.
func checkMatrix(name string, t gguf.Type, cols int) error {
	vt := quant.VecDotType(t)
	if vt == gguf.TypeCount {
		return fmt.Errorf("%w: tensor %s has type %s, which has no dot product", ErrUnsupported, name, t)
	}
	if int64(cols)%t.BlockSize() != 0 || int64(cols)%vt.BlockSize() != 0 {
		return fmt.Errorf("%w: tensor %s: rows of %d values are not whole %s and %s blocks", ErrUnsupported, name, cols, t, vt)
	}
	return nil
}

// newMatrix describes a [cols, rows] matrix of type t over data, checking
// that the runtime can multiply by it.
func newMatrix(name string, t gguf.Type, cols, rows int, data []byte) (matrix, error) {
	m, err := newShape(name, t, cols, rows)
	if err != nil {
		return m, err
	}
	return m.with(data)
}

// newShape is newMatrix without the bytes: what with then fills, for
// matrices whose bytes arrive one expert at a time.
func newShape(name string, t gguf.Type, cols, rows int) (matrix, error) {
	if err := checkMatrix(name, t, cols); err != nil {
		return matrix{}, err
	}
	dot, err := quant.NewDotter(t, cols)
	if err != nil {
		return matrix{}, fmt.Errorf("%w: tensor %s: %v", ErrUnsupported, name, err)
	}
	return matrix{name: name, typ: t, vt: quant.VecDotType(t), cols: cols, rows: rows, rowBytes: int(t.RowBytes(int64(cols))), dot: dot}, nil
}

// with returns the matrix over data, which must hold exactly its rows.
func (m matrix) with(data []byte) (matrix, error) {
	if len(data) != m.rows*m.rowBytes {
		return matrix{}, fmt.Errorf("engine: tensor %s: %d bytes for %d rows of %d %s values", m.name, len(data), m.rows, m.cols, m.typ)
	}
	m.data = data
	return m, nil
}

// loader reads tensors of one table into RAM, checking each shape.
type loader struct {
	tab   tensorTable
	mem   *arena
	meter *loadMeter
	bytes int64 // read so far
}

func (l *loader) missing(name string) error {
	return &ModelError{File: l.tab.where(), Msg: "missing tensor " + name}
}

// shape checks that name exists with exactly the dimensions want.
func (l *loader) shape(name string, want ...int64) (*gguf.TensorInfo, *io.SectionReader, error) {
	info, r, ok := l.tab.find(name)
	if !ok {
		return nil, nil, l.missing(name)
	}
	// Trailing dimensions of 1 are the same shape, as in ggml.
	match := true
	for i := range max(len(info.Shape), len(want)) {
		w := int64(1)
		if i < len(want) {
			w = want[i]
		}
		match = match && info.Dim(i) == w
	}
	if !match {
		return nil, nil, &ModelError{File: l.tab.where(), Msg: fmt.Sprintf("tensor %s has shape %v, want %v", name, info.Shape, want)}
	}
	return info, r, nil
}

func (l *loader) read(name string, r *io.SectionReader) ([]byte, error) {
	b, err := l.mem.alloc(int(r.Size()))
	if err != nil {
		return nil, err
	}
	if err := l.meter.readChunked(r, 0, b); err != nil {
		return nil, fmt.Errorf("engine: %s: reading tensor %s: %w", l.tab.where(), name, err)
	}
	l.bytes += int64(len(b))
	return b, nil
}

// matrix loads a [cols, rows] matrix, or a stacked [cols, rows, n] one when
// n > 0.
func (l *loader) matrix(name string, cols, rows, n int) (matrix, error) {
	want := []int64{int64(cols), int64(rows)}
	if n > 0 {
		want = append(want, int64(n))
	}
	info, r, err := l.shape(name, want...)
	if err != nil {
		return matrix{}, err
	}
	data, err := l.read(name, r)
	if err != nil {
		return matrix{}, err
	}
	m, err := newMatrix(name, info.Type, cols, rows*max(n, 1), data)
	m.rows = rows
	return m, err
}

// optionalMatrix is matrix, or a nil matrix when the tensor is absent.
func (l *loader) optionalMatrix(name string, cols, rows int) (*matrix, error) {
	if _, _, ok := l.tab.find(name); !ok {
		return nil, nil
	}
	m, err := l.matrix(name, cols, rows, 0)
	return &m, err
}

// vector loads a 1-D tensor of n values as float32s.
func (l *loader) vector(name string, n int) ([]float32, error) { return l.floats(name, n) }

// floats loads a tensor of exactly the dimensions dims, of any type, as
// float32s in storage order.
func (l *loader) floats(name string, dims ...int) ([]float32, error) {
	want := make([]int64, len(dims))
	n := 1
	for i, d := range dims {
		want[i], n = int64(d), n*d
	}
	info, r, err := l.shape(name, want...)
	if err != nil {
		return nil, err
	}
	data, err := l.read(name, r)
	if err != nil {
		return nil, err
	}
	v, err := quant.Dequantize(make([]float32, 0, n), info.Type, data)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: tensor %s: %w", l.tab.where(), name, err)
	}
	return v, nil
}

// optionalVector is vector, or nil when the tensor is absent.
func (l *loader) optionalVector(name string, n int) ([]float32, error) {
	if _, _, ok := l.tab.find(name); !ok {
		return nil, nil
	}
	return l.vector(name, n)
}

// biasTensor loads a stacked [n, e] F32 bias tensor as its bytes, one
// expert's n values after another.
func (l *loader) biasTensor(name string, n, e int) ([]byte, error) {
	info, r, err := l.shape(name, int64(n), int64(e))
	if err != nil {
		return nil, err
	}
	if info.Type != gguf.TypeF32 {
		return nil, &ModelError{File: l.tab.where(), Msg: fmt.Sprintf("tensor %s is %s, want F32", name, info.Type)}
	}
	return l.read(name, r)
}
