package llamacpp

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// QuantRef runs llama.cpp's own block codecs (scripts/llamacpp/quantref.c,
// linked to the pinned libggml-base).
type QuantRef struct {
	Bin string
	dir string // scratch directory for the files it exchanges
}

// FindQuantRef locates the quantref binary next to the oracle; scratch
// files go to dir.
func FindQuantRef(dir string) (*QuantRef, error) {
	o, err := Find()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(filepath.Dir(o.Bin), "quantref")
	if _, err := os.Stat(bin); err != nil {
		return nil, ErrNotInstalled
	}
	return &QuantRef{Bin: bin, dir: dir}, nil
}

func (q *QuantRef) run(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, q.Bin, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("quantref %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func (q *QuantRef) scratch(name string) string { return filepath.Join(q.dir, name) }

// Quantize encodes x (rows of nPerRow values) as ggml type id typ with
// ggml_quantize_chunk, weighted by imatrix (one value per column) when it
// is not nil.
func (q *QuantRef) Quantize(ctx context.Context, typ uint32, x []float32, nPerRow int, imatrix []float32) ([]byte, error) {
	in, out := q.scratch("q.in.f32"), q.scratch("q.out.bin")
	if err := os.WriteFile(in, f32bytes(x), 0o644); err != nil {
		return nil, err
	}
	args := []string{"quantize", strconv.Itoa(int(typ)), strconv.Itoa(nPerRow), in, out}
	if imatrix != nil {
		im := q.scratch("q.imatrix.f32")
		if err := os.WriteFile(im, f32bytes(imatrix), 0o644); err != nil {
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
	in, out := q.scratch("d.in.bin"), q.scratch("d.out.f32")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		return nil, err
	}
	if _, err := q.run(ctx, "dequantize", strconv.Itoa(int(typ)), in, out); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	y := make([]float32, len(b)/4)
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return y, nil
}

// Validate runs ggml_validate_row_data.
func (q *QuantRef) Validate(ctx context.Context, typ uint32, data []byte) (bool, error) {
	in := q.scratch("v.in.bin")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		return false, err
	}
	out, err := q.run(ctx, "validate", strconv.Itoa(int(typ)), in)
	return out == "1", err
}

// BenchDequantize returns the seconds reps passes of to_float take over data.
func (q *QuantRef) BenchDequantize(ctx context.Context, typ uint32, data []byte, reps int) (float64, error) {
	in := q.scratch("b.in.bin")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		return 0, err
	}
	out, err := q.run(ctx, "bench-dequantize", strconv.Itoa(int(typ)), in, strconv.Itoa(reps))
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(out, 64)
}

// BenchQuantize returns the seconds reps passes of ggml_quantize_chunk take.
func (q *QuantRef) BenchQuantize(ctx context.Context, typ uint32, x []float32, nPerRow, reps int) (float64, error) {
	in := q.scratch("b.in.f32")
	if err := os.WriteFile(in, f32bytes(x), 0o644); err != nil {
		return 0, err
	}
	out, err := q.run(ctx, "bench-quantize", strconv.Itoa(int(typ)), strconv.Itoa(nPerRow), in, strconv.Itoa(reps))
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(out, 64)
}

func f32bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
