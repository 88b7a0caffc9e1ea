package llamacpp

import (
	"context"
	"os"
	"strconv"
)

// QuantRef runs llama.cpp's own block codecs (scripts/llamacpp/quantref.c,
// linked to the pinned libggml-base).
type QuantRef struct{ tool }

// FindQuantRef locates the quantref binary next to the oracle; scratch
// files go to dir.
func FindQuantRef(dir string) (*QuantRef, error) {
	t, err := findTool("quantref", dir)
	if err != nil {
		return nil, err
	}
	return &QuantRef{t}, nil
}

// Quantize encodes x (rows of nPerRow values) as ggml type id typ with
// ggml_quantize_chunk, weighted by imatrix (one value per column) when it
// is not nil.
func (q *QuantRef) Quantize(ctx context.Context, typ uint32, x []float32, nPerRow int, imatrix []float32) ([]byte, error) {
	in, err := q.put("q.in.f32", f32bytes(x))
	if err != nil {
		return nil, err
	}
	out := q.scratch("q.out.bin")
	args := []string{"quantize", strconv.Itoa(int(typ)), strconv.Itoa(nPerRow), in, out}
	if imatrix != nil {
		im, err := q.put("q.imatrix.f32", f32bytes(imatrix))
		if err != nil {
			return nil, err
		}
		args = append(args, im)
	}
	if _, err := q.run(ctx, args...); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// Dequantize decodes whole blocks of type typ with the type's to_float.
func (q *QuantRef) Dequantize(ctx context.Context, typ uint32, data []byte) ([]float32, error) {
	in, err := q.put("d.in.bin", data)
	if err != nil {
		return nil, err
	}
	if _, err := q.run(ctx, "dequantize", strconv.Itoa(int(typ)), in, q.scratch("d.out.f32")); err != nil {
		return nil, err
	}
	return q.getF32("d.out.f32")
}

// Validate runs ggml_validate_row_data.
func (q *QuantRef) Validate(ctx context.Context, typ uint32, data []byte) (bool, error) {
	in, err := q.put("v.in.bin", data)
	if err != nil {
		return false, err
	}
	out, err := q.run(ctx, "validate", strconv.Itoa(int(typ)), in)
	return out == "1", err
}

// BenchDequantize returns the seconds reps passes of to_float take over data.
func (q *QuantRef) BenchDequantize(ctx context.Context, typ uint32, data []byte, reps int) (float64, error) {
	in, err := q.put("b.in.bin", data)
	if err != nil {
		return 0, err
	}
	return q.seconds(ctx, "bench-dequantize", strconv.Itoa(int(typ)), in, strconv.Itoa(reps))
}

// BenchQuantize returns the seconds reps passes of ggml_quantize_chunk take.
func (q *QuantRef) BenchQuantize(ctx context.Context, typ uint32, x []float32, nPerRow, reps int) (float64, error) {
	in, err := q.put("b.in.f32", f32bytes(x))
	if err != nil {
		return 0, err
	}
	return q.seconds(ctx, "bench-quantize", strconv.Itoa(int(typ)), strconv.Itoa(nPerRow), in, strconv.Itoa(reps))
}
