package resident

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// bruteForce tries every combination.
func bruteForce(items []Item, budget int64) (float64, bool) {
	best, found := math.Inf(1), false
	pick := make([]int, len(items))
	var rec func(i int, b int64, e float64)
	rec = func(i int, b int64, e float64) {
		if b > budget {
			return
		}
		if i == len(items) {
			if e < best {
				best, found = e, true
			}
			return
		}
		for k, c := range items[i].Choices {
			pick[i] = k
			rec(i+1, b+c.Bytes, e+c.Error)
		}
	}
	rec(0, 0, 0)
	return best, found
}

func randomItems(r *rand.Rand, n int) []Item {
	items := make([]Item, n)
	for i := range items {
		size := int64(1 + r.IntN(1000))
		k := 1 + r.IntN(6)
		for range k {
			bpw := 1 + r.Float64()*15
			items[i].Choices = append(items[i].Choices, Choice{
				Type:  gguf.Type(r.IntN(15)),
				Bytes: int64(float64(size) * bpw),
				Error: float64(size) * math.Pow(2, -bpw) * (0.5 + r.Float64()),
			})
		}
	}
	return items
}

// TestFitEqualsBruteForce: on up to 12 candidate tensors the branch and
// bound finds the exact optimum, for budgets from infeasible to roomy.
func TestFitEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 1500 {
		items := randomItems(r, 1+r.IntN(12))
		var lo, hi int64
		for _, it := range items {
			mn, mx := it.Choices[0].Bytes, it.Choices[0].Bytes
			for _, c := range it.Choices {
				mn, mx = min(mn, c.Bytes), max(mx, c.Bytes)
			}
			lo, hi = lo+mn, hi+mx
		}
		budget := lo - 10 + r.Int64N(hi-lo+20)
		want, feasible := bruteForce(items, budget)
		sol, err := Fit(items, budget, 1<<40)
		if !feasible {
			var ie *InfeasibleError
			if !errors.As(err, &ie) || ie.Minimum-ie.Budget != lo-budget {
				t.Fatalf("trial %d: infeasible budget %d (minimum %d): %v", trial, budget, lo, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		var bytes int64
		var e float64
		for i, k := range sol.Pick {
			bytes += items[i].Choices[k].Bytes
			e += items[i].Choices[k].Error
		}
		if bytes > budget || bytes != sol.Bytes || math.Abs(e-sol.Error) > 1e-9*math.Max(1, e) {
			t.Fatalf("trial %d: solution %d bytes (budget %d), error %g vs reported %g", trial, bytes, budget, e, sol.Error)
		}
		if math.Abs(e-want) > 1e-9*math.Max(1, want) || !sol.Optimal {
			t.Fatalf("trial %d: error %g, brute force %g (optimal %v)", trial, e, want, sol.Optimal)
		}
	}
}

// TestFitLarge: hundreds of tensors finish within the work limit or
// report that they did not, and never exceed the budget.
func TestFitLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	items := randomItems(r, 600)
	var lo int64
	for _, it := range items {
		mn := it.Choices[0].Bytes
		for _, c := range it.Choices {
			mn = min(mn, c.Bytes)
		}
		lo += mn
	}
	sol, err := Fit(items, lo*3/2, 2e7)
	if err != nil {
		t.Fatal(err)
	}
	if sol.Bytes > lo*3/2 || len(sol.Pick) != len(items) {
		t.Fatalf("%+v", sol.Bytes)
	}
}
