package resident

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gguftool/gguftool/gguf"
)

// Choice is one way to store a tensor: a type, the bytes it takes and the
// error it costs (fitItems defines the error: element count × relative
// squared error).
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

// segment is one edge of an item's convex hull: dB more bytes for dE less
// error, eff = dE/dB.
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
	fi := make([]fitItem, len(items))
	var minTotal int64
	for i, it := range items {
		if len(it.Choices) == 0 {
			return Solution{}, fmt.Errorf("resident: tensor %s has no allowed type", it.Name)
		}
		fi[i] = undominated(it.Choices)
		minTotal += fi[i].ch[0].Bytes
	}
	if minTotal > budget {
		return Solution{}, &InfeasibleError{Budget: budget, Minimum: minTotal}
	}
	s := newSearch(fi, budget, work)
	// The incumbent to beat: every item at its smallest choice, which fits.
	s.best = Solution{Pick: make([]int, len(fi)), Bytes: minTotal}
	for i := range fi {
		s.best.Error += fi[i].ch[0].Error
	}
	s.dfs(0, 0, 0)
	best := s.best
	best.Optimal = s.steps <= work
	for i, k := range best.Pick {
		best.Pick[i] = fi[i].orig[k]
	}
	return best, nil
}

// undominated sorts choices by bytes (then error) and keeps those with
// less error than every smaller one.
func undominated(choices []Choice) fitItem {
	order := make([]int, len(choices))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := choices[a], choices[b]
		return cmp.Or(cmp.Compare(ca.Bytes, cb.Bytes), cmp.Compare(ca.Error, cb.Error))
	})
	var f fitItem
	best := math.Inf(1)
	for _, k := range order {
		c := choices[k]
		if c.Error < best { // cheaper choices all have more error: keep
			f.ch = append(f.ch, c)
			f.orig = append(f.orig, k)
			best = c.Error
		}
	}
	return f
}

// search is the branch and bound's state. Items are decided in order of
// what they have to gain; at depth d, items order[d:] are still open.
type search struct {
	fi     []fitItem
	budget int64
	work   int
	steps  int

	segs    []segment // every item's hull segments, most efficient first
	order   []int     // the items by decreasing spread of error
	depth   []int     // depth at which each item is decided
	sufMinB []int64   // bytes of the smallest choices of order[d:]
	sufMaxE []float64 // error of the smallest choices of order[d:]

	pick []int // the choice of each item decided so far
	best Solution
}

func newSearch(fi []fitItem, budget int64, work int) *search {
	n := len(fi)
	s := &search{fi: fi, budget: budget, work: work, segs: hullSegments(fi), pick: make([]int, n)}
	// Search the items with the most to gain first.
	s.order = make([]int, n)
	for i := range s.order {
		s.order[i] = i
	}
	spread := func(i int) float64 { return fi[i].ch[0].Error - fi[i].ch[len(fi[i].ch)-1].Error }
	slices.SortStableFunc(s.order, func(a, b int) int { return cmp.Compare(spread(b), spread(a)) })
	s.depth = make([]int, n)
	for d, i := range s.order {
		s.depth[i] = d
	}
	s.sufMinB = make([]int64, n+1)
	s.sufMaxE = make([]float64, n+1)
	for d := n - 1; d >= 0; d-- {
		c := fi[s.order[d]].ch[0]
		s.sufMinB[d] = s.sufMinB[d+1] + c.Bytes
		s.sufMaxE[d] = s.sufMaxE[d+1] + c.Error
	}
	return s
}

// hullSegments lists the segments of every item's hull, globally by
// efficiency (error saved per byte).
func hullSegments(fi []fitItem) []segment {
	var segs []segment
	for i := range fi {
		h := hull(fi[i].ch)
		for k := 1; k < len(h); k++ {
			a, b := fi[i].ch[h[k-1]], fi[i].ch[h[k]]
			dB, dE := b.Bytes-a.Bytes, a.Error-b.Error
			segs = append(segs, segment{item: i, dB: dB, dE: dE, eff: dE / float64(dB)})
		}
	}
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(b.eff, a.eff) })
	return segs
}

// bound is the LP relaxation's error for the items from depth d on, with
// left bytes to spend on them.
func (s *search) bound(d int, left int64) float64 {
	extra := left - s.sufMinB[d]
	if extra < 0 {
		return math.Inf(1)
	}
	e := s.sufMaxE[d]
	for _, seg := range s.segs {
		s.steps++
		if s.depth[seg.item] < d {
			continue
		}
		if seg.dB <= extra {
			extra -= seg.dB
			e -= seg.dE
			continue
		}
		e -= seg.eff * float64(extra)
		break
	}
	return e
}

// dfs decides the item at depth d, the items before it having used used
// bytes for e error, and records every better complete solution in best.
func (s *search) dfs(d int, used int64, e float64) {
	if s.steps > s.work {
		return
	}
	if d == len(s.fi) {
		if e < s.best.Error || (e == s.best.Error && used < s.best.Bytes) {
			s.best = Solution{Pick: slices.Clone(s.pick), Bytes: used, Error: e}
		}
		return
	}
	if e+s.bound(d, s.budget-used) >= s.best.Error {
		return
	}
	i := s.order[d]
	it := &s.fi[i]
	// Best quality first: the last (biggest) choices that still fit.
	for k := len(it.ch) - 1; k >= 0; k-- {
		c := it.ch[k]
		if used+c.Bytes+s.sufMinB[d+1] > s.budget {
			continue
		}
		s.pick[i] = k
		s.dfs(d+1, used+c.Bytes, e+c.Error)
	}
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
