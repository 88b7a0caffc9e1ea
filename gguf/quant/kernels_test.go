package quant

import (
	"strings"
	"testing"
)

// TestPickLevel: GGUFTOOL_KERNELS empty picks the best level; a level at
// or below it is honoured; one above it, or no level at all, falls back
// to generic with an error naming the request and what this CPU runs.
func TestPickLevel(t *testing.T) {
	for best := range len(levelNames) {
		if l, err := pickLevel("", best); l != best || err != nil {
			t.Errorf("best %s, no request: level %s, %v", levelNames[best], levelNames[l], err)
		}
		for want, name := range levelNames {
			l, err := pickLevel(name, best)
			switch {
			case want <= best && (l != want || err != nil):
				t.Errorf("best %s, GGUFTOOL_KERNELS=%s: level %s, %v", levelNames[best], name, levelNames[l], err)
			case want > best && (l != levelGeneric || err == nil || !strings.Contains(err.Error(), "at most "+levelNames[best])):
				t.Errorf("best %s, GGUFTOOL_KERNELS=%s: level %s, %v; want generic and an error", levelNames[best], name, levelNames[l], err)
			}
		}
		for _, bad := range []string{"AVX2", "avx-512", "sse2", " generic"} {
			if l, err := pickLevel(bad, best); l != levelGeneric || err == nil || !strings.Contains(err.Error(), "unknown kernel level") {
				t.Errorf("GGUFTOOL_KERNELS=%q: level %s, %v; want generic and an error", bad, levelNames[l], err)
			}
		}
	}
}
