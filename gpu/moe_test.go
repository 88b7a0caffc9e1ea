package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMoEOps: the routed experts' per-expert bias and the weighted sum of
// a token's expert rows, against the CPU's arithmetic, bit for bit (one
// rounded operation per step, in the CPU's order).
func TestMoEOps(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	rng := rand.New(rand.NewPCG(3, 30))
	const experts, tokens, k, width = 5, 3, 4, 37
	rows := tokens * k
	ids := make([]uint32, rows)
	for i := range ids {
		ids[i] = uint32(rng.IntN(experts))
	}
	ids[4] = experts // past the stack: adds nothing
	idf := make([]float32, rows)
	for i, e := range ids {
		idf[i] = math.Float32frombits(e)
	}
	t.Run("AddExpertBias", func(t *testing.T) {
		y, bias := testValues(rng, rows*width, true), testValues(rng, experts*width, false)
		ys, bs, is := guarded(t, d, y), guarded(t, d, bias), guarded(t, d, idf)
		record(t, d, func(b *Batch) error { return b.AddExpertBias(ys, bs, is, experts, rows, width) })
		want := append([]float32(nil), y...)
		for r, e := range ids {
			if e >= experts {
				continue
			}
			for c := range width {
				want[r*width+c] += bias[int(e)*width+c]
			}
		}
		compareValues(t, "AddExpertBias", readGuarded(t, d, ys, rows*width), want, exactTolerance)
	})
	t.Run("MoESum", func(t *testing.T) {
		y, w := testValues(rng, rows*width, false), testValues(rng, rows, false)
		dst, ys, ws := poisoned(t, d, tokens*width), guarded(t, d, y), guarded(t, d, w)
		record(t, d, func(b *Batch) error { return b.MoESum(dst, ys, ws, tokens, k, width) })
		want := make([]float32, tokens*width)
		for tok := range tokens {
			for c := range width {
				acc := float32(y[tok*k*width+c] * w[tok*k])
				for s := 1; s < k; s++ {
					acc += float32(y[(tok*k+s)*width+c] * w[tok*k+s])
				}
				want[tok*width+c] = acc
			}
		}
		compareValues(t, "MoESum", readGuarded(t, d, dst, tokens*width), want, exactTolerance)
	})
	t.Run("OutOfRange", func(t *testing.T) {
		s := guarded(t, d, make([]float32, 8))
		b, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Submit()
		if err := b.MoESum(s, s, s, 2, 4, 8); err == nil {
			t.Error("MoESum past its buffers: no error")
		}
		if err := b.MoESum(s, s, s, 1, 0, 8); err == nil {
			t.Error("MoESum of no experts per token: no error")
		}
		if err := b.AddExpertBias(s, s, s, 4, 1, 8); err == nil {
			t.Error("AddExpertBias with a stack past its buffer: no error")
		}
	})
}
