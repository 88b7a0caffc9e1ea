package cachelab

import "math"

// worse says whether a is the better victim than b when their scores
// tie: the older last use, then the smaller key, so replays are
// deterministic whatever the map order.
func worse(a, b uint64, lastA, lastB int64) bool {
	if lastA != lastB {
		return lastA < lastB
	}
	return a < b
}

// history keeps, for every key ever looked up (cached or not), what the
// literature's policies score it by. It is bounded by the model's
// (layer, expert) pairs.
type history map[uint64]*keyHistory

type keyHistory struct {
	first, last int64
	uses        int64
	recent      []int64 // use times still inside a window, oldest first
}

func (h history) note(k uint64, t int64) *keyHistory {
	e := h[k]
	if e == nil {
		e = &keyHistory{first: t}
		h[k] = e
	}
	e.last = t
	e.uses++
	return e
}

// window evicts the expert used least often within the last W tokens, the
// least recently used among equals: what no token of the window needed
// goes first, in LRU order ("LRU beyond the window"), and within the
// window the experts used most are kept. (Protecting the window and
// running LRU on the rest would evict exactly what LRU evicts.)
type window struct {
	w      int64
	hist   history
	cached map[uint64]bool
}

func (p *window) hit(k uint64, u use)      { p.note(k, u.t) }
func (p *window) inserted(k uint64, u use) { p.note(k, u.t); p.cached[k] = true }
func (p *window) removed(k uint64)         { delete(p.cached, k) }

func (p *window) note(k uint64, t int64) {
	e := p.hist.note(k, t)
	e.recent = append(p.inWindow(e, t), t)
}

// inWindow drops the uses older than the window ending at t.
func (p *window) inWindow(e *keyHistory, t int64) []int64 {
	drop := 0
	for drop < len(e.recent) && e.recent[drop] <= t-p.w {
		drop++
	}
	// Shift down rather than reslice, so the slice keeps its capacity and
	// a key used on every token stops allocating once its window is full.
	n := copy(e.recent, e.recent[drop:])
	e.recent = e.recent[:n]
	return e.recent
}

func (p *window) victim(t int64) uint64 {
	var best uint64
	bestN, bestLast := int64(-1), int64(0)
	for k := range p.cached {
		e := p.hist[k]
		n := int64(len(p.inWindow(e, t)))
		if bestN < 0 || n < bestN || (n == bestN && worse(k, best, e.last, bestLast)) {
			best, bestN, bestLast = k, n, e.last
		}
	}
	return best
}

// decay evicts the expert of the lowest decayed frequency: the sum over
// its uses of 0.5^(age/half-life). The score is kept as
// log2(score) + t/h, which does not change as time passes, so scores taken
// at different times compare directly.
type decay struct {
	h      float64
	v      map[uint64]float64
	last   map[uint64]int64
	cached map[uint64]bool
}

func (p *decay) note(k uint64, t int64) {
	now := float64(t) / p.h
	if old, ok := p.v[k]; ok {
		p.v[k] = now + math.Log2(1+math.Exp2(old-now))
	} else {
		p.v[k] = now
	}
	p.last[k] = t
}
func (p *decay) hit(k uint64, u use)      { p.note(k, u.t) }
func (p *decay) inserted(k uint64, u use) { p.note(k, u.t); p.cached[k] = true }
func (p *decay) removed(k uint64)         { delete(p.cached, k) }
func (p *decay) victim(int64) uint64 {
	var best uint64
	first := true
	for k := range p.cached {
		if first || p.v[k] < p.v[best] || (p.v[k] == p.v[best] && worse(k, best, p.last[k], p.last[best])) {
			best, first = k, false
		}
	}
	return best
}

// stale evicts the least-stale-adjusted expert: the one whose time since
// its last use is longest relative to its own mean reuse interval, so an
// expert used every 20 tokens and idle for 10 outlives one used every 2
// and idle for 5. An expert used once has no interval yet and goes first.
type stale struct {
	hist   history
	cached map[uint64]bool
}

func (p *stale) hit(k uint64, u use)      { p.hist.note(k, u.t) }
func (p *stale) inserted(k uint64, u use) { p.hist.note(k, u.t); p.cached[k] = true }
func (p *stale) removed(k uint64)         { delete(p.cached, k) }
func (p *stale) victim(t int64) uint64 {
	var best uint64
	bestS, bestLast := math.Inf(-1), int64(0)
	first := true
	for k := range p.cached {
		e := p.hist[k]
		s := math.Inf(1)
		if e.uses > 1 && e.last > e.first {
			mean := float64(e.last-e.first) / float64(e.uses-1)
			s = float64(t-e.last) / mean
		}
		if first || s > bestS || (s == bestS && worse(k, best, e.last, bestLast)) {
			best, bestS, bestLast, first = k, s, e.last, false
		}
	}
	return best
}

// belady keeps the experts whose next use is nearest: when the cache is
// full it evicts the cached expert whose next use is farthest (never used
// again counts as farthest; the smaller key among equals), or declines to
// cache the missed expert when its own next use is no nearer. That is the
// offline optimum when a step's lookups come as a set: any policy that must
// cache every miss reaches only some of the states it can choose between,
// so none scores more hits. (Forcing Belady to cache every miss would not
// be optimal: two experts next used in the same step tie, and which one is
// kept decides which is later forced in.)
type belady struct{ next map[uint64]int }

// bypasser is a policy that may decline to cache a miss whose next use is
// next, rather than evict anything.
type bypasser interface{ bypass(next int) bool }

func (p *belady) hit(k uint64, u use)      { p.next[k] = u.next }
func (p *belady) inserted(k uint64, u use) { p.next[k] = u.next }
func (p *belady) removed(k uint64)         { delete(p.next, k) }
func (p *belady) victim(int64) uint64 {
	k, _ := p.farthest()
	return k
}
func (p *belady) bypass(next int) bool {
	_, n := p.farthest()
	return next >= n
}

func (p *belady) farthest() (uint64, int) {
	var best uint64
	bestN := -1
	for k, n := range p.next {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best, bestN
}
