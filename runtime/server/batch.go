package server

import (
	"slices"
	"time"

	"github.com/gguftool/gguftool/runtime/engine"
)

// sequence is a job the batch is generating: its session, sampler and
// stop-sequence state, how much of its prompt has been evaluated, and its
// timings.
type sequence struct {
	j       *job
	sess    *engine.Session
	sampler *engine.Sampler
	st      *stopper
	fed     int   // prompt tokens evaluated
	cached  int   // of those, taken from the prefix cache
	tokens  []int // generated
	start   time.Time
	first   time.Time // when the prompt's last chunk was evaluated
	paused  bool      // left out of the last step: its client is not reading
}

// work runs the jobs: up to Parallel sequences decode together, one
// engine step (EvalBatch) at a time. New jobs join at step boundaries,
// their prompts fed PrefillChunk tokens per step so a long prompt cannot
// stall the others' decoding; each sequence leaves as soon as it is done.
// A sequence whose client is not reading its events is paused (left out
// of the steps) rather than waited for, so it delays no one else.
func (s *Server) work() {
	defer s.worker.Done()
	var live []*sequence
	for {
		var ok bool
		if live, ok = s.admit(live); !ok {
			return
		}
		items, who := s.step(live)
		if len(items) == 0 && len(live) > 0 {
			// Every running sequence is paused: wait for a client to
			// read, leave or time out, or for a new job.
			select {
			case <-s.wake:
			case <-s.base.Done():
				for _, q := range live {
					s.end(q, event{done: true, err: s.base.Err()})
				}
				live = live[:0]
			}
			continue
		}
		if len(items) == 0 {
			continue // every job admitted ended at once; wait on the queue
		}
		before := s.cfg.Model.Experts().Stats().Fetches
		logits, err := s.cfg.Model.EvalBatch(s.base, items)
		s.countStep(items, before)
		if err != nil {
			for _, q := range live {
				s.end(q, event{done: true, err: err})
			}
			live = live[:0]
			continue
		}
		for k, i := range who {
			q := live[i]
			if q.fed < len(q.j.prompt) {
				continue // more of its prompt next step
			}
			if q.first.IsZero() {
				q.first = time.Now()
				s.keepPrefix(q)
				s.metrics.firstTokenAfter(time.Since(q.j.arrived))
			}
			if ev, done := s.emit(q, logits[k]); done {
				s.end(q, ev)
				live[i] = nil
			}
		}
		live = slices.DeleteFunc(live, func(q *sequence) bool { return q == nil })
	}
}

// nudge wakes the worker if it waits with every sequence paused; it never
// blocks.
func (s *Server) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// admit drops the sequences whose clients left, then takes waiting jobs
// while fewer than Parallel run: blocking for one when none runs. It
// reports false once the queue is closed and drained and nothing runs.
func (s *Server) admit(live []*sequence) ([]*sequence, bool) {
	live = slices.DeleteFunc(live, func(q *sequence) bool {
		if err := q.j.ctx.Err(); err != nil {
			s.end(q, event{done: true, err: err})
			return true
		}
		return false
	})
	for len(live) < s.cfg.Parallel {
		j, ok := s.queue.take(len(live) == 0)
		if !ok {
			if len(live) == 0 {
				return nil, false
			}
			break
		}
		// Its context ended after its handler last looked: the handler
		// now waits for this end.
		if err := j.ctx.Err(); err != nil {
			s.queue.left()
			j.events <- event{done: true, err: err, queued: true}
			continue
		}
		sess, keep, err := s.session(j)
		if err != nil {
			s.queue.left()
			j.events <- event{done: true, err: err}
			continue
		}
		s.metrics.admitted(time.Since(j.arrived), keep)
		p := j.p
		live = append(live, &sequence{j: j, sess: sess, start: time.Now(), fed: keep, cached: keep,
			sampler: engine.NewSampler(engine.SamplerOptions{Temperature: p.temperature, TopK: p.topK, TopP: p.topP, Seed: p.seed}),
			st:      &stopper{tok: s.tok, stops: p.stop, special: p.chat != nil && p.chat.special}})
	}
	return live, true
}

// countStep records a step in the metrics: its sequences and rows, and
// the experts it fetched (the source's count since before) against the
// (row, expert) uses it routed.
func (s *Server) countStep(items []engine.BatchItem, before uint64) {
	rows := 0
	for _, it := range items {
		rows += len(it.Tokens)
	}
	h := s.cfg.Model.Hparams
	uses := uint64(rows) * uint64(h.ExpertsUsed) * uint64(h.MoELayers())
	s.metrics.step(len(items), rows, s.cfg.Model.Experts().Stats().Fetches-before, uses)
}

// session starts a job's session: from the saved prefix that spares the
// most of its prompt, or empty. It returns how many prompt tokens the
// session already holds.
func (s *Server) session(j *job) (*engine.Session, int, error) {
	ctxLen := len(j.prompt) + j.p.maxTokens
	var sess *engine.Session
	var keep int
	var err error
	if p, n := s.prefixes.find(j.prompt); n > 0 {
		sess, err = s.cfg.Model.ResumeSession(p, n, ctxLen)
		keep = n
	} else {
		sess, err = s.cfg.Model.NewSession(ctxLen)
	}
	if err == nil {
		// The whole request's cache at once: exactly what it may hold.
		if err = sess.Reserve(ctxLen); err != nil {
			sess.Close()
		}
	}
	return sess, keep, err
}

// keepPrefix saves the state of a sequence whose prompt was just
// evaluated, for later requests that begin the same way.
func (s *Server) keepPrefix(q *sequence) {
	if s.cfg.PrefixCacheBytes == 0 {
		return
	}
	if p, err := q.sess.Prefix(q.j.prompt); err == nil {
		s.prefixes.add(p)
	}
}

// step lists each live sequence's rows for the next engine step: its last
// token, or the next chunk of its prompt, decoding rows first, prompt
// chunks while the step has room (the model's batch size). A decoding
// sequence whose events fill its buffer but for the room its final event
// needs is paused: left out until its client reads.
func (s *Server) step(live []*sequence) ([]engine.BatchItem, []int) {
	var items []engine.BatchItem
	var who []int
	rows, paused, pauses := 0, 0, 0
	for i, q := range live {
		if q.fed < len(q.j.prompt) {
			continue
		}
		if len(q.j.events) >= cap(q.j.events)-1 {
			if !q.paused {
				q.paused = true
				pauses++
			}
			paused++
			continue
		}
		q.paused = false
		items = append(items, engine.BatchItem{Session: q.sess, Tokens: q.tokens[len(q.tokens)-1:]})
		who = append(who, i)
		rows++
	}
	for i, q := range live {
		if n := min(len(q.j.prompt)-q.fed, s.cfg.PrefillChunk, s.cfg.Model.BatchSize()-rows); q.fed < len(q.j.prompt) && n > 0 {
			items = append(items, engine.BatchItem{Session: q.sess, Tokens: q.j.prompt[q.fed : q.fed+n]})
			who = append(who, i)
			q.fed += n
			rows += n
		}
	}
	s.metrics.setPaused(paused, pauses)
	return items, who
}

// emit samples the sequence's next token from logits and sends its text;
// it returns the final event when the sequence is done (an end of
// generation, a stop sequence, or max_tokens), or with the error when
// no token can be drawn from the logits.
func (s *Server) emit(q *sequence, logits []float32) (event, bool) {
	p := q.j.p
	id, err := q.sampler.Next(logits)
	if err != nil {
		return event{done: true, err: err}, true
	}
	q.tokens = append(q.tokens, id)
	if s.tok.IsEOG(id) {
		return event{done: true, finish: "stop", text: q.st.flush()}, true
	}
	info := tokenInfo{id: id}
	if p.logprobs >= 0 {
		lp := engine.LogSoftmax(logits)
		info.logprob = lp[id]
		info.top = topN(lp, p.logprobs)
	}
	text, stopped := q.st.push(id)
	// There is room: step only runs a sequence with two free places in
	// its buffer, one for this event and one for its final one, and only
	// the handler takes events out meanwhile. The worker never waits on a
	// client.
	q.j.events <- event{text: text, tokens: []tokenInfo{info}}
	switch {
	case stopped:
		return event{done: true, finish: "stop"}, true
	case len(q.tokens) == p.maxTokens:
		return event{done: true, finish: "length", text: q.st.flush()}, true
	}
	return event{}, false
}

// end delivers a sequence's final event, with its usage, and records its
// telemetry. The end is always delivered (its buffer keeps room for it):
// the handler waits for it.
func (s *Server) end(q *sequence, ev event) {
	ev.done = true
	n := len(q.tokens)
	ev.usage = Usage{PromptTokens: len(q.j.prompt), CompletionTokens: n, TotalTokens: len(q.j.prompt) + n}
	if s.cfg.PrefixCacheBytes > 0 {
		ev.usage.PromptTokensDetails = &PromptTokensDetails{CachedTokens: q.cached}
	}
	tel := engine.Telemetry{PromptTokens: len(q.j.prompt), GeneratedTokens: n}
	if !q.first.IsZero() {
		tel.PrefillSeconds = q.first.Sub(q.start).Seconds()
		tel.DecodeSeconds = time.Since(q.first).Seconds()
		tel.PrefillTokPerS = float64(len(q.j.prompt)) / max(tel.PrefillSeconds, 1e-9)
		if n > 1 {
			tel.DecodeTokPerS = float64(n-1) / max(tel.DecodeSeconds, 1e-9)
		}
	}
	s.metrics.generated(tel, s.cfg.Model.Experts().Stats())
	s.queue.left()
	// Its state lives outside the Go heap: freed now, not at some later
	// collection.
	q.sess.Close()
	q.j.events <- ev
}
