package engine

import (
	"math"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// acts is a batch of activation rows converted to one vec_dot type, ready
// to be dotted with weight rows.
type acts struct {
	vt       gguf.Type
	cols     int
	n        int // rows (tokens)
	rowBytes int
	data     []byte

	tiles quant.TileActs // data prepared for tiles, when tiled
	tiled bool
	ar    *cpuArena // where data and the tiles' layout live; nil: the heap
}

func (a *acts) row(t int) []byte { return a.data[t*a.rowBytes : (t+1)*a.rowBytes] }

// tileActs returns a's rows prepared for d's tiles, preparing them on
// first use after each conversion: every matrix that takes a's type
// shares them.
func (a *acts) tileActs(d quant.Dotter) *quant.TileActs {
	if !a.tiled {
		if a.ar != nil {
			a.tiles.SetTileBuffer(a.ar.bytes(d.TileBytes(a.n)))
		}
		d.PrepareTile(&a.tiles, a.data, a.n)
		a.tiled = true
	}
	return &a.tiles
}

// convert fills a with the n rows of x (each cols long) in type vt, as
// ggml does to src1 before a matrix multiplication: in bytes of the step's
// arena when a has one (exactly what the rows take, outside the Go heap),
// else in a's own buffer, which grows to the largest batch it converted.
func (a *acts) convert(vt gguf.Type, x []float32, cols, n int) {
	a.vt, a.cols, a.n = vt, cols, n
	a.rowBytes = int(vt.RowBytes(int64(cols)))
	if a.ar != nil {
		a.data = a.ar.bytes(n * a.rowBytes)
	}
	a.data = a.data[:0]
	a.tiled = false
	for t := range n {
		var err error
		a.data, err = quant.QuantizeActivations(a.data, vt, x[t*cols:(t+1)*cols])
		if err != nil {
			panic("engine: " + err.Error()) // newMatrix checked the block sizes
		}
	}
}

// actSet converts one batch of inputs to each vec_dot type on first use,
// so q, k and v (or gate and up) share the conversion as in ggml.
type actSet struct {
	x    []float32
	cols int
	n    int
	by   map[gguf.Type]*acts
	ar   *cpuArena // the arena its conversions take their bytes from, or nil
}

func (s *actSet) reset(x []float32, cols, n int) {
	s.x, s.cols, s.n = x, cols, n
	if s.by == nil {
		s.by = map[gguf.Type]*acts{}
	}
	for _, a := range s.by {
		a.n = -1
	}
}

func (s *actSet) get(vt gguf.Type) *acts {
	a := s.by[vt]
	if a == nil {
		a = &acts{ar: s.ar}
		s.by[vt] = a
	}
	if a.n != s.n || a.vt != vt {
		a.convert(vt, s.x, s.cols, s.n)
	}
	return a
}

// mulMat computes out[t·rows + r] = w.row(r) · a.row(t) for every row and
// token, rows spread over the workers. With enough tokens, tiles of
// weight rows by tokens do the bulk; the four-row kernel, token by token,
// takes the tokens left over and the single-row kernel the last rows of a
// chunk. Every output is its row's kernel's result, bit for bit, whichever
// path computes it.
func (w *workers) mulMat(m *matrix, a *acts, out []float32) {
	w.loop.Lock()
	defer w.loop.Unlock()
	j := &w.mul
	j.m, j.a, j.out = m, a, out
	j.tiled, j.ta = tiledTokens(a.n), nil
	if j.tiled > 0 {
		j.ta = a.tileActs(m.dot)
	}
	grain := max(4, 4096/max(1, m.rowBytes*a.n)) // about a page of weights per chunk
	w.runLocked(m.rows, grain, j)
	*j = mulJob{}
}

// mulJob is one matrix product's loop over weight rows; the workers keep
// one, so that a product allocates nothing.
type mulJob struct {
	m     *matrix
	a     *acts
	ta    *quant.TileActs
	tiled int
	out   []float32
}

func (j *mulJob) run(_, lo, hi int) {
	m, a, out := j.m, j.a, j.out
	rows, n, tiled := m.rows, a.n, j.tiled
	four := lo + (hi-lo)&^3
	if tiled > 0 {
		mulTiles(m, j.ta, tiled, lo, four, out)
	}
	// Four rows at a time share each activation load.
	for r := lo; r < four; r += 4 {
		wr := m.data[r*m.rowBytes : (r+4)*m.rowBytes]
		for t := tiled; t < n; t++ {
			m.dot.Dot4(wr, m.rowBytes, a.row(t), (*[4]float32)(out[t*rows+r:]))
		}
	}
	for r := four; r < hi; r++ {
		wr := m.row(r)
		for t := range n {
			out[t*rows+r] = m.dot.Dot(wr, a.row(t))
		}
	}
}

// tileMinTokens is the fewest tokens worth a tile of their own: a tile
// costs the same however many of its quant.TileCols columns are padding,
// and the four-row kernel, once per token, measured about a quarter of a
// full Q8_0 tile, so that a padded tile is the cheaper from five tokens.
const tileMinTokens = 5

// tiledTokens is how many of n tokens go through tiles, from the first:
// whole groups of quant.TileCols, and the rest too when there are enough
// of them.
func tiledTokens(n int) int {
	tiled := n / quant.TileCols * quant.TileCols
	if n-tiled >= tileMinTokens {
		tiled = n
	}
	return tiled
}

// tileBlockBytes bounds the weights mulTiles runs each group of tokens
// over before moving to the next group: small enough to stay in the
// core's L2 cache with a group's activations, so that the weights come
// from memory once while every group reuses them.
const tileBlockBytes = 128 << 10

// mulTiles computes tokens [0, nt) of weight rows [lo, hi), a multiple
// of quant.TileRows rows, by spans of tiles: block by block of rows, each
// block against every span of tokens in turn (a span decodes each weight
// block once for all its tokens, where the type has a span kernel).
func mulTiles(m *matrix, ta *quant.TileActs, nt, lo, hi int, out []float32) {
	rb := m.rowBytes
	step := max(quant.TileRows, tileBlockBytes/rb/quant.TileRows*quant.TileRows)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(hi, r0+step)
		for j := 0; j < nt; j += quant.TileSpan {
			for r := r0; r < r1; r += quant.TileRows {
				m.dot.DotTileSpan(m.data[r*rb:(r+quant.TileRows)*rb], rb, ta, j, nt, out[j*m.rows+r:], m.rows)
			}
		}
	}
}

// rmsNorm writes x·w/sqrt(mean(x²)+eps) to out, as ggml_rms_norm followed
// by ggml_mul: the squares summed in double, the scale applied, then the
// weight.
func rmsNorm(out, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(float32(v * v))
	}
	mean := float32(sum / float64(len(x)))
	scale := float32(1) / float32(math.Sqrt(float64(mean+eps)))
	if math.IsInf(float64(mean), 1) {
		// A square overflowed float32 (a value of 2^64 or more): ggml's
		// scale is then 0 and the row silently becomes zeros. NaN instead
		// makes the forward pass's checks refuse it (NumericError).
		scale = float32(math.NaN())
	}
	i0 := 0
	if vecScaleMul != nil {
		i0 = len(x) &^ 7
		vecScaleMul(out[:i0], x[:i0], w[:i0], scale)
	}
	for i := i0; i < len(x); i++ {
		out[i] = float32(x[i]*scale) * w[i]
	}
}

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// sigmoid is 1/(1+e^−x), as ggml_vec_sigmoid_f32 computes it.
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// silu is x/(1+e^−x).
func silu(x float32) float32 { return x / (1 + expf(-x)) }

// rope rotates the first nRot values of one head in place: pairs (2i,
// 2i+1) in NORM style, (i, i+nRot/2) in NEOX style.
func rope(x []float32, cs []float32, nRot int, neox bool) {
	half := nRot / 2
	for i := 0; i < half; i++ {
		c, s := cs[2*i], cs[2*i+1]
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+half
		}
		x0, x1 := x[a], x[b]
		x[a] = float32(x0*c) - float32(x1*s)
		x[b] = float32(x0*s) + float32(x1*c)
	}
}
