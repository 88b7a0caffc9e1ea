package resident

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
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
	nPerRow := t.Dim(0)
	rowBytes := t.Type.RowBytes(nPerRow)
	rows := t.Elements() / nPerRow
	perExp := t.Dim(1)
	src := s.TensorData(t)
	slabRows := max(1, measureSlab/max(rowBytes, 1))
	buf := make([]byte, min(rows, slabRows)*rowBytes)
	workers := int64(min(runtime.GOMAXPROCS(0), 16))
	for first := int64(0); first < rows; first += slabRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(slabRows, rows-first)
		in := buf[:n*rowBytes]
		if _, err := src.ReadAt(in, first*rowBytes); err != nil {
			return nil, fmt.Errorf("resident: reading %s: %w", t.Name, err)
		}
		type partial struct {
			energy float64
			sse    []float64
			err    error
		}
		parts := make([]partial, workers)
		per := (n + workers - 1) / workers
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := w*per, min((w+1)*per, n)
			if lo >= hi {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &parts[w]
				p.sse = make([]float64, len(types))
				var x, y []float32
				var q []byte
				for r := lo; r < hi; r++ {
					var err error
					if x, err = quant.Dequantize(x[:0], t.Type, in[r*rowBytes:(r+1)*rowBytes]); err != nil {
						p.err = err
						return
					}
					var im []float32
					if imatrix != nil {
						e := (first + r) / perExp
						im = imatrix[e*nPerRow : (e+1)*nPerRow]
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
					for k, typ := range types {
						if typ == t.Type {
							continue // kept as it is: no error
						}
						if q, err = quant.QuantizeRows(q[:0], typ, x, len(x), im); err != nil {
							p.err = fmt.Errorf("resident: %s as %s: %w", t.Name, typ, err)
							return
						}
						if y, err = quant.Dequantize(y[:0], typ, q); err != nil {
							p.err = err
							return
						}
						for j := range x {
							d := float64(y[j]) - float64(x[j])
							p.sse[k] += weight(j) * d * d
						}
					}
				}
			}()
		}
		wg.Wait()
		for _, p := range parts {
			if p.err != nil {
				return nil, p.err
			}
			st.energy += p.energy
			for k, typ := range types {
				if p.sse != nil {
					st.sse[typ] += p.sse[k]
				}
			}
		}
	}
	return st, nil
}
