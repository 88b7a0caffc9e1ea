package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// Random blocks (Config.RandomBlocks) write a quantized matrix as random
// blocks of its type instead of drawing floats and quantizing them. The
// quants are random bytes; the scales are chosen so that a block decodes
// to values of about the magnitude the float path would have drawn (the
// row's bound, gain·√(3/ne0) for a matrix, 1 for the token embedding),
// centred on zero, so a forward pass keeps finite, unit-scale activations.
// Quantizing a K-quant row from floats costs microseconds per block, which
// for the 17 GB of Qwen3-30B-A3B at Q4_K is hours on two cores; filling
// blocks with a generator's output runs at memory speed.
//
// Every block is a function of the seed, the tensor name and the row
// index, like the float path's values, but the two paths give different
// bytes: a model written with random blocks is a different model.

// blockGen fills one block from the row's stream with values within
// ±bound.
type blockGen func(g *rng, blk []byte, bound float32)

var blockGens = map[gguf.Type]blockGen{
	gguf.TypeQ4_0:  genQ4_0,
	gguf.TypeQ4_1:  genQ4_1,
	gguf.TypeQ5_0:  genQ5_0,
	gguf.TypeQ5_1:  genQ5_1,
	gguf.TypeQ8_0:  genQ8_0,
	gguf.TypeQ4_K:  genQ4_K,
	gguf.TypeQ5_K:  genQ5_K,
	gguf.TypeQ6_K:  genQ6_K,
	gguf.TypeMXFP4: genMXFP4,
}

// RandomBlockTypes are the quantized types Config.RandomBlocks generates
// directly, in type order.
func RandomBlockTypes() []gguf.Type {
	ts := make([]gguf.Type, 0, len(blockGens))
	for t := range blockGens {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

func randomBlockTypeNames() string {
	var names []string
	for _, t := range RandomBlockTypes() {
		names = append(names, strings.ToLower(t.String()))
	}
	return strings.Join(names, ", ")
}

// fillRandom fills every byte of b from the stream.
func (r *rng) fillRandom(b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.next())
		b = b[8:]
	}
	if len(b) > 0 {
		x := r.next()
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
	}
}

// intn returns a value in [lo, hi].
func (r *rng) intn(lo, hi int) int {
	return lo + int((r.next()>>33)%uint64(hi-lo+1))
}

// genRandomRow writes one row of random blocks of type t.
func genRandomRow(g *rng, t gguf.Type, row []byte, bound float32) {
	gen := blockGens[t]
	bb := int(t.BlockBytes())
	for off := 0; off < len(row); off += bb {
		blk := row[off : off+bb]
		g.fillRandom(blk)
		gen(g, blk, bound)
	}
}

// putF16 stores x as the block's fp16 field at off and returns the value
// stored, so that derived scales are computed from what a decoder reads.
func putF16(blk []byte, off int, x float32) float32 {
	h := quant.F32ToF16(x)
	binary.LittleEndian.PutUint16(blk[off:], h)
	return quant.F16ToF32(h)
}

// Legacy blocks: d·(q − offset), or d·q + m.

func genQ8_0(_ *rng, blk []byte, bound float32) { putF16(blk, 0, bound/127) }
func genQ4_0(_ *rng, blk []byte, bound float32) { putF16(blk, 0, bound/8) }
func genQ5_0(_ *rng, blk []byte, bound float32) { putF16(blk, 0, bound/16) }

func genQ4_1(_ *rng, blk []byte, bound float32) {
	putF16(blk, 0, bound/7.5)
	putF16(blk, 2, -bound)
}

func genQ5_1(_ *rng, blk []byte, bound float32) {
	putF16(blk, 0, bound/15.5)
	putF16(blk, 2, -bound)
}

// K-quants with a scale and a min per sub-block of 32 (Q4_K, Q5_K):
// value = d·sc·q − dmin·m with 6-bit sc and m. Each sub-block's min is
// set to cancel the mean of its quants (dmin = step·d, m ≈ sc·mid/step),
// so values lie in about ±d·sc·mid, centred on zero; sc is drawn from the
// upper half of its range so no sub-block is nearly constant.

func genQ4_K(g *rng, blk []byte, bound float32) { genKMin(g, blk, bound, 7.5, 8) }
func genQ5_K(g *rng, blk []byte, bound float32) { genKMin(g, blk, bound, 15.5, 16) }

func genKMin(g *rng, blk []byte, bound float32, mid float32, step float32) {
	d := putF16(blk, 0, bound/(63*mid))
	putF16(blk, 2, step*d)
	var sc, m [8]uint8
	for j := range sc {
		sc[j] = uint8(g.intn(32, 63))
		m[j] = uint8(math.Round(float64(float32(sc[j]) * mid / step)))
	}
	packScaleMinK4(blk[4:16], sc, m)
}

// packScaleMinK4 is the inverse of ggml's get_scale_min_k4: eight 6-bit
// scales and mins in 12 bytes.
func packScaleMinK4(q []byte, sc, m [8]uint8) {
	for j := range 4 {
		q[j] = sc[j] | (sc[j+4]>>4)<<6
		q[j+4] = m[j] | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&0xF | (m[j+4]&0xF)<<4
	}
}

// Q6_K: value = d·sc·(q − 32), an int8 scale per 16 values, d at the end.
func genQ6_K(g *rng, blk []byte, bound float32) {
	for j := range 16 {
		blk[192+j] = uint8(g.intn(64, 127))
	}
	putF16(blk, 208, bound/(127*32))
}

// MXFP4: value = e2m1[q]·2^(e−128) with ggml's doubled e2m1 table, whose
// largest magnitude is 12. The exponent is the largest that keeps 12·scale
// within the bound; a power-of-two scale leaves the spread between half
// and all of what the other types give.
func genMXFP4(_ *rng, blk []byte, bound float32) {
	e := 128 + int(math.Floor(math.Log2(float64(bound)/12)))
	blk[0] = uint8(min(max(e, 1), 254)) // 0xFF is not a valid E8M0 scale
}

// validateRandomBlocks refuses, with random blocks on, a quantized tensor
// type that has no generator (it would have to be quantized from floats,
// which is what random blocks exist to avoid).
func (c *Config) validateRandomBlocks(specs []tensorSpec) error {
	if !c.RandomBlocks {
		return nil
	}
	for _, s := range specs {
		if tt, _ := s.typ.Traits(); !tt.Quantized {
			continue
		}
		if _, ok := blockGens[s.typ]; !ok {
			return fmt.Errorf("synth: random blocks are generated for %s; tensor %s is %s (leave random blocks off to quantize it from floats)",
				randomBlockTypeNames(), s.name, s.typ)
		}
	}
	return nil
}
