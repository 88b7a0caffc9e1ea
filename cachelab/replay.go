package cachelab

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Result is one policy's replay at one capacity.
type Result struct {
	Policy   string `json:"policy"`
	Capacity int    `json:"capacity"` // slots, over all layers
	Lookups  int64  `json:"lookups"`
	Hits     int64  `json:"hits"`
}

// HitRate is Hits ÷ Lookups (0 for an empty trace).
func (r Result) HitRate() float64 {
	if r.Lookups == 0 {
		return 0
	}
	return float64(r.Hits) / float64(r.Lookups)
}

// Replay runs the policy named over the trace with a cache of capacity
// slots: one cache shared by every layer, as the engine has, or with
// perLayer one per layer, capacity split evenly (the first layers take
// the remainder).
func (a *Accesses) Replay(name string, capacity int, perLayer bool, o Options) (Result, error) {
	if capacity < 0 {
		return Result{}, fmt.Errorf("cachelab: capacity %d: want at least 0", capacity)
	}
	res := Result{Policy: name, Capacity: capacity}
	if !perLayer {
		p, err := newPolicy(name, capacity, o)
		if err != nil {
			return Result{}, err
		}
		res.Lookups, res.Hits = simulate(a.Groups, capacity, p, nil)
		return res, nil
	}
	layers := a.Header.Layers
	byLayer := make([][]Group, layers)
	for _, g := range a.Groups {
		byLayer[g.Layer] = append(byLayer[g.Layer], g)
	}
	for l, groups := range byLayer {
		c := capacity / layers
		if l < capacity%layers {
			c++
		}
		p, err := newPolicy(name, c, o)
		if err != nil {
			return Result{}, err
		}
		n, h := simulate(groups, c, p, nil)
		res.Lookups += n
		res.Hits += h
	}
	return res, nil
}

// Misses replays the trace through one shared cache of capacity slots,
// as Replay does, and returns each group's misses: what a planner turns
// into reads, group by group, since a group's misses are read together.
func (a *Accesses) Misses(name string, capacity int, o Options) ([]int, error) {
	if capacity < 0 {
		return nil, fmt.Errorf("cachelab: capacity %d: want at least 0", capacity)
	}
	p, err := newPolicy(name, capacity, o)
	if err != nil {
		return nil, err
	}
	perGroup := make([]int, len(a.Groups))
	simulate(a.Groups, capacity, p, perGroup)
	return perGroup, nil
}

// simulate replays groups as the engine fetches them: every key looked up
// first, hits told to the policy in order, then the misses inserted in
// order, each evicting the policy's victim when the cache is full, unless
// the policy (Belady) declines to cache it. With perGroup not nil it
// records each group's misses there.
func simulate(groups []Group, capacity int, p policy, perGroup []int) (lookups, hits int64) {
	cached := make(map[uint64]bool, capacity)
	var misses []int
	for gi, g := range groups {
		misses = misses[:0]
		for i, k := range g.Keys {
			lookups++
			if cached[k] {
				hits++
				p.hit(k, use{t: int64(g.Step), next: g.Next[i]})
			} else {
				misses = append(misses, i)
			}
		}
		if perGroup != nil {
			perGroup[gi] = len(misses)
		}
		if capacity == 0 {
			continue
		}
		for _, i := range misses {
			k := g.Keys[i]
			if len(cached) >= capacity {
				if b, ok := p.(bypasser); ok && b.bypass(g.Next[i]) {
					continue
				}
				v := p.victim(int64(g.Step))
				delete(cached, v)
				p.removed(v)
			}
			cached[k] = true
			p.inserted(k, use{t: int64(g.Step), next: g.Next[i]})
		}
	}
	return lookups, hits
}

// ParsePolicies parses a comma-separated list of policy names; "all" is
// every policy. Duplicates are dropped, the order kept.
func ParsePolicies(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		name := strings.ToLower(strings.TrimSpace(f))
		switch {
		case name == "all":
			for _, p := range Policies {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		case !slices.Contains(Policies, name):
			return nil, fmt.Errorf("unknown policy %q (have %s, all)", f, strings.Join(Policies, ", "))
		case !slices.Contains(out, name):
			out = append(out, name)
		}
	}
	return out, nil
}

// Capacity is a cache size as asked: a percentage of the model's
// (layer, expert) pairs, or a number of slots.
type Capacity struct {
	Percent float64 // > 0 when asked as a percentage
	Slots   int     // when asked as a count
}

func (c Capacity) String() string {
	if c.Percent > 0 {
		return strconv.FormatFloat(c.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(c.Slots)
}

// For is the number of slots c gives a model of pairs (layer, expert)
// pairs: a percentage rounds to the nearest slot, at least 1; a count
// above pairs is clamped to pairs, since more slots cannot hit more.
func (c Capacity) For(pairs int) int {
	if c.Percent > 0 {
		return max(1, int(math.Round(c.Percent*float64(pairs)/100)))
	}
	return min(c.Slots, pairs)
}

// ParseCapacities parses a comma-separated list of capacities, each a
// percentage in (0, 100] ("5%", "12.5%") or a count of slots of at least
// 1 ("512").
func ParseCapacities(s string) ([]Capacity, error) {
	var out []Capacity
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if pct, ok := strings.CutSuffix(f, "%"); ok {
			v, err := strconv.ParseFloat(pct, 64)
			if err != nil || !(v > 0 && v <= 100) {
				return nil, fmt.Errorf("capacity %q: want a percentage in (0, 100]", f)
			}
			out = append(out, Capacity{Percent: v})
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("capacity %q: want a percentage like 10%% or a number of slots of at least 1", f)
		}
		out = append(out, Capacity{Slots: n})
	}
	return out, nil
}
