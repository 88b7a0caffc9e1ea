//go:build amd64 && !purego

package quant

import (
	"testing"
)

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
