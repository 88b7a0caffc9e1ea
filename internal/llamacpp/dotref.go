package llamacpp

import (
	"context"
	"os"
	"strconv"
)

// DotRef runs the dot products and activation quantizers of llama.cpp's
// haswell CPU backend (scripts/llamacpp/dotref.c, which loads the pinned
// libggml-cpu-haswell).
type DotRef struct{ tool }

// FindDotRef locates the dotref binary next to the oracle; scratch files
// go to dir.
func FindDotRef(dir string) (*DotRef, error) {
	t, err := findTool("dotref", dir)
	if err != nil {
		return nil, err
	}
	return &DotRef{t}, nil
}

// variant names the kernel dotref runs: the SIMD code the backend uses, or
// the portable *_generic code compiled into the same library.
func variant(generic bool) string {
	if generic {
		return "generic"
	}
	return "simd"
}

// putPair writes a weight and an activation file.
func (d *DotRef) putPair(prefix string, w, a []byte) (wp, ap string, err error) {
	if wp, err = d.put(prefix+".w.bin", w); err != nil {
		return "", "", err
	}
	ap, err = d.put(prefix+".a.bin", a)
	return wp, ap, err
}

// QuantizeActivations converts x, rows of nPerRow values, to the
// activation type vt (a ggml type id) row by row, as the backend's
// from_float does: quantize_row_q8_0 and friends, or their _generic
// versions.
func (d *DotRef) QuantizeActivations(ctx context.Context, vt uint32, generic bool, x []float32, nPerRow int) ([]byte, error) {
	in, err := d.put("qa.in.f32", f32bytes(x))
	if err != nil {
		return nil, err
	}
	out := d.scratch("qa.out.bin")
	if _, err := d.run(ctx, "quantize", strconv.Itoa(int(vt)), variant(generic), strconv.Itoa(nPerRow), in, out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// VecDot returns, for each row of n values of w (type typ), its dot
// product with the same row of a (in typ's vec_dot_type), computed by
// ggml_vec_dot_<type>_<vt> or its _generic version.
func (d *DotRef) VecDot(ctx context.Context, typ uint32, generic bool, n int, w, a []byte) ([]float32, error) {
	wp, ap, err := d.putPair("vd", w, a)
	if err != nil {
		return nil, err
	}
	if _, err := d.run(ctx, "dot", strconv.Itoa(int(typ)), variant(generic), strconv.Itoa(n), wp, ap, d.scratch("vd.out.f32")); err != nil {
		return nil, err
	}
	return d.getF32("vd.out.f32")
}

// BenchVecDot returns the seconds reps passes of the SIMD dot product over
// all rows of w and a take.
func (d *DotRef) BenchVecDot(ctx context.Context, typ uint32, n int, w, a []byte, reps int) (float64, error) {
	wp, ap, err := d.putPair("bd", w, a)
	if err != nil {
		return 0, err
	}
	return d.seconds(ctx, "bench-dot", strconv.Itoa(int(typ)), strconv.Itoa(n), wp, ap, strconv.Itoa(reps))
}

// BenchDequantize returns the seconds reps passes of the type's conversion
// to float take over data: ggml-base's to_float, or the backend's SIMD
// converters for F16 and BF16.
func (d *DotRef) BenchDequantize(ctx context.Context, typ uint32, data []byte, reps int) (float64, error) {
	in, err := d.put("bq.in.bin", data)
	if err != nil {
		return 0, err
	}
	return d.seconds(ctx, "bench-dequantize", strconv.Itoa(int(typ)), in, strconv.Itoa(reps))
}
