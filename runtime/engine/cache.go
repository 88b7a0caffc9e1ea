package engine

import (
	"context"
	"fmt"

	"github.com/gguftool/gguftool/runtime/cachelab"

	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// CacheOptions size and tune the host expert cache of a pack.
type CacheOptions struct {
	// Bytes bounds the cache; it holds Bytes ÷ record size experts.
	// Ignored when Slots is set.
	Bytes int64
	// Slots is the number of experts the cache holds; 0 with Bytes 0
	// means no cache: every routed expert is read from the pack.
	Slots int
	// Auto sizes the cache from the memory available (AutoCacheBytes),
	// when neither Bytes nor Slots is set.
	Auto bool
	// Policy is the eviction policy, one of Policies (lru by default).
	Policy string
	// Backend is the I/O backend (auto, uring, pread).
	Backend ioengine.Backend
	// QueueDepth is the most reads in flight; 0 means the engine's default.
	QueueDepth int
	// Buffered turns O_DIRECT off, so reads go through the page cache.
	Buffered bool
	// Prefetch turns speculative prefetch on: the next layer's likely
	// experts are read ahead while a layer computes. Whether it gains
	// depends on the disk and the model, so it is off unless asked for;
	// a plan (package planner) asks for it where it measured a gain.
	Prefetch bool
}

// cacheSize is the number of slots a pack's expert cache gets for o, with
// records the pack's expert records of stride bytes each and resident the
// bytes of its non-expert weights. The cache never holds more than every
// record, nor (when memory() can tell) more than the memory available
// after the resident weights and AutoCacheBytes' margin; a size smaller
// than one record is rounded up to one. note says, once, how and why the
// request was changed, or that auto found no room for any record: a cache
// of 0 slots happens silently only when it was asked for.
func cacheSize(o CacheOptions, stride, records, resident int64, memory func() (Memory, error)) (slots int64, note string, err error) {
	var asked string
	switch {
	case o.Slots > 0:
		slots, asked = int64(o.Slots), fmt.Sprintf("expert cache of %d slots", o.Slots)
	case o.Bytes > 0:
		slots, asked = o.Bytes/stride, "expert cache of "+iostreams.Bytes(o.Bytes)
		if slots == 0 {
			slots = 1
			note = fmt.Sprintf("%s is smaller than one expert record (%s): rounded up to 1 slot", asked, iostreams.Bytes(stride))
		}
	case o.Auto:
		mem, err := memory()
		if err != nil {
			return 0, "", err
		}
		slots = AutoCacheBytes(mem, resident, records*stride) / stride
		if slots == 0 {
			note = fmt.Sprintf("automatic expert cache: no room for one expert record (%s) in the %s available (%s) after the resident weights (%s) and a %s margin: every routed expert is read from the pack",
				iostreams.Bytes(stride), iostreams.Bytes(mem.Available), mem.Source, iostreams.Bytes(resident), iostreams.Bytes(autoCacheMargin))
		}
		return slots, note, nil
	default:
		return 0, "", nil // no cache, as asked
	}
	if slots > records {
		slots = records
		note = fmt.Sprintf("%s is more than the pack's %d expert records: clamped to %s (%s)", asked, records, iostreams.Plural(slots, "slot"), iostreams.Bytes(slots*stride))
	}
	if mem, err := memory(); err == nil {
		if room := max(1, AutoCacheBytes(mem, resident, records*stride)/stride); slots > room {
			slots = room
			note = fmt.Sprintf("%s is more than the memory available allows (%s from %s, less the resident weights and a %s margin): clamped to %s (%s)",
				asked, iostreams.Bytes(mem.Available), mem.Source, iostreams.Bytes(autoCacheMargin), iostreams.Plural(slots, "slot"), iostreams.Bytes(slots*stride))
		}
	}
	return slots, note, nil
}

// expertCache holds verified expert records in RAM: a fixed number of
// slots of one record each. Its memory is mapped at startup but each slot
// is touched only when an expert is first stored in it.
type expertCache struct {
	pool   *ioengine.Pool // nil when the cache has no slots
	slots  int
	stride int
	at     map[uint64]*ioengine.Buffer
	policy *cachelab.Policy
	// clock is the policies' time in tokens: the first position of the
	// batch being fetched, counted over every batch the model has run.
	clock    int64
	evicted  uint64
	inserted uint64
}

func newExpertCache(slots int, stride int64, policyName string) (*expertCache, error) {
	p, err := cachelab.NewPolicy(policyName, slots)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	c := &expertCache{slots: slots, stride: int(stride), at: map[uint64]*ioengine.Buffer{}, policy: p}
	if slots > 0 {
		if c.pool, err = ioengine.NewPool(int(stride), slots); err != nil {
			return nil, fmt.Errorf("engine: expert cache of %d slots of %d bytes: %w", slots, stride, err)
		}
	}
	return c, nil
}

// get returns a cached record and counts the hit.
func (c *expertCache) get(k uint64) ([]byte, bool) {
	b, ok := c.at[k]
	if !ok {
		return nil, false
	}
	c.policy.Hit(k, c.clock)
	return b.Bytes()[:c.stride], true
}

// has says whether k is cached, without counting a use.
func (c *expertCache) has(k uint64) bool { _, ok := c.at[k]; return ok }

// put stores a copy of rec, evicting an entry if the cache is full.
func (c *expertCache) put(k uint64, rec []byte) {
	if c.slots == 0 {
		return
	}
	if _, ok := c.at[k]; ok {
		return
	}
	var b *ioengine.Buffer
	if len(c.at) >= c.slots {
		old := c.policy.Victim(c.clock)
		b = c.at[old]
		delete(c.at, old)
		c.policy.Removed(old)
		c.evicted++
	} else {
		var err error
		if b, err = c.pool.Get(context.Background()); err != nil { // a slot is free: never blocks
			panic("engine: expert cache: " + err.Error())
		}
	}
	copy(b.Bytes(), rec)
	c.at[k] = b
	c.policy.Inserted(k, c.clock)
	c.inserted++
}

func (c *expertCache) close() error {
	if c.pool == nil {
		return nil
	}
	for k, b := range c.at {
		_ = c.pool.Put(b)
		delete(c.at, k)
	}
	return c.pool.Close()
}
