//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/gguftool/gguftool/gguf"
)

//go:noescape
func dotQ8_0TileAVX2(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32)

//go:noescape
func dotQ8_0TileAVX512(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32)

// vecDotQ8_0Tile is the Q8_0 tile kernel: four weight rows, stride
// bytes apart, against one group of activation rows packed by
// packTileQ8_0.
func vecDotQ8_0Tile(w []byte, stride int, group []byte, nb int, tile *[TileCols][TileRows]float32) {
	if nb == 0 {
		*tile = [TileCols][TileRows]float32{}
		return
	}
	_ = w[(TileRows-1)*stride+nb*blockQ8_0-1]
	_ = group[nb*tileQ8_0Block-1]
	if useAVX512() {
		dotQ8_0TileAVX512(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile)
		return
	}
	dotQ8_0TileAVX2(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile)
}

// tileQ8_0Block is the size of one Q8_0 block of a group of TileCols
// activation rows in the tile layout: the rows' scales as float32, then
// 16 runs of TileCols pairs of sign-extended quants.
const tileQ8_0Block = 4*TileCols + 16*4*TileCols

//go:noescape
func packQ8_0TileAVX2(dst, a *byte, rowBytes, nb int)

// packTileQ8_0 appends n Q8_0 activation rows of nb blocks to dst in the
// layout the Q8_0 tile kernel reads: for each group of TileCols rows, for
// each block, the rows' scales converted to float32, then for each pair k
// of the block's 32 quants, every row's pair as two int16s, so that one
// 32-byte load holds pair k of the whole group, ready to be multiplied
// with a broadcast pair of weights. The conversions are exact, so the
// kernel computes with the values the single-row kernel does. A last
// group of fewer rows is padded with zero rows, staged after the packed
// groups in dst's spare capacity.
func packTileQ8_0(dst, a []byte, n, nb int) []byte {
	rowBytes, groupBytes := nb*blockQ8_0, nb*tileQ8_0Block
	full, partial := n/TileCols, n%TileCols != 0
	size, pad := full*groupBytes, 0
	if partial {
		size, pad = size+groupBytes, TileCols*rowBytes
	}
	off := len(dst)
	dst = slices.Grow(dst, size+pad)
	out := dst[off : off+size+pad]
	for g := range full {
		packQ8_0TileAVX2(&out[g*groupBytes], &a[g*TileCols*rowBytes], rowBytes, nb)
	}
	if partial {
		rows := out[size:]
		clear(rows[copy(rows, a[full*TileCols*rowBytes:]):])
		packQ8_0TileAVX2(&out[full*groupBytes], &rows[0], rowBytes, nb)
	}
	return dst[:off+size]
}

// The tile kernels run at the AVX2 level; the Q8_0 activations they read
// are packed for them only then.
func init() {
	if !useAVX2() {
		return
	}
	tilePack[gguf.TypeQ8_0].pack = packTileQ8_0
	tilePack[gguf.TypeQ8_0].blockBytes = tileQ8_0Block
	tilePack[gguf.TypeQ8_1].pack = packTileQ8_1
	tilePack[gguf.TypeQ8_1].blockBytes = tileQ8_1Block
	for _, t := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeIQ4_NL, gguf.TypeQ4_0, gguf.TypeMXFP4, gguf.TypeQ5_0, gguf.TypeNVFP4, gguf.TypeQ4_1, gguf.TypeQ5_1} {
		hasDotTile[t] = true
	}
	hasDotSpan[gguf.TypeQ2_K] = true
	hasDotSpan[gguf.TypeIQ2_XXS] = true
	hasDotSpan[gguf.TypeIQ3_XXS] = true
	hasDotSpan[gguf.TypeIQ4_XS] = true
	hasDotSpan[gguf.TypeTQ2_0] = true
	hasDotSpan[gguf.TypeIQ2_XS] = true
	hasDotSpan[gguf.TypeIQ2_S] = true
	hasDotSpan[gguf.TypeIQ3_S] = true
	hasDotSpan[gguf.TypeQ3_K] = true
	hasDotSpan[gguf.TypeQ4_K] = true
	hasDotSpan[gguf.TypeQ5_K] = true
	hasDotSpan[gguf.TypeQ6_K] = true
}

// dotSpan runs the span kernel of weight type t (hasDotSpan[t]).
func dotSpan(t gguf.Type, w []byte, stride int, ta *TileActs, j, nb int, out []float32, outStride int) {
	vecDotKSpan(t, w, stride, ta, j, nb, out, outStride)
}

//go:noescape
func dotNibbleTileAVX2(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32, tab *[16]int8, blockBytes, kind, actBytes int)

//go:noescape
func dotNibbleTileAVX512(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32, tab *[16]int8, blockBytes, kind, actBytes int)

// The kinds of dotNibbleTileAVX2: where the block's scale is and how the
// block sums meet the scales (dot_tile_amd64.s).
const (
	nibbleIQ4_NL = iota
	nibbleQ4_0
	nibbleMXFP4
	nibbleQ5_0
	nibbleQ4_1
	nibbleQ5_1
)

// vecDotNibbleTile is the tile kernel of the 4-bit types with a
// 16-level table against Q8_0 (IQ4_NL, Q4_0, MXFP4), Q5_0, whose fifth
// bits take the table's place, and Q4_1 and Q5_1 against Q8_1: four
// weight rows,
// stride bytes apart, against one group of activation rows packed by
// packTileQ8_0 (packTileQ8_1 for Q4_1 and Q5_1).
func vecDotNibbleTile(w []byte, stride int, group []byte, nb int, tile *[TileCols][TileRows]float32, tab *[16]int8, blockBytes, kind int) {
	if nb == 0 {
		*tile = [TileCols][TileRows]float32{}
		return
	}
	actBytes := tileQ8_0Block
	if kind >= nibbleQ4_1 {
		actBytes = tileQ8_1Block
	}
	_ = w[(TileRows-1)*stride+nb*blockBytes-1]
	_ = group[nb*actBytes-1]
	if useAVX512() {
		dotNibbleTileAVX512(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile, tab, blockBytes, kind, actBytes)
		return
	}
	dotNibbleTileAVX2(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile, tab, blockBytes, kind, actBytes)
}

// tileQ8_1Block is the size of one Q8_1 block of a group of TileCols
// activation rows in the tile layout: Q8_0's (the rows' d as float32,
// then the pairs), then the rows' s as float32.
const tileQ8_1Block = tileQ8_0Block + 4*TileCols

// packTileQ8_1 appends n Q8_1 activation rows of nb blocks to dst in the
// layout the Q4_1 and Q5_1 tile kernels read (tileQ8_1Block a block of a
// group of TileCols rows; a last group of fewer rows padded with zero
// rows). The conversions are exact, so the kernels compute with the
// values the single-row kernels do.
func packTileQ8_1(dst, a []byte, n, nb int) []byte {
	rowBytes, groupBytes := nb*blockQ8_1, nb*tileQ8_1Block
	groups := (n + TileCols - 1) / TileCols
	off := len(dst)
	dst = slices.Grow(dst, groups*groupBytes)[:off+groups*groupBytes]
	out := dst[off:]
	for g := range groups {
		for b := range nb {
			blk := out[g*groupBytes+b*tileQ8_1Block:][:tileQ8_1Block]
			clear(blk)
			for c := range min(TileCols, n-g*TileCols) {
				y := a[(g*TileCols+c)*rowBytes+b*blockQ8_1:][:blockQ8_1]
				binary.LittleEndian.PutUint32(blk[4*c:], math.Float32bits(f16At(y)))
				binary.LittleEndian.PutUint32(blk[tileQ8_0Block+4*c:], math.Float32bits(f16At(y[2:])))
				for k := range 16 {
					p := blk[4*TileCols+4*TileCols*k+4*c:]
					binary.LittleEndian.PutUint16(p, uint16(int16(int8(y[4+2*k]))))
					binary.LittleEndian.PutUint16(p[2:], uint16(int16(int8(y[5+2*k]))))
				}
			}
		}
	}
	return dst
}

//go:noescape
func dotNVFP4TileAVX2(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32, tab *[16]int8, scales *[256]float32)

//go:noescape
func dotNVFP4TileAVX512(w *byte, stride int, p *byte, nb int, tile *[TileCols][TileRows]float32, tab *[16]int8, scales *[256]float32)

// vecDotNVFP4Tile is the NVFP4 tile kernel: four weight rows, stride
// bytes apart, against one group of activation rows packed by
// packTileQ8_0, two Q8_0 blocks to a weight block.
func vecDotNVFP4Tile(w []byte, stride int, group []byte, nb int, tile *[TileCols][TileRows]float32) {
	if nb == 0 {
		*tile = [TileCols][TileRows]float32{}
		return
	}
	_ = w[(TileRows-1)*stride+nb*blockNVFP4-1]
	_ = group[2*nb*tileQ8_0Block-1]
	if useAVX512() {
		dotNVFP4TileAVX512(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile, &kvaluesMXFP4, &ue4m3Half)
		return
	}
	dotNVFP4TileAVX2(unsafe.SliceData(w), stride, unsafe.SliceData(group), nb, tile, &kvaluesMXFP4, &ue4m3Half)
}

// dotTile runs the tile kernel of weight type t (hasDotTile[t]) on the
// group of activation rows of ta that starts at row j.
func dotTile(t gguf.Type, w []byte, stride int, ta *TileActs, j, nb int, tile *[TileCols][TileRows]float32) {
	switch t {
	case gguf.TypeQ8_0:
		vecDotQ8_0Tile(w, stride, ta.group(j), nb, tile)
	case gguf.TypeIQ4_NL:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &kvaluesIQ4NL, blockIQ4NL, nibbleIQ4_NL)
	case gguf.TypeQ4_0:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &levelsQ4_0, blockQ4_0, nibbleQ4_0)
	case gguf.TypeMXFP4:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &kvaluesMXFP4, blockMXFP4, nibbleMXFP4)
	case gguf.TypeQ5_0:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &levelsQ4_0, blockQ5_0, nibbleQ5_0)
	case gguf.TypeNVFP4:
		vecDotNVFP4Tile(w, stride, ta.group(j), nb, tile)
	case gguf.TypeQ4_1:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &levelsQ4_1, blockQ4_1, nibbleQ4_1)
	case gguf.TypeQ5_1:
		vecDotNibbleTile(w, stride, ta.group(j), nb, tile, &levelsQ4_1, blockQ5_1, nibbleQ5_1)
	default:
		panic("quant: no tile kernel for " + t.String())
	}
}

// tileKScratch is the working memory of the K-quants' tile kernels
// (dot_q45k_amd64.s lays it out): per result (weight row r, activation
// row c), the single-row kernel's float accumulators; and the current
// block of the four weight rows, decoded.
type tileKScratch struct {
	acc    [TileRows][TileSpan][8]float32
	accM   [TileRows][TileSpan][4]float32
	levels [TileRows][8][32]byte
	scales [TileRows][8][16]int16
	mins   [TileRows][16]int16
	d      [TileRows][2]float32
}

//go:noescape
func dotQ2_KTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ2_KTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotIQ2XXSTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotIQ2XXSTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotIQ3XXSTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint32)

//go:noescape
func dotIQ3XXSTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint32)

//go:noescape
func dotIQ4XSTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, tab *int8)

//go:noescape
func dotIQ3STileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint32)

//go:noescape
func dotIQ3STileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint32)

//go:noescape
func dotIQ2STileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotIQ2STileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotIQ2XSTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotIQ2XSTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch, grid *uint64)

//go:noescape
func dotTQ2_0TileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotTQ2_0TileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ3_KTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ3_KTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ4_KTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ4_KTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ5_KTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ5_KTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ6_KTileAVX2(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

//go:noescape
func dotQ6_KTileAVX512(w *byte, stride int, a *byte, offs *[TileSpan]int, ncols, nb int, s *tileKScratch)

// spanSumfScale holds, for the span kernels that keep one float a
// result, the factor their single-row kernels multiply it by at the end
// (0 for the others).
var spanSumfScale = [gguf.TypeCount]float32{gguf.TypeQ2_K: 1, gguf.TypeIQ4_XS: 1, gguf.TypeIQ2_XXS: 0.125, gguf.TypeIQ3_XXS: 0.25,
	gguf.TypeTQ2_0: 1, gguf.TypeIQ2_XS: 0.125, gguf.TypeIQ2_S: 0.125, gguf.TypeIQ3_S: 1}

// vecDotKSpan is the span kernel of K-quant t at the level in use: four
// weight rows, stride bytes apart, against the Q8_K rows of ta from row
// j, up to TileSpan of them, out[c·outStride + r] for weight row r and
// activation row j+c; each result reduced as t's single-row kernel
// reduces its accumulators. The kernels take activation rows four
// (AVX-512) or two (AVX2) at a time: a span of another length is padded
// with its last row, whose repeated results are not kept.
func vecDotKSpan(t gguf.Type, w []byte, stride int, ta *TileActs, j, nb int, out []float32, outStride int) {
	var s tileKScratch
	cols := min(TileSpan, ta.n-j)
	if nb > 0 {
		_ = w[(TileRows-1)*stride+nb*int(t.BlockBytes())-1]
		offs := ta.rowOffsets(j)
		a := ta.rows[j*ta.rowBytes:]
		_ = a[offs[cols-1]+nb*blockQ8K-1]
		wp, ap, ncols := unsafe.SliceData(w), unsafe.SliceData(a), (cols+3)&^3
		switch z := useAVX512(); {
		case t == gguf.TypeIQ2_XXS && z:
			dotIQ2XXSTileAVX512(wp, stride, ap, &offs, ncols, nb, &s, &iq2xxsGrid[0])
		case t == gguf.TypeIQ2_XXS:
			dotIQ2XXSTileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &iq2xxsGrid[0])
		case t == gguf.TypeIQ3_XXS && z:
			dotIQ3XXSTileAVX512(wp, stride, ap, &offs, ncols, nb, &s, &iq3xxsGrid[0])
		case t == gguf.TypeIQ3_XXS:
			dotIQ3XXSTileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &iq3xxsGrid[0])
		case t == gguf.TypeIQ3_S && z:
			dotIQ3STileAVX512(wp, stride, ap, &offs, ncols, nb, &s, &iq3sGrid[0])
		case t == gguf.TypeIQ3_S:
			dotIQ3STileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &iq3sGrid[0])
		case t == gguf.TypeIQ2_S && z:
			dotIQ2STileAVX512(wp, stride, ap, &offs, ncols, nb, &s, &iq2sGrid[0])
		case t == gguf.TypeIQ2_S:
			dotIQ2STileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &iq2sGrid[0])
		case t == gguf.TypeIQ2_XS && z:
			dotIQ2XSTileAVX512(wp, stride, ap, &offs, ncols, nb, &s, &iq2xsGrid[0])
		case t == gguf.TypeIQ2_XS:
			dotIQ2XSTileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &iq2xsGrid[0])
		case t == gguf.TypeTQ2_0 && z:
			dotTQ2_0TileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeTQ2_0:
			dotTQ2_0TileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeIQ4_XS:
			dotIQ4XSTileAVX2(wp, stride, ap, &offs, ncols, nb, &s, &kvaluesIQ4NL[0])
		case t == gguf.TypeQ2_K && z:
			dotQ2_KTileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ2_K:
			dotQ2_KTileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ3_K && z:
			dotQ3_KTileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ3_K:
			dotQ3_KTileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ4_K && z:
			dotQ4_KTileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ4_K:
			dotQ4_KTileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ5_K && z:
			dotQ5_KTileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ5_K:
			dotQ5_KTileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ6_K && z:
			dotQ6_KTileAVX512(wp, stride, ap, &offs, ncols, nb, &s)
		case t == gguf.TypeQ6_K:
			dotQ6_KTileAVX2(wp, stride, ap, &offs, ncols, nb, &s)
		default:
			panic("quant: no span kernel for " + t.String())
		}
	}
	if scale := spanSumfScale[t]; scale != 0 {
		// One float a result, activation row by activation row, times
		// the type's factor as iqSum applies it.
		sumf := (*[TileSpan][TileRows]float32)(unsafe.Pointer(&s.acc))
		for c := range cols {
			o := (*[TileRows]float32)(out[c*outStride:])
			for r := range TileRows {
				o[r] = sumf[c][r]
				if scale != 1 {
					o[r] = float32(scale * sumf[c][r])
				}
			}
		}
		return
	}
	for c := range cols {
		o := (*[TileRows]float32)(out[c*outStride:])
		for r := range TileRows {
			o[r] = hsumFloat8(&s.acc[r][c])
			switch m := &s.accM[r][c]; t {
			case gguf.TypeQ4_K: // acc_m's reduction: lanes 0+2 and 1+3, then those two
				o[r] += float32(float32(m[0]+m[2]) + float32(m[1]+m[3]))
			case gguf.TypeQ5_K: // summs
				o[r] += m[0]
			}
		}
	}
}
