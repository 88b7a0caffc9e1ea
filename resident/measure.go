package resident

import (
	"context"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/parallel"
)

// errorStats are one tensor's quantization errors, by type.
type errorStats struct {
	energy float64               // Σ w·x²
	sse    map[gguf.Type]float64 // Σ w·(x̂ − x)²
}

// relRMS is √(sse/energy), 0 for an all-zero tensor.
func (s *errorStats) relRMS(t gguf.Type) float64 {
	if s.energy == 0 {
		return 0
	}
	return math.Sqrt(s.sse[t] / s.energy)
}

// measureSlab bounds the rows measured at once.
const measureSlab = 8 << 20

// measure quantizes tensor t to each of types and back, row by row (rows
// spread over the cores, a slab at a time), and accumulates the weighted
// squared error against the source values. imatrix has one weight per
// column per expert slice, or is nil (all weights 1).
func measure(ctx context.Context, s *gguf.Set, t *gguf.SetTensor, types []gguf.Type, imatrix []float32) (*errorStats, error) {
	st := &errorStats{sse: map[gguf.Type]float64{}}
	m := rowMeasurer{t: t, types: types, imatrix: imatrix, nPerRow: t.Dim(0), rowBytes: t.Type.RowBytes(t.Dim(0)), perExp: t.Dim(1)}
	rows := t.Elements() / m.nPerRow
	src := s.TensorData(t)
	slabRows := max(1, measureSlab/max(m.rowBytes, 1))
	buf := make([]byte, min(rows, slabRows)*m.rowBytes)
	for first := int64(0); first < rows; first += slabRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(slabRows, rows-first)
		slab := buf[:n*m.rowBytes]
		if _, err := src.ReadAt(slab, first*m.rowBytes); err != nil {
			return nil, fmt.Errorf("resident: reading %s: %w", t.Name, err)
		}
		parts, err := parallel.Map(int(n), func(lo, hi int) (rowErrors, error) {
			return m.measureRows(slab, first, int64(lo), int64(hi))
		})
		if err != nil {
			return nil, err
		}
		// Parts are added in row order, so the sums do not depend on which
		// part finished first.
		for _, p := range parts {
			st.energy += p.energy
			for k, typ := range types {
				st.sse[typ] += p.sse[k]
			}
		}
	}
	return st, nil
}

// rowMeasurer measures the rows of one tensor.
type rowMeasurer struct {
	t        *gguf.SetTensor
	types    []gguf.Type
	imatrix  []float32
	nPerRow  int64
	rowBytes int64
	perExp   int64 // rows per expert slice, which has its own imatrix weights
}

// rowErrors are the sums of a run of rows, added into errorStats later.
type rowErrors struct {
	energy float64
	sse    []float64 // by index into the measured types
}

// measureRows measures rows [lo, hi) of slab, whose first row is row first
// of the tensor.
func (m *rowMeasurer) measureRows(slab []byte, first, lo, hi int64) (rowErrors, error) {
	p := rowErrors{sse: make([]float64, len(m.types))}
	var x, y []float32
	var q []byte
	for r := lo; r < hi; r++ {
		var err error
		if x, err = quant.Dequantize(x[:0], m.t.Type, slab[r*m.rowBytes:(r+1)*m.rowBytes]); err != nil {
			return p, err
		}
		var im []float32
		if m.imatrix != nil {
			e := (first + r) / m.perExp
			im = m.imatrix[e*m.nPerRow : (e+1)*m.nPerRow]
		}
		weight := func(j int) float64 {
			if im == nil {
				return 1
			}
			return float64(im[j])
		}
		for j, v := range x {
			p.energy += weight(j) * float64(v) * float64(v)
		}
		for k, typ := range m.types {
			if typ == m.t.Type {
				continue // kept as it is: no error
			}
			if q, err = quant.QuantizeRows(q[:0], typ, x, len(x), im); err != nil {
				return p, fmt.Errorf("resident: %s as %s: %w", m.t.Name, typ, err)
			}
			if y, err = quant.Dequantize(y[:0], typ, q); err != nil {
				return p, err
			}
			for j := range x {
				d := float64(y[j]) - float64(x[j])
				p.sse[k] += weight(j) * d * d
			}
		}
	}
	return p, nil
}
