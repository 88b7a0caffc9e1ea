package server

import (
	"slices"
	"sync"
)

// jobQueue holds the jobs waiting for the model, at most limit of them,
// besides the one an idle worker takes at once (so a limit of 0 means one
// running, none waiting).
// It is a list rather than a channel so that a job whose client gave up,
// or whose timeout passed, leaves it at once: its slot goes to a live
// client instead of being held until the worker reaches the job.
//
// Every change to the list, and every refusal, is reported to the
// metrics under mu, so the depth a 429 records is the depth that caused
// it: at least the bound, unless the queue refuses below it.
type jobQueue struct {
	mu      sync.Mutex
	changed sync.Cond // signalled when a job arrives or the queue closes
	waiting []*job
	limit   int
	idle    bool // the worker waits in pop with nothing to take
	closed  bool
	metrics *metrics
}

func newJobQueue(limit int, m *metrics) *jobQueue {
	q := &jobQueue{limit: limit, metrics: m}
	q.changed.L = &q.mu
	return q
}

// push adds j unless the queue is full or closed.
func (q *jobQueue) push(j *job) (ok, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	room := q.limit
	if q.idle {
		room++ // the idle worker takes this one at once: it never waits
	}
	switch {
	case q.closed:
		return false, true
	case len(q.waiting) >= room:
		q.metrics.rejectQueueFull(len(q.waiting))
		return false, false
	}
	q.waiting = append(q.waiting, j)
	q.metrics.setQueued(len(q.waiting))
	q.changed.Signal()
	return true, false
}

// remove takes j off the queue and reports whether it was still waiting;
// false means the worker has taken it.
func (q *jobQueue) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.waiting, j)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	q.metrics.setQueued(len(q.waiting))
	return true
}

// pop waits for the oldest job and takes it off the queue. Once the queue
// is closed it hands out what is left, then reports false.
func (q *jobQueue) pop() (*job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.waiting) == 0 && !q.closed {
		q.idle = true
		q.changed.Wait()
	}
	q.idle = false
	if len(q.waiting) == 0 {
		return nil, false
	}
	j := q.waiting[0]
	q.waiting = slices.Delete(q.waiting, 0, 1)
	q.metrics.setQueued(len(q.waiting))
	return j, true
}

// close makes push refuse from now on and wakes the worker.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.changed.Broadcast()
}
