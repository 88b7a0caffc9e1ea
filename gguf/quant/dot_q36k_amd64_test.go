//go:build amd64 && !purego

package quant

import (
	"testing"
)

// TestQ36KNoAllocs: neither the references nor the vector kernels
// allocate.
func TestQ36KNoAllocs(t *testing.T) {
	const nb = 3
	wq3, wq6, a := make([]byte, nb*blockQ3K), make([]byte, nb*blockQ6K), make([]byte, nb*blockQ8K)
	kernels := map[string]func() float32{
		"vecDotQ3_K": func() float32 { return vecDotQ3_K(wq3, a, nb) },
		"vecDotQ6_K": func() float32 { return vecDotQ6_K(wq6, a, nb) },
	}
	if haveAVX2 {
		kernels["vecDotQ3_KAVX2"] = func() float32 { return vecDotQ3_KAVX2(wq3, a, nb) }
		kernels["vecDotQ6_KAVX2"] = func() float32 { return vecDotQ6_KAVX2(wq6, a, nb) }
	}
	for name, k := range kernels {
		if n := testing.AllocsPerRun(20, func() { _ = k() }); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}
