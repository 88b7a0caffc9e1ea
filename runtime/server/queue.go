package server

import (
	"slices"
	"sync"
)

// jobQueue holds the server's places and the jobs waiting for the model.
//
// A request takes a place (reserve) before its body is read and keeps it
// until its answer is written (release), so everything a request costs
// (its body, its tokens, its session) is held by at most limit + parallel
// requests: those being read and tokenized, those waiting, those running
// and those whose answers are being written. Past that a request is
// refused (429) before anything of it is read. The places not running are
// the queue's depth.
//
// The waiting jobs are a list rather than a channel so that a job whose
// client gave up, or whose timeout passed, leaves it at once: its place
// goes to a live client instead of being held until the worker reaches
// the job.
//
// Every change, and every refusal, is reported to the metrics under mu,
// so the depth a 429 records is the depth that caused it: at least the
// limit, unless the queue refuses below it.
type jobQueue struct {
	mu      sync.Mutex
	changed sync.Cond // signalled when a job arrives or the queue closes
	waiting []*job
	limit   int // places beyond the running ones
	places  int // limit + the worker's batch
	held    int // places taken
	running int // of those, by jobs in the worker's batch
	last    string
	closed  bool
	metrics *metrics
	arrived func() // tells the worker a job arrived while it runs others
}

func newJobQueue(limit, parallel int, m *metrics, arrived func()) *jobQueue {
	q := &jobQueue{limit: limit, places: limit + parallel, metrics: m, arrived: arrived}
	q.changed.L = &q.mu
	return q
}

// reserve takes a place unless every place is taken or the queue is
// closed.
func (q *jobQueue) reserve() (ok, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return false, true
	case q.held >= q.places:
		q.metrics.rejectQueueFull(q.held - q.running)
		return false, false
	}
	q.held++
	q.metrics.setQueued(q.held - q.running)
	return true, false
}

// release gives back a place once its request's answer is written.
func (q *jobQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.held--
	q.metrics.setQueued(q.held - q.running)
}

// left records that the worker is done with a job it took, before it
// sends the job's end. Its place stays held until the handler has
// written the answer; meanwhile it counts with the places not running,
// so the running ones never number more than the batch holds and a 429
// always finds at least the limit not running.
func (q *jobQueue) left() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running--
	q.metrics.setQueued(q.held - q.running)
}

// push adds j, which holds a place, to the waiting jobs; false means the
// queue is closed.
func (q *jobQueue) push(j *job) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.waiting = append(q.waiting, j)
	q.changed.Signal()
	q.mu.Unlock()
	if q.arrived != nil {
		q.arrived()
	}
	return true
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
	return true
}

// take takes the next job off the queue, waiting for one if wait is
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
	q.running++
	q.metrics.setQueued(q.held - q.running)
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

// close makes reserve and push refuse from now on and wakes the worker.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.changed.Broadcast()
}
