package engine

import (
	"context"
	"fmt"

	"github.com/gguftool/gguftool/internal/ioengine"
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
	// Policy is the eviction policy: lru (default), lfu or lfru.
	Policy string
	// Backend is the I/O backend (auto, uring, pread).
	Backend ioengine.Backend
	// QueueDepth is the most reads in flight; 0 means the engine's default.
	QueueDepth int
	// Buffered turns O_DIRECT off, so reads go through the page cache.
	Buffered bool
}

// expertCache holds verified expert records in RAM: a fixed number of
// slots of one record each. Its memory is mapped at startup but each slot
// is touched only when an expert is first stored in it.
type expertCache struct {
	pool     *ioengine.Pool // nil when the cache has no slots
	slots    int
	stride   int
	at       map[uint64]*ioengine.Buffer
	policy   policy
	evicted  uint64
	inserted uint64
}

func newExpertCache(slots int, stride int64, policyName string) (*expertCache, error) {
	p, err := newPolicy(policyName, slots)
	if err != nil {
		return nil, err
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
	c.policy.hit(k)
	return b.Bytes()[:c.stride], true
}

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
		old := c.policy.victim()
		b = c.at[old]
		delete(c.at, old)
		c.policy.removed(old)
		c.evicted++
	} else {
		var err error
		if b, err = c.pool.Get(context.Background()); err != nil { // a slot is free: never blocks
			panic("engine: expert cache: " + err.Error())
		}
	}
	copy(b.Bytes(), rec)
	c.at[k] = b
	c.policy.inserted(k)
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
