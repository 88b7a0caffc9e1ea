package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// BenchmarkQ8Rows: a Q8_0 matrix larger than the caches, one row at a time
// against four rows per call (the kernel the runtime uses).
func BenchmarkQ8Rows(b *testing.B) {
	const cols, rows = 1024, 65536
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]byte, rows*cols/32*34)
	for i := range w {
		w[i] = byte(rng.IntN(256))
		if i%34 == 1 {
			w[i] = 0x20
		}
	}
	a := make([]byte, cols/32*34)
	copy(a, w)
	d, _ := NewDotter(gguf.TypeQ8_0, cols)
	rb := cols / 32 * 34
	b.Run("dot", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		for range b.N {
			for r := range rows {
				d.Dot(w[r*rb:(r+1)*rb], a)
			}
		}
	})
	b.Run("dot4", func(b *testing.B) {
		b.SetBytes(int64(len(w)))
		var out [4]float32
		for range b.N {
			for r := 0; r < rows; r += 4 {
				d.Dot4(w[r*rb:(r+4)*rb], rb, a, &out)
			}
		}
	})
}
