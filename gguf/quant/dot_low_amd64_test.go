//go:build amd64 && !purego

package quant

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestLowBitKernels: each low-bit vector kernel returns the Go kernel's
// bits, on rows of 1–9 blocks (256-value types: the four-block loops, their
// tails and rows shorter than four) or 1–40 blocks (Q2_0, Q1_0).
func TestLowBitKernels(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2/FMA/F16C")
	}
	for _, c := range []struct {
		typ       gguf.Type
		ref, vec  func(w, a []byte, nb int) float32
		maxBlocks int
	}{
		{gguf.TypeIQ1_S, vecDotIQ1_S, vecDotIQ1_SAVX2, 9},
		{gguf.TypeIQ1_M, vecDotIQ1_M, vecDotIQ1_MAVX2, 9},
		{gguf.TypeTQ2_0, vecDotTQ2_0, vecDotTQ2_0AVX2, 9},
		{gguf.TypeTQ1_0, vecDotTQ1_0, vecDotTQ1_0AVX2, 9},
		{gguf.TypeQ2_0, vecDotQ2_0, vecDotQ2_0AVX2, 40},
		{gguf.TypeQ1_0, vecDotQ1_0, vecDotQ1_0AVX2, 40},
	} {
		t.Run(c.typ.String(), func(t *testing.T) {
			checkVectorKernel(t, c.typ, c.ref, c.vec, 4000, c.maxBlocks)
		})
	}
}

// TestIQ1ScaleTables: looking a grid byte up in an IQ1 scale table as
// VPSHUFB does (top bit set: zero, else the low nibble indexes) gives
// (g+1)·ls for g ∈ {−1, 0, 1}, and byte 0 ls; the IQ1_M pair table holds
// the table of each half's scale code in its 128-bit lane.
func TestIQ1ScaleTables(t *testing.T) {
	pshufb := func(tab []byte, i byte) byte {
		if i&0x80 != 0 {
			return 0
		}
		return tab[i&15]
	}
	for s, tab := range iq1ScaleTabs {
		ls := 2*s + 1
		for _, g := range []int{-1, 0, 1} {
			if got := pshufb(tab[:], byte(int8(g))); int(got) != (g+1)*ls {
				t.Errorf("scale code %d, grid value %d: %d, want %d", s, g, got, (g+1)*ls)
			}
		}
		if tab[0] != byte(ls) {
			t.Errorf("scale code %d: byte 0 is %d, want %d", s, tab[0], ls)
		}
	}
	for i, pair := range iq1mScalePairs {
		if [16]byte(pair[:16]) != iq1ScaleTabs[i&7] || [16]byte(pair[16:]) != iq1ScaleTabs[i>>3] {
			t.Errorf("pair %d: %v, want the tables of codes %d and %d", i, pair, i&7, i>>3)
		}
	}
}
