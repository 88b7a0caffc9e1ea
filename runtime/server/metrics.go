package server

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gguftool/gguftool/runtime/engine"
)

// metrics are the counters /metrics exposes in the Prometheus text
// format (version 0.0.4), written by hand: a few counters, gauges and one
// histogram need no client library.
type metrics struct {
	mu         sync.Mutex
	requests   map[[2]string]uint64 // (endpoint, code)
	durations  map[string]*histogram
	promptTok  uint64
	complTok   uint64
	genSeconds float64
	prefillTPS float64
	decodeTPS  float64
	rejected   map[string]uint64
	// cancelled counts the requests whose client went away, by the stage
	// they were in: "queued" or "running".
	cancelled  map[string]uint64
	inFlight   int
	queued     int // requests holding a place and not running (jobQueue), cancelled ones not included
	queueCap   int
	experts    engine.SourceStats
	cacheSlots int
	// rejectedWithRoom and lastRejectionDepth record the depth at each
	// queue_full rejection (see Server.QueueStats).
	rejectedWithRoom   uint64
	lastRejectionDepth int
	// Continuous batching: engine steps, the rows and sequences they
	// evaluated, the experts they fetched against the (row, expert) uses
	// routed (uses − fetches: reads batching spared), prefix-cache reuse,
	// and the waits before admission and before the first token.
	steps, stepRows, expertUses, stepFetches uint64
	lastBatch                                int
	prefixHits, prefixTokens                 uint64
	queueWait, firstToken                    histogram
	// Slow clients and connections: streams paused in the last step
	// (their clients not reading) and pauses so far, responses cut on a
	// write the client did not take, connections open and refused past
	// the cap.
	paused                      int
	pauses, writeFailures       uint64
	connsOpen                   int
	connsAccepted, connsRefused uint64
}

var latencyBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

type histogram struct {
	counts []uint64 // per bucket, then +Inf
	sum    float64
	n      uint64
}

func newMetrics(queueCap int) *metrics {
	return &metrics{requests: map[[2]string]uint64{}, durations: map[string]*histogram{}, rejected: map[string]uint64{},
		cancelled: map[string]uint64{}, queueCap: queueCap, lastRejectionDepth: -1,
		queueWait: newHistogram(), firstToken: newHistogram()}
}

func newHistogram() histogram { return histogram{counts: make([]uint64, len(latencyBuckets)+1)} }

func (h *histogram) add(s float64) {
	h.counts[sort.SearchFloat64s(latencyBuckets, s)]++
	h.sum += s
	h.n++
}

// step records one engine step of the batch.
func (m *metrics) step(seqs, rows int, fetches, uses uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps++
	m.stepRows += uint64(rows)
	m.lastBatch = seqs
	m.stepFetches += fetches
	m.expertUses += uses
}

// setPaused records the streams paused in a step, and how many of them
// were newly paused.
func (m *metrics) setPaused(paused, newly int) {
	m.mu.Lock()
	m.paused = paused
	m.pauses += uint64(newly)
	m.mu.Unlock()
}

// writeFailed counts a response cut because its client did not take a
// write.
func (m *metrics) writeFailed() {
	m.mu.Lock()
	m.writeFailures++
	m.mu.Unlock()
}

// connection records a connection opened (delta 1), closed (−1) or
// refused past the cap.
func (m *metrics) connection(delta int, refused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connsOpen += delta
	switch {
	case refused:
		m.connsRefused++
	case delta > 0:
		m.connsAccepted++
	}
}

// admitted records a request's wait in the queue and its prefix reuse.
func (m *metrics) admitted(wait time.Duration, cached int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queueWait.add(wait.Seconds())
	if cached > 0 {
		m.prefixHits++
		m.prefixTokens += uint64(cached)
	}
}

// firstTokenAfter records a request's time to its first token.
func (m *metrics) firstTokenAfter(d time.Duration) {
	m.mu.Lock()
	m.firstToken.add(d.Seconds())
	m.mu.Unlock()
}

func (m *metrics) observe(endpoint string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{endpoint, fmt.Sprint(code)}]++
	h := m.durations[endpoint]
	if h == nil {
		nh := newHistogram()
		h = &nh
		m.durations[endpoint] = h
	}
	h.add(d.Seconds())
}

func (m *metrics) generated(t engine.Telemetry, experts engine.SourceStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptTok += uint64(t.PromptTokens)
	m.complTok += uint64(t.GeneratedTokens)
	m.genSeconds += t.PrefillSeconds + t.DecodeSeconds
	if t.PrefillTokPerS > 0 {
		m.prefillTPS = t.PrefillTokPerS
	}
	if t.DecodeTokPerS > 0 {
		m.decodeTPS = t.DecodeTokPerS
	}
	m.experts = experts
}

func (m *metrics) reject(reason string) {
	m.mu.Lock()
	m.rejected[reason]++
	m.mu.Unlock()
}

// rejectQueueFull counts a 429 issued while depth requests waited.
func (m *metrics) rejectQueueFull(depth int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected["queue_full"]++
	m.lastRejectionDepth = depth
	if depth < m.queueCap {
		m.rejectedWithRoom++
	}
}

// cancel counts a request whose client went away while it was at stage.
func (m *metrics) cancel(stage string) {
	m.mu.Lock()
	m.cancelled[stage]++
	m.mu.Unlock()
}

func (m *metrics) setQueued(depth int) {
	m.mu.Lock()
	m.queued = depth
	m.mu.Unlock()
}

func (m *metrics) addInFlight(n int) {
	m.mu.Lock()
	m.inFlight += n
	m.mu.Unlock()
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("gguftool_requests_total", "counter", "HTTP requests by endpoint and status code.")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(&b, "gguftool_requests_total{endpoint=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}
	metric("gguftool_request_duration_seconds", "histogram", "Request latency, from arrival to the last byte.")
	eps := make([]string, 0, len(m.durations))
	for e := range m.durations {
		eps = append(eps, e)
	}
	sort.Strings(eps)
	for _, e := range eps {
		m.durations[e].write(&b, "gguftool_request_duration_seconds", fmt.Sprintf("endpoint=%q,", e))
	}
	metric("gguftool_rejected_requests_total", "counter", "Requests turned away before running, by reason.")
	fmt.Fprintf(&b, "gguftool_rejected_requests_total{reason=\"queue_full\"} %d\n", m.rejected["queue_full"])
	fmt.Fprintf(&b, "gguftool_rejected_requests_total{reason=\"timeout_in_queue\"} %d\n", m.rejected["timeout_in_queue"])
	metric("gguftool_cancelled_requests_total", "counter", "Requests whose client went away before the answer, by stage: queued (left the queue at once) or running (generation stopped).")
	for _, stage := range []string{stageQueued, stageRunning} {
		fmt.Fprintf(&b, "gguftool_cancelled_requests_total{stage=%q} %d\n", stage, m.cancelled[stage])
	}
	metric("gguftool_queue_full_with_room_total", "counter", "Requests turned away as queue_full while fewer than the queue capacity waited (0 unless the bound is broken).")
	fmt.Fprintf(&b, "gguftool_queue_full_with_room_total %d\n", m.rejectedWithRoom)
	gauge := func(name, help string, v float64) {
		metric(name, "gauge", help)
		fmt.Fprintf(&b, "%s %g\n", name, v)
	}
	counter := func(name, help string, v float64) {
		metric(name, "counter", help)
		fmt.Fprintf(&b, "%s %g\n", name, v)
	}
	counter("gguftool_prompt_tokens_total", "Prompt tokens evaluated.", float64(m.promptTok))
	counter("gguftool_completion_tokens_total", "Tokens generated.", float64(m.complTok))
	counter("gguftool_generation_seconds_total", "Time spent evaluating prompts and generating.", m.genSeconds)
	gauge("gguftool_prefill_tokens_per_second", "Prompt tokens per second of the last request.", m.prefillTPS)
	gauge("gguftool_decode_tokens_per_second", "Generated tokens per second of the last request.", m.decodeTPS)
	gauge("gguftool_requests_in_flight", "Requests being served (queued or running).", float64(m.inFlight))
	gauge("gguftool_queue_depth", "Requests holding a place and not running: being read, tokenized, or waiting for the model.", float64(m.queued))
	gauge("gguftool_queue_capacity", "Requests that may wait before new ones get 429.", float64(m.queueCap))
	e := m.experts
	counter("gguftool_expert_fetches_total", "Routed experts the model asked for.", float64(e.Fetches))
	metric("gguftool_expert_served_total", "counter", "Routed experts by where they were served from.")
	if e.Source == "resident" {
		fmt.Fprintf(&b, "gguftool_expert_served_total{tier=\"resident\"} %d\n", e.Hits)
	} else {
		fmt.Fprintf(&b, "gguftool_expert_served_total{tier=\"ram\"} %d\n", e.Hits)
		fmt.Fprintf(&b, "gguftool_expert_served_total{tier=\"ssd\"} %d\n", e.Misses)
	}
	counter("gguftool_expert_cache_evictions_total", "Experts evicted from the RAM cache.", float64(e.Evictions))
	counter("gguftool_expert_bytes_read_total", "Bytes of expert records read from the pack.", float64(e.BytesRead))
	counter("gguftool_expert_io_wait_seconds_total", "Time blocked on expert reads with nothing to compute.", e.IOWait.Seconds())
	gauge("gguftool_expert_cache_slots", "Experts the RAM cache holds.", float64(e.CacheSlots))
	counter("gguftool_batch_steps_total", "Engine steps run (each evaluates every running request's next rows).", float64(m.steps))
	counter("gguftool_batch_rows_total", "Rows (tokens) the steps evaluated; ÷ steps is the tokens per step.", float64(m.stepRows))
	gauge("gguftool_batch_sequences", "Requests in the last step.", float64(m.lastBatch))
	counter("gguftool_batch_expert_uses_total", "Routed (row, expert) uses in the steps.", float64(m.expertUses))
	counter("gguftool_batch_expert_fetches_total", "Distinct experts the steps fetched: uses − fetches is what batching spared.", float64(m.stepFetches))
	counter("gguftool_prefix_cache_hits_total", "Requests started from a kept prompt state.", float64(m.prefixHits))
	counter("gguftool_prefix_cached_tokens_total", "Prompt tokens those requests did not evaluate.", float64(m.prefixTokens))
	gauge("gguftool_paused_streams", "Streams left out of the last step because their clients were not reading.", float64(m.paused))
	counter("gguftool_stream_pauses_total", "Times a stream was paused because its client was not reading.", float64(m.pauses))
	counter("gguftool_write_failures_total", "Responses cut because the client did not take a write within --write-timeout, or was gone.", float64(m.writeFailures))
	gauge("gguftool_connections_open", "Open client connections.", float64(m.connsOpen))
	counter("gguftool_connections_accepted_total", "Client connections accepted.", float64(m.connsAccepted))
	counter("gguftool_connections_refused_total", "Client connections refused (503) past --max-connections.", float64(m.connsRefused))
	metric("gguftool_queue_wait_seconds", "histogram", "Time from arrival to joining the batch.")
	m.queueWait.write(&b, "gguftool_queue_wait_seconds", "")
	metric("gguftool_time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.")
	m.firstToken.write(&b, "gguftool_time_to_first_token_seconds", "")
	io.WriteString(w, b.String())
}

// write prints the histogram's buckets, sum and count; labels, when not
// empty, ends with a comma.
func (h *histogram) write(b *strings.Builder, name, labels string) {
	var cum uint64
	for i, le := range latencyBuckets {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%sle=\"%g\"} %d\n", name, labels, le, cum)
	}
	fmt.Fprintf(b, "%s_bucket{%sle=\"+Inf\"} %d\n", name, labels, h.n)
	trim := strings.TrimSuffix(labels, ",")
	if trim != "" {
		trim = "{" + trim + "}"
	}
	fmt.Fprintf(b, "%s_sum%s %g\n", name, trim, h.sum)
	fmt.Fprintf(b, "%s_count%s %d\n", name, trim, h.n)
}
