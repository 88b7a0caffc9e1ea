package resident

import (
	"fmt"
	"math"
	"slices"

	"github.com/gguftool/gguftool/gguf"
)

// Choice is one way to store a tensor: a type, the bytes it takes and the
// error it costs (resident.go defines the error).
type Choice struct {
	Type  gguf.Type
	Bytes int64
	Error float64
}

// Item is one tensor and its choices; a tensor whose type is fixed has
// exactly one.
type Item struct {
	Name    string
	Choices []Choice
}

// Solution picks one choice per item.
type Solution struct {
	Pick    []int // index into each item's Choices
	Bytes   int64
	Error   float64
	Optimal bool // the branch and bound finished: no better choice exists
}

// InfeasibleError says a budget cannot be met, and by how much.
type InfeasibleError struct {
	Budget, Minimum int64
}

func (e *InfeasibleError) Error() string {
	return fmt.Sprintf("resident: the budget of %d bytes is %d bytes short of the smallest possible tier (%d bytes)", e.Budget, e.Minimum-e.Budget, e.Minimum)
}

// fitItem is an item's choices without the dominated ones, by bytes.
type fitItem struct {
	ch   []Choice
	orig []int // index of each choice in the item's Choices
}

type segment struct {
	item    int
	dB      int64
	dE, eff float64
}

// Fit minimises the total error of the items subject to their total
// bytes being at most budget: a multiple-choice knapsack, solved by depth-
// first branch and bound on the LP (convex hull) relaxation. It stops
// after about work elementary steps and then returns the best solution
// found, with Optimal false.
func Fit(items []Item, budget int64, work int) (Solution, error) {
	n := len(items)
	fi := make([]fitItem, n)
	var minTotal int64
	for i, it := range items {
		if len(it.Choices) == 0 {
			return Solution{}, fmt.Errorf("resident: tensor %s has no allowed type", it.Name)
		}
		order := make([]int, len(it.Choices))
		for k := range order {
			order[k] = k
		}
		slices.SortStableFunc(order, func(a, b int) int {
			ca, cb := it.Choices[a], it.Choices[b]
			if ca.Bytes != cb.Bytes {
				return cmp64(ca.Bytes, cb.Bytes)
			}
			return cmpF(ca.Error, cb.Error)
		})
		best := math.Inf(1)
		for _, k := range order {
			c := it.Choices[k]
			if c.Error < best { // cheaper choices all have more error: keep
				fi[i].ch = append(fi[i].ch, c)
				fi[i].orig = append(fi[i].orig, k)
				best = c.Error
			}
		}
		minTotal += fi[i].ch[0].Bytes
	}
	if minTotal > budget {
		return Solution{}, &InfeasibleError{Budget: budget, Minimum: minTotal}
	}

	// Hull segments, globally by efficiency (error saved per byte).
	var segs []segment
	for i := range fi {
		h := hull(fi[i].ch)
		for k := 1; k < len(h); k++ {
			a, b := fi[i].ch[h[k-1]], fi[i].ch[h[k]]
			dB, dE := b.Bytes-a.Bytes, a.Error-b.Error
			segs = append(segs, segment{item: i, dB: dB, dE: dE, eff: dE / float64(dB)})
		}
	}
	slices.SortStableFunc(segs, func(a, b segment) int { return cmpF(b.eff, a.eff) })

	// Search the items with the most to gain first.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	spread := func(i int) float64 { return fi[i].ch[0].Error - fi[i].ch[len(fi[i].ch)-1].Error }
	slices.SortStableFunc(order, func(a, b int) int { return cmpF(spread(b), spread(a)) })
	depth := make([]int, n) // depth at which each item is decided
	for d, i := range order {
		depth[i] = d
	}
	sufMinB := make([]int64, n+1)
	sufMaxE := make([]float64, n+1)
	for d := n - 1; d >= 0; d-- {
		c := fi[order[d]].ch[0]
		sufMinB[d] = sufMinB[d+1] + c.Bytes
		sufMaxE[d] = sufMaxE[d+1] + c.Error
	}
	steps := 0
	// bound is the LP relaxation's error for the items from depth d on,
	// with left bytes to spend on them.
	bound := func(d int, left int64) float64 {
		extra := left - sufMinB[d]
		if extra < 0 {
			return math.Inf(1)
		}
		e := sufMaxE[d]
		for _, s := range segs {
			steps++
			if depth[s.item] < d {
				continue
			}
			if s.dB <= extra {
				extra -= s.dB
				e -= s.dE
				continue
			}
			e -= s.eff * float64(extra)
			break
		}
		return e
	}

	// The incumbent to beat: every item at its smallest choice, which fits.
	best := Solution{Pick: make([]int, n), Bytes: minTotal}
	for i := range fi {
		best.Error += fi[i].ch[0].Error
	}
	pick := make([]int, n)
	var dfs func(d int, used int64, e float64)
	dfs = func(d int, used int64, e float64) {
		if steps > work {
			return
		}
		if d == n {
			if e < best.Error || (e == best.Error && used < best.Bytes) {
				best = Solution{Pick: slices.Clone(pick), Bytes: used, Error: e}
			}
			return
		}
		if e+bound(d, budget-used) >= best.Error {
			return
		}
		it := &fi[order[d]]
		// Best quality first: the last (biggest) choices that still fit.
		for k := len(it.ch) - 1; k >= 0; k-- {
			c := it.ch[k]
			if used+c.Bytes+sufMinB[d+1] > budget {
				continue
			}
			pick[order[d]] = k
			dfs(d+1, used+c.Bytes, e+c.Error)
		}
	}
	dfs(0, 0, 0)
	best.Optimal = steps <= work
	for i, k := range best.Pick {
		best.Pick[i] = fi[i].orig[k]
	}
	return best, nil
}

// hull returns the indices of the lower convex hull of the choices (by
// bytes ascending, error descending): the ones an LP relaxation uses.
func hull(ch []Choice) []int {
	var h []int
	for k := range ch {
		for len(h) >= 2 {
			a, b, c := ch[h[len(h)-2]], ch[h[len(h)-1]], ch[k]
			// b is above the line from a to c: not on the lower hull.
			if (b.Error-a.Error)*float64(c.Bytes-a.Bytes) >= (c.Error-a.Error)*float64(b.Bytes-a.Bytes) {
				h = h[:len(h)-1]
				continue
			}
			break
		}
		h = append(h, k)
	}
	return h
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
