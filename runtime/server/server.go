// Package server is gguftool's OpenAI-compatible HTTP server over the
// engine: /v1/completions and /v1/chat/completions (streamed as
// server-sent events or not), /v1/models, /health and /metrics. Up to
// Config.Parallel requests generate together, one engine step for all of
// them (continuous batching), each getting the tokens it gets alone;
// recent prompts' states are kept for requests that begin the same way.
// Requests take a place before their bodies are read, at most queue +
// parallel of them (past the bound: 429 with Retry-After), wait admitted
// round-robin across API keys, each under a timeout and cancelled when its
// client goes away (a waiting request leaves the queue at once, freeing
// its place); shutdown finishes or cancels what is in flight. A client
// that stops reading its stream pauses its own request, never the batch;
// connections are capped, and timed out while they send, write or idle.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gguftool/gguftool/chattmpl"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/tokenizer"
)

// Config configures a server.
type Config struct {
	Model     *engine.Model
	ModelName string // what responses and /v1/models call the model
	// QueueSize is how many requests may wait while Parallel run.
	QueueSize int
	// Parallel is how many sequences decode together, one engine step for
	// all of them (0 means 1). PrefillChunk is the most prompt tokens a
	// sequence feeds per step (0 means the model's batch size).
	Parallel, PrefillChunk int
	// PrefixCacheBytes bounds the states of recent prompts kept for
	// requests that begin the same way (0: none kept).
	PrefixCacheBytes int64
	// RequestTimeout bounds a request from arrival to its last token.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// MaxTokens bounds max_tokens; DefaultMaxTokens is used when a request
	// does not say.
	MaxTokens, DefaultMaxTokens int
	// Context bounds prompt + max_tokens (at most the model's context).
	Context int
	// APIKey, when set, is required as "Authorization: Bearer KEY" (the
	// scheme in any case). It may list several keys, separated by commas
	// and trimmed of the spaces around them (ParseAPIKeys): any of them is
	// accepted, and waiting requests are admitted round-robin across keys,
	// so one key's burst cannot starve another's requests. A list that
	// names no key is refused. Without a key, admission is first come,
	// first served, whatever Authorization a request carries.
	APIKey string
	// ReadHeaderTimeout bounds reading a request's headers, ReadTimeout
	// its body. WriteTimeout bounds each write of a response, a stream's
	// every event included, rather than the whole response: a long stream
	// lives as long as its client reads, and one that stops reading is cut
	// WriteTimeout after its buffers filled. IdleTimeout bounds a
	// keep-alive connection between requests. MaxConnections bounds the
	// open connections; one past it is answered 503 and closed. Zero means
	// the Default… value of each.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxConnections                                            int
	// ChatTemplate, when set, is the Jinja chat template chat requests
	// are rendered with instead of the GGUF's; ChatTemplateName names it
	// (in errors, and as "file:NAME" in the X-Gguftool-Chat-Template
	// header).
	ChatTemplate, ChatTemplateName string
	Logger                         *slog.Logger
}

// The connection settings a zero Config field stands for.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConnections    = 512
)

// streamBuffer is how many events a request's buffer holds between the
// worker and its handler. A request whose client is not reading fills it
// and is paused until the client reads; the last place is kept for the
// final event, so the worker never waits to deliver one.
const streamBuffer = 64

// Server serves one model.
type Server struct {
	cfg   Config
	tok   *tokenizer.Tokenizer
	tmpl  chatTemplate
	lim   limits
	keys  apiKeys // Config.APIKey's keys
	queue *jobQueue
	// gate bounds the bytes of bodies being decoded and tokenized at once
	// (Config.MaxBodyBytes: one of the largest, or many small ones).
	gate *byteGate
	// wake is signalled when the worker, every sequence paused, may have
	// work: a client read, left or timed out, or a job arrived.
	wake     chan struct{}
	prefixes *prefixCache // the worker's
	metrics  *metrics
	created  int64

	base   context.Context
	cancel context.CancelFunc
	worker sync.WaitGroup
}

// The stages a cancelled request is counted in.
const (
	stageQueued  = "queued"  // waiting for the model
	stageRunning = "running" // generating
)

// statusClientClosed is the status a request whose client went away
// before its answer is logged and counted with (nginx's 499): no one
// reads it, and it is not the server's failure, as a 5xx would say.
const statusClientClosed = 499

// New checks the configuration and prepares the server.
func New(cfg Config) (*Server, error) {
	m := cfg.Model
	tok, err := tokenizer.New(m.Meta)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.QueueSize < 0:
		return nil, fmt.Errorf("server: QueueSize %d: must be at least 0", cfg.QueueSize)
	case cfg.Parallel < 0 || cfg.Parallel > m.BatchSize():
		return nil, fmt.Errorf("server: Parallel %d: must be in 0..%d (the model's batch size)", cfg.Parallel, m.BatchSize())
	case cfg.PrefillChunk < 0:
		return nil, fmt.Errorf("server: PrefillChunk %d: must be at least 0", cfg.PrefillChunk)
	case cfg.PrefixCacheBytes < 0:
		return nil, fmt.Errorf("server: PrefixCacheBytes %d: must be at least 0", cfg.PrefixCacheBytes)
	case cfg.MaxTokens < 1:
		return nil, fmt.Errorf("server: MaxTokens %d: must be at least 1", cfg.MaxTokens)
	case cfg.DefaultMaxTokens < 1 || cfg.DefaultMaxTokens > cfg.MaxTokens:
		return nil, fmt.Errorf("server: DefaultMaxTokens %d: must be in 1..MaxTokens (%d)", cfg.DefaultMaxTokens, cfg.MaxTokens)
	case cfg.Context < 2 || cfg.Context > m.Hparams.Context:
		return nil, fmt.Errorf("server: Context %d: must be in 2..%d, the model's context", cfg.Context, m.Hparams.Context)
	case cfg.DefaultMaxTokens >= cfg.Context:
		// Every request without max_tokens would be refused as too long.
		return nil, fmt.Errorf("server: DefaultMaxTokens %d: must be below Context (%d), leaving room for a prompt", cfg.DefaultMaxTokens, cfg.Context)
	case cfg.MaxBodyBytes < 1024:
		return nil, fmt.Errorf("server: MaxBodyBytes %d: must be at least 1024", cfg.MaxBodyBytes)
	case cfg.RequestTimeout <= 0:
		return nil, fmt.Errorf("server: RequestTimeout %s: must be positive", cfg.RequestTimeout)
	case cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0:
		return nil, fmt.Errorf("server: timeouts must not be negative (ReadHeaderTimeout %s, ReadTimeout %s, WriteTimeout %s, IdleTimeout %s)",
			cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout)
	case cfg.MaxConnections < 0:
		return nil, fmt.Errorf("server: MaxConnections %d: must not be negative", cfg.MaxConnections)
	}
	keys, err := ParseAPIKeys(cfg.APIKey)
	if err != nil {
		return nil, fmt.Errorf("server: APIKey: %w", err)
	}
	cfg.ReadHeaderTimeout = orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxConnections = orDefault(cfg.MaxConnections, DefaultMaxConnections)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 1
	}
	if cfg.PrefillChunk == 0 {
		cfg.PrefillChunk = m.BatchSize()
	}
	tmpl, err := pickTemplate(m.Meta, tok, cfg.ChatTemplate, cfg.ChatTemplateName)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tok: tok, tmpl: tmpl,
		lim:     limits{maxTokens: cfg.MaxTokens, defaultMax: cfg.DefaultMaxTokens, maxStop: 4, maxStopBytes: 256},
		metrics: newMetrics(cfg.QueueSize), created: time.Now().Unix(),
		keys: newAPIKeys(keys), gate: newByteGate(cfg.MaxBodyBytes), wake: make(chan struct{}, 1)}
	s.queue = newJobQueue(cfg.QueueSize, cfg.Parallel, s.metrics, s.nudge)
	s.prefixes = newPrefixCache(cfg.PrefixCacheBytes)
	s.metrics.experts = m.Experts().Stats()
	s.base, s.cancel = context.WithCancel(context.Background())
	s.worker.Add(1)
	go s.work()
	return s, nil
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// QueueStats is what the queue bound did so far.
type QueueStats struct {
	Capacity int // requests that may wait (Config.QueueSize)
	// Depth is how many requests hold a place and are not running: being
	// read or tokenized, or waiting for the model.
	Depth int
	// Rejected counts the 429s (queue_full). RejectedWithRoom counts those
	// of them issued while fewer than Capacity requests waited: a queue
	// that refuses below its bound, which a correct server never does.
	Rejected, RejectedWithRoom uint64
	// LastRejectionDepth is how many requests waited when the last 429
	// was issued; -1 before any.
	LastRejectionDepth int
}

// QueueStats returns the queue's counters.
func (s *Server) QueueStats() QueueStats {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	m := s.metrics
	return QueueStats{Capacity: m.queueCap, Depth: m.queued, Rejected: m.rejected["queue_full"],
		RejectedWithRoom: m.rejectedWithRoom, LastRejectionDepth: m.lastRejectionDepth}
}

// ChatTemplate names the template chat requests are rendered with.
func (s *Server) ChatTemplate() string { return s.tmpl.Name }

// Close cancels whatever is running or queued and stops the worker. The
// model stays open (its owner closes it).
func (s *Server) Close() {
	s.cancel()
	s.queue.close()
	s.worker.Wait()
}

// Serve serves on ln until ctx is cancelled, then shuts down: it stops
// accepting, lets requests in flight finish for up to grace, then cancels
// them, and returns once every handler and the worker have stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	// No http.Server ReadTimeout or WriteTimeout: those bound a whole
	// request and response, and a stream may rightly last minutes. The
	// body's read deadline and each write's are set as they happen
	// (readBody, statusWriter).
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		BaseContext: func(net.Listener) context.Context { return s.base }}
	limited := newConnLimit(ln, s.cfg.MaxConnections, s.metrics)
	defer limited.wait()
	ln = limited
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	s.cfg.Logger.Info("shutting down", "grace", grace.String())
	sctx, stop := context.WithTimeout(context.Background(), grace)
	defer stop()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.cfg.Logger.Warn("grace period over: cancelling requests in flight")
		s.cancel()
		err = hs.Close()
	}
	s.Close()
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", s.wrap("completions", s.completions))
	mux.HandleFunc("/v1/chat/completions", s.wrap("chat", s.chat))
	mux.HandleFunc("/v1/models", s.wrap("models", s.models))
	mux.HandleFunc("/health", s.wrap("health", s.health))
	mux.HandleFunc("/metrics", s.wrap("metrics", func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.metrics.write(w)
	}))
	mux.HandleFunc("/", s.wrap("other", func(w http.ResponseWriter, r *http.Request, rl *reqLog) {
		writeError(w, rl, &APIError{Status: 404, Type: "invalid_request_error", Message: "no such endpoint: " + r.URL.Path})
	}))
	return mux
}

// reqLog collects what the request's log line says.
type reqLog struct {
	id     string
	status int
	attrs  []any
	// lane is the request's admission lane: the API key it matched.
	lane string
	// clientClosed: the client went away before the answer was complete;
	// the request is logged and counted as statusClientClosed whatever
	// was written.
	clientClosed bool
}

// statusWriter remembers the status code and gives every write its own
// deadline, WriteTimeout from when it starts: a client that stops
// reading makes the write under way fail once that passes, however long
// the response has run.
type statusWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	status  int
}

// deadline sets the next write's deadline. A writer without deadlines
// (httptest's recorder) has nothing to cut.
func (w *statusWriter) deadline() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.deadline()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.deadline()
	return w.ResponseWriter.Write(b)
}

// FlushError flushes, reporting a client that does not take the bytes
// (http.ResponseController.Flush calls it).
func (w *statusWriter) FlushError() error {
	w.deadline()
	return w.rc.Flush()
}

func (w *statusWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) wrap(endpoint string, h func(http.ResponseWriter, *http.Request, *reqLog)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rl := &reqLog{id: newID()}
		w := &statusWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), timeout: s.cfg.WriteTimeout}
		w.Header().Set("X-Request-Id", rl.id)
		defer func() {
			if p := recover(); p != nil {
				s.cfg.Logger.Error("panic", "id", rl.id, "panic", fmt.Sprint(p))
				if w.status == 0 {
					writeError(w, rl, &APIError{Status: 500, Type: "server_error", Message: "internal error"})
				}
			}
			status := w.status
			switch {
			case rl.clientClosed:
				status = statusClientClosed
			case status == 0:
				status = http.StatusOK
			}
			s.metrics.observe(endpoint, status, time.Since(start))
			attrs := append([]any{"id", rl.id, "method", r.Method, "path", r.URL.Path, "status", status,
				"duration_ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr}, rl.attrs...)
			s.cfg.Logger.Info("request", attrs...)
		}()
		if endpoint != "health" {
			lane, ok := s.keys.authorize(r)
			if !ok {
				// Refused before a byte of the body is read: an
				// unauthenticated client is not waited for.
				refuseUnread(w, rl, &APIError{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
					Message: "missing or wrong API key (Authorization: Bearer …)"})
				return
			}
			rl.lane = lane
		}
		h(w, r, rl)
	}
}

// refuseUnread answers a request whose body has not been read, and
// closes the connection after it.
func refuseUnread(w http.ResponseWriter, rl *reqLog, e *APIError) {
	closeUnread(w)
	writeError(w, rl, e)
}

// closeUnread makes the connection close after the answer without reading
// what is left of the request body. Otherwise net/http would read the
// rest, to keep the connection, and a client that sends part of a body
// would hold the connection as long as it liked: the header keeps the
// connection from being reused, and the read deadline of now makes that
// read end at once once the answer is written.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeError(w http.ResponseWriter, rl *reqLog, e *APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	rl.attrs = append(rl.attrs, "error", e.Message)
	json.NewEncoder(w).Encode(map[string]*APIError{"error": e})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	s.metrics.mu.Lock()
	queued := s.metrics.queued
	s.metrics.mu.Unlock()
	writeJSON(w, map[string]any{"status": "ok", "model": s.cfg.ModelName, "queued": queued, "queue_capacity": s.cfg.QueueSize})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	if r.Method != http.MethodGet {
		writeError(w, rl, &APIError{Status: 405, Type: "invalid_request_error", Message: "use GET"})
		return
	}
	writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.cfg.ModelName, "object": "model", "created": s.created, "owned_by": "gguftool"}}})
}

// readBody reads a POST body within the size limit and ReadTimeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *APIError) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
	// Any Content-Type is accepted (curl -d sends a form type), as
	// llama-server does: the body must be a JSON object whatever it says.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		// The deadline is the body's alone: net/http now reads on in the
		// background to notice a client that goes away, and a deadline
		// passing there would cancel the request as if it had.
		_ = rc.SetReadDeadline(time.Time{})
		return body, nil
	}
	var mb *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mb):
		closeUnread(w)
		return nil, &APIError{Status: 413, Type: "invalid_request_error", Message: fmt.Sprintf("request body over %d bytes", mb.Limit)}
	case errors.As(err, &ne) && ne.Timeout():
		closeUnread(w)
		return nil, &APIError{Status: 408, Type: "invalid_request_error", Code: "request_timeout",
			Message: fmt.Sprintf("the request body did not arrive within %s", s.cfg.ReadTimeout)}
	}
	closeUnread(w)
	return nil, badRequest("", "reading the body: %v", err)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	s.serveGeneration(w, r, rl, false)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	s.serveGeneration(w, r, rl, true)
}

// serveGeneration answers a completion or chat request. The request takes
// a place before its body is read and holds it until its answer is
// written, so that at most QueueSize + Parallel requests cost memory at
// once; the body is decoded and tokenized under the byte gate.
func (s *Server) serveGeneration(w http.ResponseWriter, r *http.Request, rl *reqLog, chat bool) {
	if r.Method != http.MethodPost {
		refuseUnread(w, rl, &APIError{Status: 405, Type: "invalid_request_error", Message: "use POST"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	switch ok, closed := s.queue.reserve(); {
	case closed:
		refuseUnread(w, rl, &APIError{Status: 503, Type: "server_error", Message: "the server is shutting down"})
		return
	case !ok:
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter()))
		refuseUnread(w, rl, &APIError{Status: 429, Type: "rate_limit_exceeded", Code: "queue_full",
			Message: fmt.Sprintf("%d requests are already waiting; retry later", s.cfg.QueueSize)})
		return
	}
	defer s.queue.release()
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	prompt, p, err := s.prepare(ctx, w, rl, body, chat)
	var bad *APIError
	switch {
	case errors.As(err, &bad):
		writeError(w, rl, bad)
		return
	case err != nil:
		// Its timeout passed, or its client left, while it waited for the gate.
		out := &responder{s: s, w: w, rl: rl}
		out.finish(event{done: true, err: err, queued: true})
		return
	}
	s.generate(ctx, cancel, w, rl, prompt, p, chat)
}

// prepare decodes a request's body and tokenizes its prompt, under the
// byte gate; the error is an *APIError, or ctx's when ctx ended first.
func (s *Server) prepare(ctx context.Context, w http.ResponseWriter, rl *reqLog, body []byte, chat bool) ([]int, params, error) {
	n := int64(len(body))
	if err := s.gate.acquire(ctx, n); err != nil {
		return nil, params{}, err
	}
	defer s.gate.release(n)
	var prompt []int
	var p params
	var aerr *APIError
	if chat {
		prompt, p, aerr = s.chatPrompt(w, rl, body)
	} else {
		prompt, p, aerr = s.completionPrompt(body)
	}
	if aerr != nil {
		return nil, p, aerr
	}
	return prompt, p, nil
}

// completionPrompt decodes a completion request and tokenizes its prompt.
func (s *Server) completionPrompt(body []byte) ([]int, params, *APIError) {
	var req CompletionRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		return nil, params{}, aerr
	}
	p, aerr := s.lim.params(req.MaxTokens, req.Temperature, req.TopP, req.TopK, req.Seed, req.Stop, req.N, req.Stream)
	if aerr != nil {
		return nil, p, aerr
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 20 {
			return nil, p, badRequest("logprobs", "logprobs must be in 0..20")
		}
		p.logprobs = *req.Logprobs
	}
	if req.Echo {
		return nil, p, badRequest("echo", "echo is not supported")
	}
	prompt, aerr := s.prompt(req.Prompt)
	return prompt, p, aerr
}

// prompt tokenizes a completion prompt: a string, an array of one string,
// or an array of token ids.
func (s *Server) prompt(raw json.RawMessage) ([]int, *APIError) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return s.tok.Encode(text, true, true), nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 {
			return nil, badRequest("prompt", "only one prompt per request")
		}
		return s.tok.Encode(texts[0], true, true), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil {
		for _, id := range ids {
			if id < 0 || id >= s.tok.Len() {
				return nil, badRequest("prompt", "token id %d is outside the vocabulary of %d", id, s.tok.Len())
			}
		}
		return ids, nil
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of one string, or an array of token ids")
}

// chatPrompt decodes a chat request, renders its messages with the chat
// template and tokenizes the result.
func (s *Server) chatPrompt(w http.ResponseWriter, rl *reqLog, body []byte) ([]int, params, *APIError) {
	var req ChatRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		return nil, params{}, aerr
	}
	maxTok := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTok = req.MaxCompletionTokens
	}
	p, aerr := s.lim.params(maxTok, req.Temperature, req.TopP, req.TopK, req.Seed, req.Stop, req.N, req.Stream)
	if aerr != nil {
		return nil, p, aerr
	}
	if req.Logprobs {
		p.logprobs = 0
		if req.TopLogprobs != nil {
			if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
				return nil, p, badRequest("top_logprobs", "top_logprobs must be in 0..20")
			}
			p.logprobs = *req.TopLogprobs
		}
	}
	if len(req.Messages) == 0 {
		return nil, p, badRequest("messages", "messages must not be empty")
	}
	msgs, aerr := chatMessages(req.Messages)
	if aerr != nil {
		return nil, p, aerr
	}
	opts, aerr := templateOptions(&req)
	if aerr != nil {
		return nil, p, aerr
	}
	w.Header().Set("X-Gguftool-Chat-Template", s.tmpl.Name)
	rl.attrs = append(rl.attrs, "chat_template", s.tmpl.Name)
	text, err := s.tmpl.Render(msgs, opts)
	if err != nil {
		return nil, p, badRequest("messages", "%v", err)
	}
	prompt := s.tok.Encode(text, true, true)
	// A template that writes bos_token itself, with a vocabulary that adds
	// BOS too, would start the prompt with two; llama.cpp's server keeps
	// one.
	if bos, ok := s.tok.BOS(); ok && len(prompt) > 1 && prompt[0] == bos && prompt[1] == bos {
		prompt = prompt[1:]
	}
	p.chat = &chatGen{split: s.tmpl.NewSplitter(text), special: s.tmpl.Format() != chattmpl.FormatNone}
	return prompt, p, nil
}

// chatMessages checks the request's messages and converts them for the
// template: developer is system, content parts are joined, an assistant
// turn's reasoning_content is its reasoning.
func chatMessages(in []ChatMessage) ([]chattmpl.Message, *APIError) {
	msgs := make([]chattmpl.Message, len(in))
	for i, m := range in {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "role %q is not one of system, developer, user, assistant", m.Role)
		}
		text, aerr := chatContent(m.Content, i)
		if aerr != nil {
			return nil, aerr
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		msgs[i] = chattmpl.Message{Role: role, Content: text}
		if m.ReasoningContent != nil {
			if role != "assistant" {
				return nil, badRequest(fmt.Sprintf("messages[%d].reasoning_content", i), "reasoning_content is for assistant messages only")
			}
			msgs[i].Reasoning = m.ReasoningContent
		}
	}
	return msgs, nil
}

// job is one generation waiting for, or running on, the model.
type job struct {
	ctx     context.Context
	tenant  string // the request's admission lane: round-robin across them
	arrived time.Time
	prompt  []int
	p       params
	// events carries the generation to the handler: streamBuffer events
	// at most, the worker pausing the job rather than waiting on a full
	// buffer.
	events chan event
}

// event is a piece of a generation: new text, or the end.
type event struct {
	text   string
	tokens []tokenInfo
	done   bool
	finish string
	usage  Usage
	err    error
	// queued: the job ended (on err) without reaching the model.
	queued bool
}

type tokenInfo struct {
	id      int
	logprob float64
	top     [][2]float64 // (id, log p), best first
}

// generate queues a job for the prompt and writes what the worker sends
// for it. cancel ends ctx, the job's context: the handler cancels when its
// client does not take a write.
func (s *Server) generate(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, rl *reqLog,
	prompt []int, p params, chat bool) {
	rl.attrs = append(rl.attrs, "prompt_tokens", len(prompt), "max_tokens", p.maxTokens, "stream", p.stream)
	if len(prompt) == 0 {
		writeError(w, rl, badRequest("prompt", "the prompt is empty"))
		return
	}
	if len(prompt)+p.maxTokens > s.cfg.Context {
		writeError(w, rl, &APIError{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded",
			Message: fmt.Sprintf("%d prompt tokens + max_tokens %d exceed the context of %d", len(prompt), p.maxTokens, s.cfg.Context)})
		return
	}
	j := &job{ctx: ctx, tenant: rl.lane, arrived: time.Now(), prompt: prompt, p: p, events: make(chan event, streamBuffer)}
	if !s.queue.push(j) {
		writeError(w, rl, &APIError{Status: 503, Type: "server_error", Message: "the server is shutting down"})
		return
	}
	// A paused job's end (its client gone, its timeout passed) must reach
	// a worker that may be waiting with every job paused.
	defer context.AfterFunc(ctx, s.nudge)()
	s.metrics.addInFlight(1)
	defer s.metrics.addInFlight(-1)
	id := "cmpl-" + rl.id
	object := "text_completion"
	if chat {
		id, object = "chatcmpl-"+rl.id, "chat.completion"
	}
	out := &responder{s: s, w: w, rl: rl, id: id, object: object, chat: chat, p: p}
	if p.chat != nil && s.tmpl.Format() != chattmpl.FormatNone {
		out.split = p.chat.split
	}
	for {
		var ev event
		select {
		case ev = <-j.events:
			s.nudge() // room in its buffer: a paused job may go on
		case <-ctx.Done():
			if s.queue.remove(j) {
				// It never reached the model; its place is free now.
				ev = event{done: true, err: ctx.Err(), queued: true}
				break
			}
			ev = s.drain(j)
		}
		if ev.done {
			out.finish(ev)
			return
		}
		if err := out.piece(ev); err != nil {
			// The client did not take the write within WriteTimeout, or
			// is gone: end the job as if the client had left.
			s.metrics.writeFailed()
			rl.attrs = append(rl.attrs, "write_error", err.Error())
			cancel()
			out.finish(s.drain(j))
			return
		}
	}
}

// drain waits for the end of a job the worker has, which it sends once it
// notices the job's context ended, so the response says why.
func (s *Server) drain(j *job) event {
	ev := <-j.events
	for !ev.done {
		ev = <-j.events
	}
	return ev
}

// retryAfter estimates the seconds until a place frees.
func (s *Server) retryAfter() int {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	if s.metrics.decodeTPS <= 0 {
		return 1
	}
	return max(1, int(float64(s.lim.defaultMax)/s.metrics.decodeTPS))
}

// stopped says why a job ended on err, which came from its context,
// and counts it: a request past its timeout while queued is rejected as
// timeout_in_queue, one whose client went away is cancelled at its stage.
func (s *Server) stopped(ev event) *APIError {
	switch {
	case errors.Is(ev.err, context.DeadlineExceeded):
		if ev.queued {
			s.metrics.reject("timeout_in_queue")
		}
		return &APIError{Status: 504, Type: "timeout", Message: fmt.Sprintf("the request did not finish within %s", s.cfg.RequestTimeout)}
	case s.base.Err() != nil:
		return &APIError{Status: 503, Type: "server_error", Message: "the request was cancelled: the server is shutting down"}
	}
	stage := stageRunning
	if ev.queued {
		stage = stageQueued
	}
	s.metrics.cancel(stage)
	return &APIError{Status: statusClientClosed, Type: "cancelled", Message: "the client went away while the request was " + stage}
}

func topN(lp []float64, n int) [][2]float64 {
	if n <= 0 {
		return nil
	}
	top := make([][2]float64, 0, n+1)
	for id, v := range lp {
		if len(top) < n || v > top[len(top)-1][1] {
			i := len(top)
			for i > 0 && top[i-1][1] < v {
				i--
			}
			top = append(top, [2]float64{})
			copy(top[i+1:], top[i:])
			top[i] = [2]float64{float64(id), v}
			if len(top) > n {
				top = top[:n]
			}
		}
	}
	return top
}
