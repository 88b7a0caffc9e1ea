package server

import (
	"slices"
	"sync"
)

// jobQueue holds the jobs waiting for the model, at most limit of them,
// besides those the worker takes at once into free places of its batch
// (so a limit of 0 with one place means one running, none waiting).
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
	free    int    // places the worker's batch has for jobs now
	last    string // the tenant of the job taken last
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
	room := q.limit + q.free // the worker takes free places' jobs at its next step
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

// setFree tells the queue how many jobs the worker's batch has room for.
func (q *jobQueue) setFree(n int) {
	q.mu.Lock()
	q.free = n
	q.mu.Unlock()
}

// take takes the oldest job off the queue, waiting for one if wait is
// set; false means none (or, waiting, that the queue is closed and
// empty). Once the queue is closed it hands out what is left.
func (q *jobQueue) take(wait bool) (*job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for wait && len(q.waiting) == 0 && !q.closed {
		q.changed.Wait()
	}
	if len(q.waiting) == 0 {
		return nil, false
	}
	i := q.next()
	j := q.waiting[i]
	q.last = j.tenant
	q.waiting = slices.Delete(q.waiting, i, i+1)
	q.metrics.setQueued(len(q.waiting))
	return j, true
}

// next is the index of the job to take: round-robin across tenants, the
// oldest waiting job of the first tenant after the last one served (in
// the tenants' sorted order, wrapping around); FIFO with one tenant.
func (q *jobQueue) next() int {
	best, wrap := -1, -1
	for i, j := range q.waiting {
		switch {
		case j.tenant > q.last && (best < 0 || j.tenant < q.waiting[best].tenant):
			best = i
		case wrap < 0 || j.tenant < q.waiting[wrap].tenant:
			wrap = i
		}
	}
	if best >= 0 {
		return best
	}
	return wrap
}

// close makes push refuse from now on and wakes the worker.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.changed.Broadcast()
}
