//go:build amd64 && !purego

package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// dequantCase is a vector dequantizer, the Go one it must match, and
// where its block keeps its F16 scales.
type dequantCase struct {
	typ       gguf.Type
	ref, vec  dequantizeFunc
	f16Scales []int
}

var dequantCases = []dequantCase{
	{gguf.TypeQ8_0, dequantizeQ8_0, dequantizeQ8_0AVX2, []int{0}},
	{gguf.TypeQ4_0, dequantizeQ4_0, dequantizeQ4_0AVX2, []int{0}},
	{gguf.TypeMXFP4, dequantizeMXFP4, dequantizeMXFP4AVX2, nil},
	{gguf.TypeIQ4_XS, dequantizeIQ4_XS, dequantizeIQ4_XSAVX2, []int{0}},
	{gguf.TypeQ4_K, dequantizeQ4_K, dequantizeQ4_KAVX2, []int{0, 2}},
	{gguf.TypeQ5_K, dequantizeQ5_K, dequantizeQ5_KAVX2, []int{0, 2}},
	{gguf.TypeQ6_K, dequantizeQ6_K, dequantizeQ6_KAVX2, []int{208}},
}

// specialHalves are F16 scales worth forcing: zeros, subnormals, the
// largest finite, infinities, quiet and signalling NaNs of both signs.
var specialHalves = []uint16{0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
	0x7C00, 0xFC00, 0x7C01, 0xFDFF, 0x7E00, 0xFE01, 0x7FFF}

// checkDequant compares c.vec with c.ref on src, appending to a copy of
// prefix, bit for bit.
func checkDequant(t *testing.T, c dequantCase, prefix []float32, src []byte) {
	t.Helper()
	want := c.ref(append([]float32(nil), prefix...), src)
	got := c.vec(append([]float32(nil), prefix...), src)
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", c.typ, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			bb := int(c.typ.BlockBytes())
			blk := (i - len(prefix)) / int(c.typ.BlockSize())
			t.Fatalf("%s: value %d (block %d % x): %#08x, want %#08x", c.typ, i, blk,
				src[blk*bb:(blk+1)*bb], math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// TestDequantizeAVX2 checks every vector dequantizer against the Go one
// on random blocks (random bits everywhere, scales often forced to zero,
// subnormal, infinite or NaN) for 0…40 blocks after a non-empty prefix.
func TestDequantizeAVX2(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(14, 2))
	for _, c := range dequantCases {
		bb := int(c.typ.BlockBytes())
		for round := range 300 {
			nb := round % 41
			src := make([]byte, nb*bb)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			for b := range nb {
				for _, off := range c.f16Scales {
					if rng.IntN(3) == 0 {
						h := specialHalves[rng.IntN(len(specialHalves))]
						binary.LittleEndian.PutUint16(src[b*bb+off:], h)
					}
				}
			}
			prefix := make([]float32, 1+rng.IntN(9))
			for i := range prefix {
				prefix[i] = rng.Float32()
			}
			checkDequant(t, c, prefix, src)
		}
	}
}

// TestDequantizeAVX2AllScales runs every vector dequantizer over every
// F16 bit pattern in each scale field (and every E8M0 byte for MXFP4),
// with random levels.
func TestDequantizeAVX2AllScales(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(14, 3))
	const chunk = 1 << 12
	for _, c := range dequantCases {
		bb := int(c.typ.BlockBytes())
		src := make([]byte, chunk*bb)
		for start := 0; start < 1<<16; start += chunk {
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			for b := range chunk {
				h := uint16(start + b)
				for k, off := range c.f16Scales {
					if k == 1 {
						h = bits.Reverse16(h)
					}
					binary.LittleEndian.PutUint16(src[b*bb+off:], h)
				}
				if c.f16Scales == nil {
					src[b*bb] = byte(start + b)
				}
			}
			checkDequant(t, c, []float32{1}, src)
		}
	}
}

// TestDequantizeAVX2Registered checks that Dequantize runs the vector
// dequantizers at the AVX2 level.
func TestDequantizeAVX2Registered(t *testing.T) {
	if !useAVX2() {
		t.Skip("AVX2 kernels not in use")
	}
	for _, c := range dequantCases {
		f := codecs[c.typ].dequantize
		if reflect.ValueOf(f).Pointer() != reflect.ValueOf(c.vec).Pointer() {
			t.Errorf("%s: codec table has not the vector dequantizer", c.typ)
		}
	}
}
