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
	r, err := newRunner(Run{Policy: name, Capacity: capacity}, a.Header.Layers, perLayer, o)
	if err != nil {
		return Result{}, err
	}
	for i := range a.Groups {
		g := &a.Groups[i]
		if _, err := r.feed(g.Layer, int64(g.Step), g.Keys, g.Next); err != nil {
			return Result{}, err
		}
	}
	return r.result(), nil
}

// Misses replays the trace through one shared cache of capacity slots,
// as Replay does, and returns each group's misses: what a planner turns
// into reads, group by group, since a group's misses are read together.
func (a *Accesses) Misses(name string, capacity int, o Options) ([]int, error) {
	r, err := newRunner(Run{Policy: name, Capacity: capacity}, a.Header.Layers, false, o)
	if err != nil {
		return nil, err
	}
	perGroup := make([]int, len(a.Groups))
	for gi := range a.Groups {
		g := &a.Groups[gi]
		if perGroup[gi], err = r.feed(g.Layer, int64(g.Step), g.Keys, g.Next); err != nil {
			return nil, err
		}
	}
	return perGroup, nil
}

// Run is one replay: a policy at a capacity in slots.
type Run struct {
	Policy   string
	Capacity int
}

// runner replays one Run group by group: one cache, or with perLayer one
// per layer, made when the layer is first looked up, so a header that
// declares many layers costs nothing until its records do.
type runner struct {
	run      Run
	layers   int
	perLayer bool
	o        Options
	global   *sim
	byLayer  map[int]*sim
}

func newRunner(run Run, layers int, perLayer bool, o Options) (*runner, error) {
	if run.Capacity < 0 {
		return nil, fmt.Errorf("cachelab: capacity %d: want at least 0", run.Capacity)
	}
	if layers <= 0 {
		return nil, fmt.Errorf("cachelab: %d layers", layers)
	}
	r := &runner{run: run, layers: layers, perLayer: perLayer, o: o, byLayer: map[int]*sim{}}
	var err error
	if !perLayer {
		r.global, err = newSim(run.Policy, run.Capacity, o)
	} else {
		_, err = newPolicy(run.Policy, 0, o) // refuse a bad name before any record
	}
	return r, err
}

// feed replays one group of layer and returns its misses.
func (r *runner) feed(layer int, t int64, keys []uint64, next []int) (int, error) {
	s := r.global
	if r.perLayer {
		if s = r.byLayer[layer]; s == nil {
			c := r.run.Capacity / r.layers
			if layer < r.run.Capacity%r.layers {
				c++
			}
			var err error
			if s, err = newSim(r.run.Policy, c, r.o); err != nil {
				return 0, err
			}
			r.byLayer[layer] = s
		}
	}
	return s.feed(t, keys, next), nil
}

func (r *runner) result() Result {
	res := Result{Policy: r.run.Policy, Capacity: r.run.Capacity}
	if r.global != nil {
		res.Lookups, res.Hits = r.global.lookups, r.global.hits
	}
	for _, s := range r.byLayer {
		res.Lookups += s.lookups
		res.Hits += s.hits
	}
	return res
}

// sim is one cache being replayed: what it holds, its policy and its
// counts. Its memory follows what was cached, never the capacity asked:
// a capacity of a billion slots over a trace of ten experts holds ten.
type sim struct {
	capacity      int
	p             policy
	cached        map[uint64]bool
	misses        []int
	lookups, hits int64
}

func newSim(name string, capacity int, o Options) (*sim, error) {
	p, err := newPolicy(name, capacity, o)
	if err != nil {
		return nil, err
	}
	return &sim{capacity: capacity, p: p, cached: map[uint64]bool{}}, nil
}

// feed replays one group as the engine fetches it: every key looked up
// first, hits told to the policy in order, then the misses inserted in
// order, each evicting the policy's victim when the cache is full, unless
// the policy (Belady) declines to cache it. next is each key's next use
// (only Belady reads it; nil for the others). It returns the misses.
func (s *sim) feed(t int64, keys []uint64, next []int) int {
	nextOf := func(i int) int {
		if next == nil {
			return never
		}
		return next[i]
	}
	s.misses = s.misses[:0]
	for i, k := range keys {
		s.lookups++
		if s.cached[k] {
			s.hits++
			s.p.hit(k, use{t: t, next: nextOf(i)})
		} else {
			s.misses = append(s.misses, i)
		}
	}
	if s.capacity == 0 {
		return len(s.misses)
	}
	for _, i := range s.misses {
		k := keys[i]
		if len(s.cached) >= s.capacity {
			if b, ok := s.p.(bypasser); ok && b.bypass(nextOf(i)) {
				continue
			}
			v := s.p.victim(t)
			delete(s.cached, v)
			s.p.removed(v)
		}
		s.cached[k] = true
		s.p.inserted(k, use{t: t, next: nextOf(i)})
	}
	return len(s.misses)
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
