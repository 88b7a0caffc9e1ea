package quant

// Tiles: one weight matrix against several rows of activations at once,
// as a prompt or a batch of tokens needs. A tile is TileRows weight rows
// by TileCols activation rows; every one of its results is bit for bit
// what Dotter.Dot returns for that pair of rows, because a tile kernel
// keeps one accumulator per result and updates it with the same
// operations, in the same order, as the single-row kernel does. What a
// tile saves is loads: each weight block is read once for TileCols
// activation rows and each activation block once for TileRows weight
// rows, and nothing has to be summed across vector lanes.

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
)

// TileRows is the number of weight rows and TileCols the number of
// activation rows one Dotter.DotTile call covers; TileSpan the most
// activation rows one Dotter.DotTileSpan call covers, a whole number of
// groups of TileCols.
const (
	TileRows = 4
	TileCols = 8
	TileSpan = 4 * TileCols
)

// hasDotTile says, for each weight type, whether it has a kernel that
// computes a whole tile (dotTile): TileRows weight rows of nb blocks,
// stride bytes apart, against one group of TileCols activation rows as
// tilePack wrote them, tile[c][r] being row r's result with activation row
// c. dotTile calls the kernels directly, not through a table of
// functions, so that the tile stays on DotTile's stack: a pointer passed
// through a function value escapes, and a prefill would allocate a tile
// per call.
var hasDotTile [gguf.TypeCount]bool

// hasDotSpan says, for each weight type, whether it has a kernel that
// computes a whole span (dotSpan): TileRows weight rows against up to
// TileSpan activation rows as PrepareTile keeps them, each weight block
// decoded once for all of them. Such a type's DotTile is a span of one
// group.
var hasDotSpan [gguf.TypeCount]bool

// tilePack holds, for each activation type some tile kernel reads, the
// function that lays n rows of nb blocks out for it, appending to dst,
// and the bytes one block of a group of TileCols rows takes there.
var tilePack [gguf.TypeCount]struct {
	pack       func(dst, a []byte, n, nb int) []byte
	blockBytes int
}

// TileActs is a batch of activation rows prepared by Dotter.PrepareTile
// for Dotter.DotTile: the rows themselves, and, where a tile kernel reads
// their type in a layout of its own, a copy laid out for it, TileCols
// rows at a time (the K-quants' tiles read Q8_K rows as they are). Every
// Dotter with the same activation type can use it. Its buffers are
// reused by the next PrepareTile.
type TileActs struct {
	vt         gguf.Type
	n          int
	rowBytes   int
	rows       []byte // the n rows as given to PrepareTile (not a copy)
	packed     []byte // the tile kernels' layout, or empty
	groupBytes int    // bytes of one group of TileCols rows in packed
}

// PrepareTile makes ta hold the n activation rows in a, each d's
// activation row length, for DotTile. It keeps a itself, which must not
// change while ta is in use.
func (d Dotter) PrepareTile(ta *TileActs, a []byte, n int) {
	if n < 0 || len(a) != n*d.aBytes {
		panic(fmt.Sprintf("quant: Dotter(%s).PrepareTile: %d bytes for %d activation rows of %d", d.t, len(a), n, d.aBytes))
	}
	vt := dotKernels[d.t].vt
	ta.vt, ta.n, ta.rowBytes, ta.rows = vt, n, d.aBytes, a
	ta.packed, ta.groupBytes = ta.packed[:0], 0
	if p := tilePack[vt]; p.pack != nil {
		ta.packed = p.pack(ta.packed, a, n, d.actBlocks())
		ta.groupBytes = d.actBlocks() * p.blockBytes
	}
}

// actBlocks is the number of blocks of an activation row (NVFP4's
// blocks of 64 take two Q8_0 blocks each).
func (d Dotter) actBlocks() int { return d.aBytes / int(dotKernels[d.t].vt.BlockBytes()) }

// TileBytes is the capacity PrepareTile needs in the buffer of its tile
// layout for n activation rows (SetTileBuffer): 0 where no tile kernel
// reads d's activation type. A last group of fewer than TileCols rows
// takes a whole group, and TileCols rows more while it is padded.
func (d Dotter) TileBytes(n int) int {
	p := tilePack[dotKernels[d.t].vt]
	if p.pack == nil || n <= 0 {
		return 0
	}
	size := (n + TileCols - 1) / TileCols * d.actBlocks() * p.blockBytes
	if n%TileCols != 0 {
		size += TileCols * d.aBytes
	}
	return size
}

// SetTileBuffer makes the next PrepareTile lay the rows out in buf, which
// then allocates nothing when buf holds Dotter.TileBytes of them: a
// caller whose scratch lives outside the Go heap keeps the layout there.
func (ta *TileActs) SetTileBuffer(buf []byte) { ta.packed = buf[:0] }

// DotTile sets out[c·outStride + r] to Dot(weight row r, activation row
// j+c) for r < TileRows and c < min(TileCols, n−j), n being the number
// of rows ta holds and weight row r w[r·wStride:][:row bytes]. j must be
// a multiple of TileCols. A weight type without a tile kernel gets the
// four-row kernel once per activation row.
func (d Dotter) DotTile(w []byte, wStride int, ta *TileActs, j int, out []float32, outStride int) {
	cols := min(TileCols, ta.n-j)
	d.checkTile("DotTile", w, wStride, ta, j, cols, out, outStride)
	if hasDotSpan[d.t] && ta.vt == dotKernels[d.t].vt {
		sub := *ta
		sub.n = j + cols
		dotSpan(d.t, w, wStride, &sub, j, d.nb, out, outStride)
		return
	}
	if hasDotTile[d.t] && ta.vt == dotKernels[d.t].vt && ta.groupBytes > 0 {
		var tile [TileCols][TileRows]float32
		dotTile(d.t, w, wStride, ta, j, d.nb, &tile)
		for c := range cols {
			*(*[TileRows]float32)(out[c*outStride:]) = tile[c]
		}
		return
	}
	for c := range cols {
		a := ta.rows[(j+c)*ta.rowBytes : (j+c+1)*ta.rowBytes]
		d.Dot4(w, wStride, a, (*[TileRows]float32)(out[c*outStride:]))
	}
}

// group is the tile layout of the group of TileCols activation rows
// that starts at row j.
func (ta *TileActs) group(j int) []byte {
	g := j / TileCols * ta.groupBytes
	return ta.packed[g : g+ta.groupBytes]
}

// rowOffsets are the byte offsets, from row j, of the rows of the span
// that starts there, for a span kernel, which reads the rows as they
// are: past the span's last row (ta's last, or j+TileSpan−1) they repeat
// it, so that a kernel padding a span reads only rows ta holds.
func (ta *TileActs) rowOffsets(j int) [TileSpan]int {
	var offs [TileSpan]int
	last := min(TileSpan, ta.n-j) - 1
	for c := range offs {
		offs[c] = min(c, last) * ta.rowBytes
	}
	return offs
}

// DotTileSpan is DotTile for activation rows j to min(j+TileSpan, end)−1,
// out[c·outStride + r] being Dot(weight row r, activation row j+c); j
// must be a multiple of TileCols and end at most the rows ta holds. A
// weight type with a span kernel decodes each block of its four rows
// once for all of them; any other type runs DotTile group by group.
func (d Dotter) DotTileSpan(w []byte, wStride int, ta *TileActs, j, end int, out []float32, outStride int) {
	if end < 0 || end > ta.n {
		panic(fmt.Sprintf("quant: Dotter(%s).DotTileSpan: activation rows up to %d of %d", d.t, end, ta.n))
	}
	if end < ta.n {
		sub := *ta
		sub.n = end
		ta = &sub
	}
	if !hasDotSpan[d.t] || ta.vt != dotKernels[d.t].vt {
		for g := j; g < min(j+TileSpan, ta.n); g += TileCols {
			d.DotTile(w, wStride, ta, g, out[(g-j)*outStride:], outStride)
		}
		return
	}
	d.checkTile("DotTileSpan", w, wStride, ta, j, min(TileSpan, ta.n-j), out, outStride)
	dotSpan(d.t, w, wStride, ta, j, d.nb, out, outStride)
}

// checkTile panics, naming op, on what only a caller that sized its
// buffers wrongly can pass: four weight rows shorter than the stride
// says, activation rows of another length or a first row j that is not
// a group's, outputs too short for cols activation rows.
func (d Dotter) checkTile(op string, w []byte, wStride int, ta *TileActs, j, cols int, out []float32, outStride int) {
	switch {
	case wStride < d.wBytes || len(w) < (TileRows-1)*wStride+d.wBytes:
		panic(fmt.Sprintf("quant: Dotter(%s).%s: %d weight bytes at stride %d, want %d rows of %d", d.t, op, len(w), wStride, TileRows, d.wBytes))
	case ta.rowBytes != d.aBytes || j < 0 || j%TileCols != 0 || cols <= 0:
		panic(fmt.Sprintf("quant: Dotter(%s).%s: activation rows %d of %d rows of %d bytes, want rows of %d from a multiple of %d",
			d.t, op, j, ta.n, ta.rowBytes, d.aBytes, TileCols))
	case outStride < TileRows || len(out) < (cols-1)*outStride+TileRows:
		panic(fmt.Sprintf("quant: Dotter(%s).%s: %d outputs at stride %d for %d activation rows", d.t, op, len(out), outStride, cols))
	}
}
