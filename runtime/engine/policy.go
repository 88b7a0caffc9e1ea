package engine

import "github.com/gguftool/gguftool/runtime/cachelab"

// Policies are the expert cache's eviction policies: the cache-policy
// lab's online ones (package cachelab), so a replay of a trace and the
// engine choose the same victims.
var Policies = cachelab.Online

func cacheKey(layer, expert int) uint64 { return cachelab.Key(layer, expert) }
