package cachelab

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Policies are the policies Replay knows: the Online ones, which the
// engine offers, and Belady's offline optimum last.
var Policies = []string{"lru", "lfu", "lfru", "window", "decay", "stale", "belady"}

// Options tune the policies that take a parameter.
type Options struct {
	// Window is the recency window of "window", in tokens (steps).
	Window int
	// HalfLife is the half-life of "decay", in tokens.
	HalfLife float64
}

// DefaultOptions are the flags' defaults.
var DefaultOptions = Options{Window: 8, HalfLife: 16}

// use is one lookup as a policy sees it: the clock (the batch's first
// step) and, for Belady, the index of the key's next use.
type use struct {
	t    int64
	next int
}

// policy chooses which cached expert to evict. It sees every lookup:
// hit for those served from the cache, inserted for the misses (after the
// victim, if any, was removed).
type policy interface {
	hit(k uint64, u use)
	inserted(k uint64, u use)
	victim(t int64) uint64 // the cache is not empty
	removed(k uint64)
}

func newPolicy(name string, capacity int, o Options) (policy, error) {
	switch name {
	case "lru":
		return newLRU(), nil
	case "lfu":
		return &lfu{use: map[uint64]lfuEntry{}}, nil
	case "lfru":
		return &lfru{privCap: max(1, capacity/2), priv: newLRU(), unpriv: map[uint64]lfuEntry{}}, nil
	case "window":
		if o.Window <= 0 {
			return nil, fmt.Errorf("cachelab: window of %d tokens: want at least 1", o.Window)
		}
		return &window{w: int64(o.Window), hist: history{}, cached: map[uint64]bool{}}, nil
	case "decay":
		if !(o.HalfLife > 0) || math.IsInf(o.HalfLife, 0) {
			return nil, fmt.Errorf("cachelab: half-life %v: want a positive number of tokens", o.HalfLife)
		}
		return &decay{h: o.HalfLife, v: map[uint64]float64{}, last: map[uint64]int64{}, cached: map[uint64]bool{}}, nil
	case "stale":
		return &stale{hist: history{}, cached: map[uint64]bool{}}, nil
	case "belady":
		return &belady{next: map[uint64]int{}}, nil
	}
	return nil, fmt.Errorf("cachelab: unknown policy %q (have %s)", name, strings.Join(Policies, ", "))
}

// lru evicts the least recently used entry. Its list is intrusive: the
// nodes live in one slice and a removed node goes on a free list, so a
// cache that evicts on every token allocates nothing once it is full.
type lru struct {
	nodes []lruNode
	at    map[uint64]int32
	head  int32 // most recent; -1 when empty
	tail  int32 // least recent
	free  int32 // first free node; -1 when none
}

type lruNode struct {
	key        uint64
	prev, next int32
}

func newLRU() *lru { return &lru{at: map[uint64]int32{}, head: -1, tail: -1, free: -1} }

func (p *lru) hit(k uint64, _ use) {
	i := p.at[k]
	p.unlink(i)
	p.pushFront(i)
}

func (p *lru) inserted(k uint64, _ use) {
	i := p.free
	if i >= 0 {
		p.free = p.nodes[i].next
	} else {
		i = int32(len(p.nodes))
		p.nodes = append(p.nodes, lruNode{})
	}
	p.nodes[i].key = k
	p.at[k] = i
	p.pushFront(i)
}

func (p *lru) victim(int64) uint64 { return p.nodes[p.tail].key }

func (p *lru) removed(k uint64) {
	i := p.at[k]
	p.unlink(i)
	delete(p.at, k)
	p.nodes[i].next = p.free
	p.free = i
}

func (p *lru) pushFront(i int32) {
	n := &p.nodes[i]
	n.prev, n.next = -1, p.head
	if p.head >= 0 {
		p.nodes[p.head].prev = i
	} else {
		p.tail = i
	}
	p.head = i
}

func (p *lru) unlink(i int32) {
	n := p.nodes[i]
	if n.prev >= 0 {
		p.nodes[n.prev].next = n.next
	} else {
		p.head = n.next
	}
	if n.next >= 0 {
		p.nodes[n.next].prev = n.prev
	} else {
		p.tail = n.prev
	}
}

// lfu evicts the entry used least often since it was inserted, the least
// recently used among equals: its clock counts the policy's events, so no
// two entries tie.
type lfu struct {
	clock uint64
	use   map[uint64]lfuEntry
}

type lfuEntry struct{ count, last uint64 }

func (p *lfu) hit(k uint64, _ use) {
	p.clock++
	e := p.use[k]
	e.count++
	e.last = p.clock
	p.use[k] = e
}
func (p *lfu) inserted(k uint64, _ use) {
	p.clock++
	p.use[k] = lfuEntry{count: 1, last: p.clock}
}
func (p *lfu) victim(int64) uint64 { return leastFrequent(p.use) }
func (p *lfu) removed(k uint64)    { delete(p.use, k) }

func leastFrequent(m map[uint64]lfuEntry) uint64 {
	var best uint64
	var be lfuEntry
	first := true
	for k, e := range m {
		if first || e.count < be.count || (e.count == be.count && e.last < be.last) {
			best, be, first = k, e, false
		}
	}
	return best
}

// lfru splits the cache in two: a privileged part run as LRU for entries
// used again since they came in, and an unprivileged part run as LFU for
// entries seen once. New entries enter unprivileged and evictions come
// from there first, so one long scan of cold experts cannot flush the
// experts every token uses.
type lfru struct {
	privCap int
	priv    *lru
	unpriv  map[uint64]lfuEntry
	clock   uint64
}

func (p *lfru) hit(k uint64, u use) {
	p.clock++
	if _, ok := p.priv.at[k]; ok {
		p.priv.hit(k, u)
		return
	}
	delete(p.unpriv, k)
	if len(p.priv.at) >= p.privCap {
		old := p.priv.victim(u.t)
		p.priv.removed(old)
		p.unpriv[old] = lfuEntry{count: 2, last: p.clock}
	}
	p.priv.inserted(k, u)
}
func (p *lfru) inserted(k uint64, _ use) {
	p.clock++
	p.unpriv[k] = lfuEntry{count: 1, last: p.clock}
}
func (p *lfru) victim(t int64) uint64 {
	if len(p.unpriv) > 0 {
		return leastFrequent(p.unpriv)
	}
	return p.priv.victim(t)
}
func (p *lfru) removed(k uint64) {
	if _, ok := p.priv.at[k]; ok {
		p.priv.removed(k)
		return
	}
	delete(p.unpriv, k)
}

// Online are the policies a running cache can use: every one but Belady,
// which reads the future. The engine's expert cache offers exactly these.
var Online = []string{"lru", "lfu", "lfru", "window", "decay", "stale"}

// Policy is one of the Online policies as a cache drives it: the engine's
// expert cache evicts with these, so the lab's replay and the engine
// choose the same victims by construction. The clock t is in tokens: the
// first position of the batch being looked up, counted from the cache's
// first batch, as a trace's steps are.
type Policy struct {
	name string
	p    policy
}

// NewPolicy returns the Online policy name (case-insensitive; "" is lru)
// for a cache of capacity entries, with DefaultOptions' window and
// half-life.
func NewPolicy(name string, capacity int) (*Policy, error) {
	n := strings.ToLower(name)
	if n == "" {
		n = "lru"
	}
	if !slices.Contains(Online, n) {
		return nil, fmt.Errorf("unknown cache policy %q (have %s)", name, strings.Join(Online, ", "))
	}
	p, err := newPolicy(n, capacity, DefaultOptions)
	if err != nil {
		return nil, err
	}
	return &Policy{name: n, p: p}, nil
}

// Name is the policy's name, lower case.
func (p *Policy) Name() string { return p.name }

// Hit records that k was served from the cache at time t.
func (p *Policy) Hit(k uint64, t int64) { p.p.hit(k, use{t: t}) }

// Inserted records that k was added at time t.
func (p *Policy) Inserted(k uint64, t int64) { p.p.inserted(k, use{t: t}) }

// Victim is the entry to evict at time t; the cache must not be empty.
func (p *Policy) Victim(t int64) uint64 { return p.p.victim(t) }

// Removed records that k was evicted.
func (p *Policy) Removed(k uint64) { p.p.removed(k) }
