package server

import (
	"container/list"
	"slices"

	"github.com/gguftool/gguftool/runtime/engine"
)

// prefixCache keeps the states of recent prompts, least recently used
// evicted first, within a byte budget, so a request whose prompt begins
// like a recent one (the same system prompt, the same chat history)
// starts from that state. Only the worker uses it.
type prefixCache struct {
	budget, used int64
	order        *list.List // of *engine.Prefix, front = most recent
}

func newPrefixCache(budget int64) *prefixCache {
	return &prefixCache{budget: budget, order: list.New()}
}

// find returns the prefix that spares the most of prompt, and how many of
// its tokens it spares (0: none does).
func (c *prefixCache) find(prompt []int) (*engine.Prefix, int) {
	var best *list.Element
	keep := 0
	for e := c.order.Front(); e != nil; e = e.Next() {
		if n := e.Value.(*engine.Prefix).Reusable(prompt); n > keep {
			best, keep = e, n
		}
	}
	if best == nil {
		return nil, 0
	}
	c.order.MoveToFront(best)
	return best.Value.(*engine.Prefix), keep
}

// add keeps p, evicting the least recently used prefixes until it fits;
// a prefix over the whole budget, or one already kept, is not added (and
// freed).
func (c *prefixCache) add(p *engine.Prefix) {
	if p.Bytes() > c.budget {
		p.Free()
		return
	}
	for e := c.order.Front(); e != nil; e = e.Next() {
		if slices.Equal(e.Value.(*engine.Prefix).Tokens(), p.Tokens()) {
			c.order.MoveToFront(e)
			p.Free()
			return
		}
	}
	for c.used+p.Bytes() > c.budget {
		old := c.order.Back()
		c.used -= old.Value.(*engine.Prefix).Bytes()
		c.order.Remove(old)
		// Its state lives outside the Go heap, where no collection would
		// notice it is gone: freed now.
		old.Value.(*engine.Prefix).Free()
	}
	c.order.PushFront(p)
	c.used += p.Bytes()
}
