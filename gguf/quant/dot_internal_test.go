package quant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA is a·b+c computed exactly and rounded once to float32.
func exactFMA(a, b, c float32) float32 {
	const prec = 600 // enough for any sum of float32 products and float32s
	p := new(big.Float).SetPrec(prec).Mul(big.NewFloat(float64(a)).SetPrec(prec), big.NewFloat(float64(b)))
	f, _ := p.Add(p, big.NewFloat(float64(c))).Float32()
	return f
}

// TestFmafRoundsOnce checks fmaf against exact arithmetic on random
// operands of every magnitude, on results in float32's subnormal range,
// and on sums built to land within a float64 rounding of a midpoint
// between two float32s, where rounding the float64 sum to float32 would
// round twice.
func TestFmafRoundsOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 37))
	finite := func() float32 {
		for {
			if f := math.Float32frombits(r.Uint32()); !math.IsInf(float64(f), 0) && f == f {
				return f
			}
		}
	}
	type triple struct{ a, b, c float32 }
	var cases []triple
	for range 100000 {
		cases = append(cases, triple{finite(), finite(), finite()})
		e := r.IntN(20) - 150 // subnormal products and addends
		cases = append(cases, triple{
			float32(math.Ldexp(r.Float64()+1, e/2)), float32(math.Ldexp(r.Float64()-2, e-e/2)),
			float32(math.Ldexp(r.NormFloat64(), e)),
		})
	}
	naiveWrong := 0
	for range 10000 {
		// c has an odd last bit; a·b = ±ulp(c)/2·(1−k²·2⁻⁴⁶) sits just
		// inside the midpoint next to c, closer than float64 resolves.
		m := r.IntN(200) - 100
		c := float32(math.Ldexp(1+float64(2*r.IntN(1<<22)+1)/(1<<23), m))
		k := float64(r.IntN(64) + 1)
		a := float32(1 + k/(1<<23))
		b := float32(math.Ldexp(1-k/(1<<23), m-24))
		if r.IntN(2) == 0 {
			b = -b
		}
		if r.IntN(2) == 0 {
			a, c = -a, -c
		}
		cases = append(cases, triple{a, b, c})
		if float32(float64(a)*float64(b)+float64(c)) != exactFMA(a, b, c) {
			naiveWrong++
		}
	}
	if naiveWrong == 0 {
		t.Fatal("the midpoint cases do not exercise double rounding")
	}
	for _, tc := range cases {
		if got, want := fmaf(tc.a, tc.b, tc.c), exactFMA(tc.a, tc.b, tc.c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fmaf(%g, %g, %g) = %g (%#08x), want %g (%#08x)", tc.a, tc.b, tc.c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}
