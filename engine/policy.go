package engine

import (
	"container/list"
	"fmt"
	"strings"
)

// Policies are the expert cache's eviction policies.
var Policies = []string{"lru", "lfu", "lfru"}

// policy chooses which cached expert to evict. Keys are (layer, expert)
// pairs packed by cacheKey. Every method is O(1) or O(entries).
type policy interface {
	name() string
	hit(k uint64)      // k was served from the cache
	inserted(k uint64) // k was added
	victim() uint64    // the entry to evict; the cache is not empty
	removed(k uint64)  // k was evicted
}

func cacheKey(layer, expert int) uint64 { return uint64(layer)<<32 | uint64(uint32(expert)) }

func newPolicy(name string, capacity int) (policy, error) {
	switch strings.ToLower(name) {
	case "", "lru":
		return newLRU(), nil
	case "lfu":
		return newLFU(), nil
	case "lfru":
		return newLFRU(capacity), nil
	}
	return nil, fmt.Errorf("engine: unknown cache policy %q (have %s)", name, strings.Join(Policies, ", "))
}

// lru evicts the least recently used entry.
type lru struct {
	order *list.List // front = most recent
	at    map[uint64]*list.Element
}

func newLRU() *lru { return &lru{order: list.New(), at: map[uint64]*list.Element{}} }

func (p *lru) name() string { return "lru" }
func (p *lru) hit(k uint64) { p.order.MoveToFront(p.at[k]) }
func (p *lru) inserted(k uint64) {
	p.at[k] = p.order.PushFront(k)
}
func (p *lru) victim() uint64 { return p.order.Back().Value.(uint64) }
func (p *lru) removed(k uint64) {
	p.order.Remove(p.at[k])
	delete(p.at, k)
}

// lfu evicts the entry used least often since it was inserted, the least
// recently used among equals.
type lfu struct {
	clock uint64
	use   map[uint64]*lfuEntry
}

type lfuEntry struct{ count, last uint64 }

func newLFU() *lfu { return &lfu{use: map[uint64]*lfuEntry{}} }

func (p *lfu) name() string { return "lfu" }
func (p *lfu) hit(k uint64) {
	p.clock++
	e := p.use[k]
	e.count++
	e.last = p.clock
}
func (p *lfu) inserted(k uint64) {
	p.clock++
	p.use[k] = &lfuEntry{count: 1, last: p.clock}
}
func (p *lfu) victim() uint64   { return leastFrequent(p.use) }
func (p *lfu) removed(k uint64) { delete(p.use, k) }

func leastFrequent(m map[uint64]*lfuEntry) uint64 {
	var best uint64
	var be *lfuEntry
	for k, e := range m {
		if be == nil || e.count < be.count || (e.count == be.count && e.last < be.last) {
			best, be = k, e
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
	unpriv  map[uint64]*lfuEntry
	clock   uint64
}

func newLFRU(capacity int) *lfru {
	return &lfru{privCap: max(1, capacity/2), priv: newLRU(), unpriv: map[uint64]*lfuEntry{}}
}

func (p *lfru) name() string { return "lfru" }
func (p *lfru) hit(k uint64) {
	p.clock++
	if _, ok := p.priv.at[k]; ok {
		p.priv.hit(k)
		return
	}
	delete(p.unpriv, k)
	if len(p.priv.at) >= p.privCap {
		old := p.priv.victim()
		p.priv.removed(old)
		p.unpriv[old] = &lfuEntry{count: 2, last: p.clock}
	}
	p.priv.inserted(k)
}
func (p *lfru) inserted(k uint64) {
	p.clock++
	p.unpriv[k] = &lfuEntry{count: 1, last: p.clock}
}
func (p *lfru) victim() uint64 {
	if len(p.unpriv) > 0 {
		return leastFrequent(p.unpriv)
	}
	return p.priv.victim()
}
func (p *lfru) removed(k uint64) {
	if _, ok := p.priv.at[k]; ok {
		p.priv.removed(k)
		return
	}
	delete(p.unpriv, k)
}
