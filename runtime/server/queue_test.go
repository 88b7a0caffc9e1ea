package server

import (
	"strings"
	"testing"
)

// TestRoundRobinAcrossKeys: waiting jobs are taken round-robin across
// their API keys, each key's own in arrival order, so a burst from one
// key cannot starve the others; with one key it is first come, first
// served.
func TestRoundRobinAcrossKeys(t *testing.T) {
	q := newJobQueue(16, 1, newMetrics(16), nil)
	for _, name := range strings.Fields("a1 a2 a3 b1 c1 a4 b2") {
		if !q.push(&job{tenant: name[:1], prompt: []int{int(name[1])}}) {
			t.Fatal("push refused")
		}
	}
	var order []string
	for {
		j, ok := q.take(false)
		if !ok {
			break
		}
		order = append(order, j.tenant+string(rune(j.prompt[0])))
	}
	if got, want := strings.Join(order, " "), "a1 b1 c1 a2 b2 a3 a4"; got != want {
		t.Errorf("taken in the order %s, want %s", got, want)
	}
	q = newJobQueue(4, 1, newMetrics(4), nil)
	for i := range 3 {
		q.push(&job{prompt: []int{i}})
	}
	for i := range 3 {
		if j, _ := q.take(false); j.prompt[0] != i {
			t.Errorf("one key: job %d taken %d-th", j.prompt[0], i)
		}
	}
}
