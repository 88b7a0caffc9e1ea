// Package server is gguftool's OpenAI-compatible HTTP server over the
// engine: /v1/completions and /v1/chat/completions (streamed as
// server-sent events or not), /v1/models, /health and /metrics. Up to
// Config.Parallel requests generate together, one engine step for all of
// them (continuous batching), each getting the tokens it gets alone;
// recent prompts' states are kept for requests that begin the same way.
// Requests wait in a bounded queue (past the bound: 429 with Retry-After),
// admitted round-robin across API keys, each under a timeout and cancelled
// when its client goes away (a waiting request leaves the queue at once,
// freeing its slot); shutdown finishes or cancels what is in flight.
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
	"strings"
	"sync"
	"time"

	"github.com/gguftool/gguftool/chattmpl"
	"github.com/gguftool/gguftool/engine"
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
	// sequence feeds per step (0 means engine.MaxBatch).
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
	// APIKey, when set, is required as "Authorization: Bearer KEY". It may
	// list several keys, separated by commas: any of them is accepted,
	// and waiting requests are admitted round-robin across keys, so one
	// key's burst cannot starve another's requests.
	APIKey string
	// ChatTemplate, when set, is the Jinja chat template chat requests
	// are rendered with instead of the GGUF's; ChatTemplateName names it
	// (in errors, and as "file:NAME" in the X-Gguftool-Chat-Template
	// header).
	ChatTemplate, ChatTemplateName string
	Logger                         *slog.Logger
}

// Server serves one model.
type Server struct {
	cfg      Config
	tok      *tokenizer.Tokenizer
	tmpl     chatTemplate
	lim      limits
	keys     map[string]bool // Config.APIKey's keys
	queue    *jobQueue
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
	case cfg.Parallel < 0 || cfg.Parallel > engine.MaxBatch:
		return nil, fmt.Errorf("server: Parallel %d: must be in 0..%d", cfg.Parallel, engine.MaxBatch)
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
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 1
	}
	if cfg.PrefillChunk == 0 {
		cfg.PrefillChunk = engine.MaxBatch
	}
	tmpl, err := pickTemplate(m.Meta, tok, cfg.ChatTemplate, cfg.ChatTemplateName)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tok: tok, tmpl: tmpl,
		lim:     limits{maxTokens: cfg.MaxTokens, defaultMax: cfg.DefaultMaxTokens, maxStop: 4, maxStopBytes: 256},
		metrics: newMetrics(cfg.QueueSize), created: time.Now().Unix()}
	s.queue = newJobQueue(cfg.QueueSize, s.metrics)
	s.keys = map[string]bool{}
	for _, k := range strings.Split(cfg.APIKey, ",") {
		if k != "" {
			s.keys[k] = true
		}
	}
	s.prefixes = newPrefixCache(cfg.PrefixCacheBytes)
	s.metrics.experts = m.Experts().Stats()
	s.base, s.cancel = context.WithCancel(context.Background())
	s.worker.Add(1)
	go s.work()
	return s, nil
}

// QueueStats is what the queue bound did so far.
type QueueStats struct {
	Capacity int // requests that may wait (Config.QueueSize)
	Depth    int // requests waiting now
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
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.base }}
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
	// clientClosed: the client went away before the answer was complete;
	// the request is logged and counted as statusClientClosed whatever
	// was written.
	clientClosed bool
}

// statusWriter remembers the status code.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) wrap(endpoint string, h func(http.ResponseWriter, *http.Request, *reqLog)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rl := &reqLog{id: newID()}
		w := &statusWriter{ResponseWriter: rw}
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
		if s.cfg.APIKey != "" && endpoint != "health" {
			if !s.keys[tenant(r)] {
				writeError(w, rl, &APIError{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
					Message: "missing or wrong API key (Authorization: Bearer …)"})
				return
			}
		}
		h(w, r, rl)
	}
}

// tenant is the API key a request carries ("" for none).
func tenant(r *http.Request) string {
	k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return k
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

// readBody reads a POST body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *APIError) {
	if r.Method != http.MethodPost {
		return nil, &APIError{Status: 405, Type: "invalid_request_error", Message: "use POST"}
	}
	// Any Content-Type is accepted (curl -d sends a form type), as
	// llama-server does: the body must be a JSON object whatever it says.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &APIError{Status: 413, Type: "invalid_request_error", Message: fmt.Sprintf("request body over %d bytes", mb.Limit)}
		}
		return nil, badRequest("", "reading the body: %v", err)
	}
	return body, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	var req CompletionRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	p, aerr := s.lim.params(req.MaxTokens, req.Temperature, req.TopP, req.TopK, req.Seed, req.Stop, req.N, req.Stream)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 20 {
			writeError(w, rl, badRequest("logprobs", "logprobs must be in 0..20"))
			return
		}
		p.logprobs = *req.Logprobs
	}
	if req.Echo {
		writeError(w, rl, badRequest("echo", "echo is not supported"))
		return
	}
	prompt, aerr := s.prompt(req.Prompt)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	s.generate(w, r, rl, prompt, p, false)
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

func (s *Server) chat(w http.ResponseWriter, r *http.Request, rl *reqLog) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	var req ChatRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	maxTok := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTok = req.MaxCompletionTokens
	}
	p, aerr := s.lim.params(maxTok, req.Temperature, req.TopP, req.TopK, req.Seed, req.Stop, req.N, req.Stream)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	if req.Logprobs {
		p.logprobs = 0
		if req.TopLogprobs != nil {
			if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
				writeError(w, rl, badRequest("top_logprobs", "top_logprobs must be in 0..20"))
				return
			}
			p.logprobs = *req.TopLogprobs
		}
	}
	if len(req.Messages) == 0 {
		writeError(w, rl, badRequest("messages", "messages must not be empty"))
		return
	}
	msgs, aerr := chatMessages(req.Messages)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	opts, aerr := templateOptions(&req)
	if aerr != nil {
		writeError(w, rl, aerr)
		return
	}
	w.Header().Set("X-Gguftool-Chat-Template", s.tmpl.Name)
	rl.attrs = append(rl.attrs, "chat_template", s.tmpl.Name)
	text, err := s.tmpl.Render(msgs, opts)
	if err != nil {
		writeError(w, rl, badRequest("messages", "%v", err))
		return
	}
	prompt := s.tok.Encode(text, true, true)
	// A template that writes bos_token itself, with a vocabulary that adds
	// BOS too, would start the prompt with two; llama.cpp's server keeps
	// one.
	if bos, ok := s.tok.BOS(); ok && len(prompt) > 1 && prompt[0] == bos && prompt[1] == bos {
		prompt = prompt[1:]
	}
	p.chat = &chatGen{split: s.tmpl.NewSplitter(text), special: s.tmpl.Format() != chattmpl.FormatNone}
	s.generate(w, r, rl, prompt, p, true)
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
	tenant  string // the request's API key: admission is round-robin across them
	arrived time.Time
	prompt  []int
	p       params
	events  chan event
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

func (s *Server) generate(w http.ResponseWriter, r *http.Request, rl *reqLog, prompt []int, p params, chat bool) {
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
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	j := &job{ctx: ctx, tenant: tenant(r), arrived: time.Now(), prompt: prompt, p: p, events: make(chan event, 64)}
	switch ok, closed := s.queue.push(j); {
	case closed:
		writeError(w, rl, &APIError{Status: 503, Type: "server_error", Message: "the server is shutting down"})
		return
	case !ok:
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter()))
		writeError(w, rl, &APIError{Status: 429, Type: "rate_limit_exceeded", Code: "queue_full",
			Message: fmt.Sprintf("%d requests are already waiting; retry later", s.cfg.QueueSize)})
		return
	}
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
		case <-ctx.Done():
			if s.queue.remove(j) {
				// It never reached the model; its slot is free now.
				ev = event{done: true, err: ctx.Err(), queued: true}
				break
			}
			// The worker has it and sends the end once it notices; wait
			// for it so the response says why.
			ev = <-j.events
			for !ev.done {
				ev = <-j.events
			}
		}
		if ev.done {
			out.finish(ev)
			return
		}
		out.piece(ev)
	}
}

// retryAfter estimates the seconds until a queue slot frees.
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
