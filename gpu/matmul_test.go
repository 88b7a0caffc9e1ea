package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// The matmul kernels against the Go reference: the weights decoded by
// gguf/quant (llama.cpp's own decoding, byte for byte) and multiplied in
// float64. A kernel sums in float32 in its own order, so each output may
// differ from the reference by matmulTolerance × Σ|wᵢ·xᵢ| of its row.
const matmulTolerance = 1e-5

// testWeights makes rows × cols weights of type t: quantized random rows,
// an all-zero row, a row spanning a wide range, a row of one spike, and
// (for block types) rows of random block bytes that pass gguf's checks.
// A type gguf/quant has no encoder for (IQ1_S, IQ1_M, IQ2_*, IQ3_*) gets
// random blocks in every row but the all-zero ones.
func testWeights(t *testing.T, typ gguf.Type, rows, cols int, rng *rand.Rand) []byte {
	t.Helper()
	if !quant.CanQuantize(typ) {
		data := make([]byte, int64(rows)*typ.RowBytes(int64(cols)))
		for which := range 7 {
			if which != 1 {
				randomBlocks(t, typ, data, cols, rng, which)
			}
		}
		return data
	}
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		switch r % 7 {
		case 1: // zeros
		case 2:
			for i := range row {
				row[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
			}
		case 3:
			row[rng.IntN(cols)] = 3e4
		default:
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
		}
	}
	var imatrix []float32
	if quant.RequiresImatrix(typ) {
		imatrix = make([]float32, cols)
		for i := range imatrix {
			imatrix[i] = 0.5 + rng.Float32()
		}
	}
	data, err := quant.QuantizeRows(nil, typ, x, cols, imatrix)
	if err != nil {
		t.Fatal(err)
	}
	if typ.BlockSize() > 1 {
		randomBlocks(t, typ, data, cols, rng, 4) // row 4, 11, …: raw random blocks
	}
	return data
}

// randomBlocks overwrites every row ≡ which (mod 7) with random block
// bytes, each block redrawn until gguf/quant accepts it and its values
// are below randomBlockLimit.
func randomBlocks(t *testing.T, typ gguf.Type, data []byte, cols int, rng *rand.Rand, which int) {
	rowBytes := int(typ.RowBytes(int64(cols)))
	bb := int(typ.BlockBytes())
	for r := which; r*rowBytes < len(data); r += 7 {
		for b := r * rowBytes; b < (r+1)*rowBytes; b += bb {
			blk := data[b : b+bb]
			for try := 0; ; try++ {
				for i := range blk {
					blk[i] = byte(rng.Uint32())
				}
				if quant.Validate(typ, blk) == nil && withinLimit(typ, blk) {
					break
				}
				if try > 1000 {
					t.Fatalf("%s: no random block passes validation", typ)
				}
			}
		}
	}
}

// randomBlockLimit bounds the values of a random block: an MXFP4 scale
// reaches 2^126, and values near it overflow float32 products and sums on
// any device (the CPU's dot products included), so such blocks test
// nothing but overflow. 2^64 leaves products with x and sums over a row
// far inside float32.
const randomBlockLimit = 0x1p64

// withinLimit reports whether every value of the block is finite and at
// most randomBlockLimit in magnitude.
func withinLimit(typ gguf.Type, blk []byte) bool {
	vals, err := quant.Dequantize(nil, typ, blk)
	if err != nil {
		return false
	}
	for _, v := range vals {
		if !(math.Abs(float64(v)) <= randomBlockLimit) {
			return false
		}
	}
	return true
}

// referenceMatMul is y[c][r] = Σ w[r][i]·x[c][i] in float64, and the
// bound Σ|w·x| for each.
func referenceMatMul(w []float32, x []float32, rows, cols, ncols int) (y, bound []float64) {
	y, bound = make([]float64, rows*ncols), make([]float64, rows*ncols)
	for c := 0; c < ncols; c++ {
		for r := 0; r < rows; r++ {
			var s, a float64
			for i := 0; i < cols; i++ {
				p := float64(w[r*cols+i]) * float64(x[c*cols+i])
				s += p
				a += math.Abs(p)
			}
			y[c*rows+r], bound[c*rows+r] = s, a
		}
	}
	return y, bound
}

func testVariants(t *testing.T) []DeviceOptions {
	return []DeviceOptions{{Plain: true}, {}}
}

func variantName(d *Device) string {
	if d.UsesSubgroups() {
		return "subgroup"
	}
	return "plain"
}

func TestMatMulEveryType(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		types := MatMulTypes()
		slices.Sort(types)
		for _, typ := range types {
			shapes := [][2]int{{37, 2 * int(max(typ.BlockSize(), 32))}, {5, 7 * int(max(typ.BlockSize(), 32))}}
			if typ.BlockSize() == 1 {
				shapes = append(shapes, [2]int{9, 45}, [2]int{3, 1}) // float rows of any length
			}
			for _, sh := range shapes {
				rows, cols := sh[0], sh[1]
				t.Run(fmt.Sprintf("%s/%s/%dx%d", variantName(d), typ, rows, cols), func(t *testing.T) {
					checkMatMul(t, d, typ, rows, cols, []int{1, 2, 3, 8, 13})
				})
			}
		}
	}
}

func checkMatMul(t *testing.T, d *Device, typ gguf.Type, rows, cols int, batches []int) {
	rng := rand.New(rand.NewPCG(uint64(typ), uint64(rows*cols)))
	data := testWeights(t, typ, rows, cols, rng)
	wref, err := quant.Dequantize(nil, typ, data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.UploadWeights("test", typ, rows, cols, 1, data)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	for _, ncols := range batches {
		x := make([]float32, ncols*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		got := runMatMul(t, d, w, x, ncols)
		want, bound := referenceMatMul(wref, x, rows, cols, ncols)
		compareOutputs(t, fmt.Sprintf("batch %d", ncols), got, want, bound, matmulTolerance)
	}
}

// runMatMul uploads x, poisons y with NaN, multiplies and reads y back.
func runMatMul(t *testing.T, d *Device, w *Weights, x []float32, ncols int) []float32 {
	t.Helper()
	xb, err := d.Alloc(int64(4*len(x)), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Free()
	yb, err := d.Alloc(int64(4*w.Rows*ncols), "y")
	if err != nil {
		t.Fatal(err)
	}
	defer yb.Free()
	if err := d.WriteFloats(xb, 0, x); err != nil {
		t.Fatal(err)
	}
	poison(t, d, yb, w.Rows*ncols)
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MatMul(w, Columns{xb, 0, w.Cols}, Columns{yb, 0, w.Rows}, ncols); err != nil {
		b.Submit()
		t.Fatal(err)
	}
	if err := b.Submit(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, w.Rows*ncols)
	if err := d.ReadFloats(yb, 0, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func poison(t *testing.T, d *Device, b *Buffer, n int) {
	nan := make([]float32, n)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	if err := d.WriteFloats(b, 0, nan); err != nil {
		t.Fatal(err)
	}
}

func compareOutputs(t *testing.T, what string, got []float32, want, bound []float64, tol float64) {
	t.Helper()
	bad := 0
	for i := range want {
		diff := math.Abs(float64(got[i]) - want[i])
		if !(diff <= tol*bound[i]+1e-30) {
			if bad < 5 {
				t.Errorf("%s: output %d is %g, reference %g (|Δ| %.3g > %.3g)", what, i, got[i], want[i], diff, tol*bound[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d outputs of %d out of tolerance", what, bad, len(want))
	}
}

// TestMatMulSplitsLargeMatrices bounds buffers below the matrix, so it is
// split into parts of whole rows, and requires the same product.
func TestMatMulSplitsLargeMatrices(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{MaxBuffer: 14 * 4 * 34})
	rows, cols := 45, 128 // 45 rows of 4 Q8_0 blocks; 14 rows a part
	rng := rand.New(rand.NewPCG(1, 2))
	data := testWeights(t, gguf.TypeQ8_0, rows, cols, rng)
	w, err := d.UploadWeights("split", gguf.TypeQ8_0, rows, cols, 1, data)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	if len(w.parts) != 4 {
		t.Fatalf("%d parts, want 4", len(w.parts))
	}
	wref, _ := quant.Dequantize(nil, gguf.TypeQ8_0, data)
	x := make([]float32, 3*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	got := runMatMul(t, d, w, x, 3)
	want, bound := referenceMatMul(wref, x, rows, cols, 3)
	compareOutputs(t, "split", got, want, bound, matmulTolerance)
}

// TestMatMulExperts routes each of a batch's rows to experts of a stack,
// every weight type, and checks every (row, expert) product; the ids sit
// past the start of their buffer, as the engine's do in its arena.
func TestMatMulExperts(t *testing.T) {
	for _, opts := range testVariants(t) {
		d := openTestDevice(t, opts)
		for _, typ := range MatMulTypes() {
			t.Run(fmt.Sprintf("%s/%s", variantName(d), typ), func(t *testing.T) {
				checkExperts(t, d, typ)
			})
		}
	}
}

func checkExperts(t *testing.T, d *Device, typ gguf.Type) {
	const experts, rows, tokens, topK = 6, 19, 5, 3
	cols := 2 * int(max(typ.BlockSize(), 32)) // two blocks of a K- or i-quant
	rng := rand.New(rand.NewPCG(uint64(typ), 9))
	var data []byte
	for e := 0; e < experts; e++ {
		data = append(data, testWeights(t, typ, rows, cols, rng)...)
	}
	wref, _ := quant.Dequantize(nil, typ, data)
	w, err := d.UploadWeights("experts", typ, rows, cols, experts, data)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	ids := make([]uint32, tokens*topK)
	for i := range ids {
		ids[i] = uint32(rng.IntN(experts))
	}
	x := make([]float32, tokens*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	const idsOff = 7
	idb, _ := d.Alloc(int64(4*(idsOff+len(ids))), "ids")
	xb, _ := d.Alloc(int64(4*len(x)), "x")
	yb, _ := d.Alloc(int64(4*rows*len(ids)), "y")
	defer idb.Free()
	defer xb.Free()
	defer yb.Free()
	idf := make([]float32, len(ids))
	for i, v := range ids {
		idf[i] = math.Float32frombits(v)
	}
	d.WriteFloats(idb, idsOff, idf)
	d.WriteFloats(xb, 0, x)
	poison(t, d, yb, rows*len(ids))
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MatMulExperts(w, Span{Buf: idb, Off: idsOff}, Columns{xb, 0, cols}, topK, Columns{yb, 0, rows}, len(ids)); err != nil {
		b.Submit()
		t.Fatal(err)
	}
	if err := b.Submit(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*len(ids))
	d.ReadFloats(yb, 0, got)
	for slot, e := range ids {
		tok := slot / topK
		want, bound := referenceMatMul(wref[int(e)*rows*cols:(int(e)+1)*rows*cols], x[tok*cols:(tok+1)*cols], rows, cols, 1)
		compareOutputs(t, fmt.Sprintf("token %d expert %d", tok, e), got[slot*rows:(slot+1)*rows], want, bound, matmulTolerance)
	}
}

// TestMatMulExpertsSplitStack bounds buffers below a stack of experts, so
// it is held in parts of whole experts, and requires every routed
// product still: each part's dispatch computes the columns of its own
// experts.
func TestMatMulExpertsSplitStack(t *testing.T) {
	const experts, rows, cols = 7, 32, 64
	perExpert := rows * int(gguf.TypeQ8_0.RowBytes(cols))
	d := openTestDevice(t, DeviceOptions{MaxBuffer: int64(3 * perExpert)})
	rng := rand.New(rand.NewPCG(4, 5))
	data := testWeights(t, gguf.TypeQ8_0, experts*rows, cols, rng)
	w, err := d.UploadWeights("split experts", gguf.TypeQ8_0, rows, cols, experts, data)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Free()
	if len(w.parts) != 3 {
		t.Fatalf("%d parts, want 3 (3 + 3 + 1 experts)", len(w.parts))
	}
	wref, _ := quant.Dequantize(nil, gguf.TypeQ8_0, data)
	ids := []uint32{6, 0, 3, 2, 5, 1, 4, 6}
	x := make([]float32, len(ids)*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	idf := make([]float32, len(ids))
	for i, v := range ids {
		idf[i] = math.Float32frombits(v)
	}
	idb, xb, yb := onDevice(t, d, idf), onDevice(t, d, x), onDevice(t, d, make([]float32, rows*len(ids)))
	poison(t, d, yb, rows*len(ids))
	record(t, d, func(b *Batch) error {
		return b.MatMulExperts(w, Span{Buf: idb}, Columns{xb, 0, cols}, 1, Columns{yb, 0, rows}, len(ids))
	})
	got := fromDevice(t, d, yb, 0, rows*len(ids))
	for c, e := range ids {
		want, bound := referenceMatMul(wref[int(e)*rows*cols:(int(e)+1)*rows*cols], x[c*cols:(c+1)*cols], rows, cols, 1)
		compareOutputs(t, fmt.Sprintf("column %d expert %d", c, e), got[c*rows:(c+1)*rows], want, bound, matmulTolerance)
	}
}
