package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// These tests pin block layouts and helper semantics without llama.cpp;
// oracle_test.go compares every codec with llama.cpp itself.

// u16le returns v as two little-endian bytes.
func u16le(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// blockWith returns n zero bytes with the given bytes written at offsets.
func blockWith(n int, at map[int][]byte) []byte {
	b := make([]byte, n)
	for off, v := range at {
		copy(b[off:], v)
	}
	return b
}

func TestDequantizeIQLayouts(t *testing.T) {
	const one, half = 0x3C00, 0x3800 // fp16 1 and 0.5
	for _, c := range []struct {
		name string
		f    dequantizeFunc
		src  []byte
		want map[int]float32 // value index → value
	}{
		{
			// Group 0: grid 0 (all 8s), sign index 1 (ksigns 0x81: elements
			// 0 and 7 negative); db = 1·(0.5+0)·0.25. Group 1: grid 1, whose
			// byte 0 is 43, no signs. Sub-block 1 has s = 3: db = 0.875.
			name: "IQ2_XXS", f: dequantizeIQ2_XXS,
			src:  blockWith(blockIQ2XX, map[int][]byte{0: u16le(one), 2: {0, 1}, 6: {1}, 14: {0, 0, 0, 0x30}}),
			want: map[int]float32{0: -1, 1: 1, 6: 1, 7: -1, 8: 43 * 0.125, 9: 1, 32: 8 * 0.875},
		},
		{
			// qs[0] = grid 2 | sign index 1<<9; scales[0] = 0x10: groups 0-1
			// use 0.125, groups 2-3 use 0.375.
			name: "IQ2_XS", f: dequantizeIQ2_XS,
			src:  blockWith(blockIQ2XS, map[int][]byte{0: u16le(one), 2: u16le(2 | 1<<9), 66: {0x10}}),
			want: map[int]float32{0: -25 * 0.125, 1: 25 * 0.125, 7: -1, 16: 3, 255: 1},
		},
		{
			// Group 1's index takes bits 2-3 of qh[0] as bits 8-9 (index
			// 256); its sign byte (element 7 negative) is literal.
			name: "IQ2_S", f: dequantizeIQ2_S,
			src:  blockWith(blockIQ2S, map[int][]byte{0: u16le(one), 66: {1 << 2}, 35: {0x80}}),
			want: map[int]float32{0: 1, 8: float32(uint8(iq2sGrid[256])) * 0.125, 15: -float32(uint8(iq2sGrid[256]>>56)) * 0.125},
		},
		{
			// Index bytes 0 and 1 (grid 0 = 4,4,4,4), sign index 3 → elements
			// 0 and 1 negative; s = 1: db = 1·1.5·0.5.
			name: "IQ3_XXS", f: dequantizeIQ3_XXS,
			src:  blockWith(blockIQ3XX, map[int][]byte{0: u16le(one), 66: {3, 0, 0, 0x10}}),
			want: map[int]float32{0: -3, 1: -3, 2: 3, 7: 3},
		},
		{
			// Element 4 takes bit 1 of qh[0] as bit 8 of its index; sub-block
			// scale nibble 2 → db = 1·(1+2·2); the sign byte is literal.
			name: "IQ3_S", f: dequantizeIQ3_S,
			src:  blockWith(blockIQ3S, map[int][]byte{0: u16le(one), 66: {2}, 74: {0x10}, 106: {2}}),
			want: map[int]float32{0: 5, 4: -5 * float32(uint8(iq3sGrid[256])), 5: 5 * float32(uint8(iq3sGrid[256]>>8))},
		},
		{
			// Grid 0 is all −1; qh[0] = s 1 (dl = 3) with the δ sign bit set.
			name: "IQ1_S", f: dequantizeIQ1_S,
			src:  blockWith(blockIQ1S, map[int][]byte{0: u16le(one), 34: u16le(0x9000)}),
			want: map[int]float32{0: 3 * (-1 - 0.125), 32: -1 + 0.125},
		},
		{
			// d = 1 is spread as nibbles 0, 0, 0xC, 0x3 over the tops of the
			// scale words; word 0 holds sub-scale 1 for groups 0-1 (dl = 3)
			// and 2 for groups 2-3 (dl = 5); qh[0]'s high nibble flips δ.
			name: "IQ1_M", f: dequantizeIQ1_M,
			src:  blockWith(blockIQ1M, map[int][]byte{32: {0x80}, 48: u16le(1 | 2<<3), 52: u16le(0xC000), 54: u16le(0x3000)}),
			want: map[int]float32{0: 3 * (-1 + 0.125), 8: 3 * (-1 - 0.125), 16: 5 * (-1 + 0.125), 32: -1 + 0.125},
		},
		{
			name: "IQ4_NL", f: dequantizeIQ4_NL,
			src:  blockWith(blockIQ4NL, map[int][]byte{0: u16le(half), 2: {0xF0}}),
			want: map[int]float32{0: -63.5, 16: 56.5, 1: -63.5},
		},
		{
			// Sub-block 0: ls = 1 | 2<<4 = 33 → dl = 1; sub-block 1: ls = 0 → −32.
			name: "IQ4_XS", f: dequantizeIQ4_XS,
			src:  blockWith(blockIQ4XS, map[int][]byte{0: u16le(one), 2: u16le(2), 4: {1}, 8: {0x8F}}),
			want: map[int]float32{0: 113, 16: 1, 1: -127, 32: 32 * 127},
		},
		{
			// qs[0] = 188 holds the trits 2,0,1,2,1 (value 178 of 243).
			name: "TQ1_0", f: dequantizeTQ1_0,
			src:  blockWith(blockTQ1, map[int][]byte{0: {188}, 52: u16le(half)}),
			want: map[int]float32{0: 0.5, 32: -0.5, 64: 0, 96: 0.5, 128: 0, 1: -0.5},
		},
		{
			name: "TQ2_0", f: dequantizeTQ2_0,
			src:  blockWith(blockTQ2, map[int][]byte{0: {0b11_10_01_00}, 64: u16le(half)}),
			want: map[int]float32{0: -0.5, 32: 0, 64: 0.5, 96: 1, 1: -0.5},
		},
		{
			// Sub-block scales 0x38 (0.5 after halving) and 0xB8 (the sign
			// bit is ignored); split halves within each sub-block of 16.
			name: "NVFP4", f: dequantizeNVFP4,
			src:  blockWith(blockNVFP4, map[int][]byte{0: {0x38, 0xB8}, 4: {0xF7}, 12: {0x01}}),
			want: map[int]float32{0: 6, 8: -6, 16: 0.5, 1: 0},
		},
		{
			name: "Q1_0", f: dequantizeQ1_0,
			src:  blockWith(blockQ1_0, map[int][]byte{0: u16le(half), 2: {0x81}}),
			want: map[int]float32{0: 0.5, 1: -0.5, 7: 0.5, 8: -0.5},
		},
		{
			name: "Q2_0", f: dequantizeQ2_0,
			src:  blockWith(blockQ2_0, map[int][]byte{0: u16le(half), 2: {0b11_10_01_00}}),
			want: map[int]float32{0: -0.5, 1: 0, 2: 0.5, 3: 1, 4: -0.5},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.f(nil, append(c.src, c.src...))
			n := len(got) / 2
			for i, w := range c.want {
				if got[i] != w || got[n+i] != w {
					t.Errorf("value %d = %g (second block %g), want %g", i, got[i], got[n+i], w)
				}
			}
		})
	}
}

// TestTQ1_0EveryTrits decodes every 5-trit byte as quantize_row_tq1_0_ref
// encodes it: the base-3 number scaled to 256/243, rounded up.
func TestTQ1_0EveryTrits(t *testing.T) {
	for v := range 243 {
		q := byte((v*256 + 242) / 243)
		got := appendTrits(nil, 1, []byte{q}, 5)
		for n, r := 0, v; n < 5; n++ {
			want := float32(r/81 - 1) // most significant trit first
			r = r % 81 * 3
			if got[n] != want {
				t.Errorf("value %d (byte %d): trit %d = %g, want %g", v, q, n, got[n], want)
			}
		}
	}
}

func TestUE4M3(t *testing.T) {
	for x, want := range map[uint8]float32{
		0x00: 0, 0x7F: 0, 0x80: 0,
		0x01: 0x1p-10, 0x07: 7 * 0x1p-10, // subnormals: man·2^−9, halved
		0x08: 0x1p-7, 0x38: 0.5, 0x3C: 0.75, 0x7E: 224, 0xFF: 240,
	} {
		if got := ue4m3ToF32Half(x); got != want {
			t.Errorf("ue4m3ToF32Half(%#02x) = %g, want %g", x, got, want)
		}
	}
}

func TestBestIndexInt8(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		x    float32
		want int
	}{
		{-200, 0}, {-127, 0}, {-115.5, 1}, {-115.6, 0}, // a tie takes the upper level
		{0, 8}, {-4.5, 8}, {-4.51, 7}, {113, 15}, {inf, 15}, {-inf, 0},
		{nan, 15}, // every comparison fails: the bisection runs to the top
	} {
		if got := bestIndexInt8(c.x); got != c.want {
			t.Errorf("bestIndexInt8(%g) = %d, want %d", c.x, got, c.want)
		}
	}
}

// TestIQ4RoundTrip quantizes values that lie exactly on the IQ4 levels
// and expects them back: each sub-block's scale search must find the
// exact fit, and IQ4_XS's 6-bit sub-scales must represent it.
func TestIQ4RoundTrip(t *testing.T) {
	x := make([]float32, 2*qkIQ)
	weights := make([]float32, len(x))
	for i := range x {
		weights[i] = float32(1 + i%5)
		// Sub-block ib has scale (ib%8+25)/32 · ±1, a multiple of
		// the super-block's d = 1/32 within the 6-bit range.
		s := float32(i/32%8+25) / 32
		if i >= qkIQ {
			s = -s
		}
		x[i] = s * float32(kvaluesIQ4NL[(i*7)%16])
	}
	for _, c := range []struct {
		name string
		q    quantizeRowFunc
		d    dequantizeFunc
	}{
		{"IQ4_NL", quantizeRowIQ4_NL, dequantizeIQ4_NL},
		{"IQ4_XS", quantizeRowIQ4_XS, dequantizeIQ4_XS},
	} {
		for _, w := range [][]float32{nil, weights} {
			got := c.d(nil, c.q(nil, x, w))
			for i := range x {
				if got[i] != x[i] {
					t.Errorf("%s (weights %t): value %d = %g, want %g", c.name, w != nil, i, got[i], x[i])
					break
				}
			}
		}
	}
}
