package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gguftool/gguftool/engine"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/tokenizer"
)

// testModel writes a small qwen3moe (ChatML template) and opens it.
func testModel(t testing.TB) *engine.Model { return testModelWith(t, nil) }

// testModelWith is testModel with the synth config changed.
func testModelWith(t testing.TB, mutate func(*synth.Config)) *engine.Model {
	t.Helper()
	c := synth.Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	c.Experts, c.ExpertsUsed = 16, 4
	if mutate != nil {
		mutate(&c)
	}
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(path, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func testConfig(m *engine.Model) Config {
	return Config{Model: m, ModelName: "test-model", QueueSize: 4, RequestTimeout: time.Minute, MaxBodyBytes: 1 << 20,
		MaxTokens: 256, DefaultMaxTokens: 16, Context: 1024}
}

// start serves cfg on a loopback port; the returned function shuts it
// down and returns Serve's error.
func start(t *testing.T, cfg Config) (string, *Server, func() error) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, 10*time.Second) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), s, stop
}

func post(t *testing.T, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sse reads a server-sent event stream into its data payloads.
func sse(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, line)
		}
	}
	return out
}

// expected runs the runtime directly, as gguftool run does.
func expected(t *testing.T, m *engine.Model, prompt string, n int, temp float64, seed uint64) string {
	t.Helper()
	tok, err := tokenizer.New(m.Meta)
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Generate(context.Background(), tok.Encode(prompt, true, true), engine.GenerateOptions{MaxTokens: n,
		Sampler: engine.SamplerOptions{Temperature: temp, TopP: 1, Seed: seed}, Stop: tok.EOG()})
	if err != nil {
		t.Fatal(err)
	}
	ids := g.Tokens
	if len(ids) > 0 && tok.IsEOG(ids[len(ids)-1]) {
		ids = ids[:len(ids)-1]
	}
	return jsonText(tok.Decode(ids, false, false))
}

// jsonText is s as it reads back from JSON: each invalid UTF-8 byte
// becomes U+FFFD.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// TestCompletions: plain and streamed completions equal the runtime's
// output for the same seed, with usage and finish_reason.
func TestCompletions(t *testing.T) {
	m := testModel(t)
	url, _, _ := start(t, testConfig(m))
	want := expected(t, m, "The experts live on", 12, 0.8, 42)

	resp, body := post(t, url+"/v1/completions", `{"model":"anything","prompt":"The experts live on","max_tokens":12,"temperature":0.8,"seed":42}`)
	var c Completion
	if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if c.Model != "test-model" || c.Object != "text_completion" || len(c.Choices) != 1 || c.Choices[0].Text != want ||
		c.Usage == nil || c.Usage.CompletionTokens == 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Fatalf("completion %s, want text %q", body, want)
	}
	if fr := c.Choices[0].FinishReason; fr == nil || (*fr != "length" && *fr != "stop") {
		t.Errorf("finish_reason %v", fr)
	}

	resp, body = post(t, url+"/v1/completions", `{"prompt":"The experts live on","max_tokens":12,"temperature":0.8,"seed":42,"stream":true}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header)
	}
	events := sse(t, body)
	if len(events) < 2 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream events %v", events)
	}
	var text strings.Builder
	var last Completion
	for _, e := range events[:len(events)-1] {
		var ch Completion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		text.WriteString(ch.Choices[0].Text)
		last = ch
	}
	if text.String() != want || last.Usage == nil || last.Choices[0].FinishReason == nil {
		t.Errorf("streamed %q (want %q), last chunk %+v", text.String(), want, last)
	}

	// Token ids as the prompt, logprobs, and a stop sequence.
	resp, body = post(t, url+"/v1/completions", `{"prompt":[72,101,108,108,111],"max_tokens":5,"temperature":0,"logprobs":3}`)
	c = Completion{}
	if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.Choices[0].Logprobs == nil ||
		len(c.Choices[0].Logprobs.TokenLogprobs) != c.Usage.CompletionTokens || len(c.Choices[0].Logprobs.TopLogprobs[0]) == 0 {
		t.Fatalf("logprobs: %d %s", resp.StatusCode, body)
	}
	full := expected(t, m, "The experts live on", 12, 0, 0)
	if len(full) > 4 {
		stop := full[2:4]
		resp, body = post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":"The experts live on","max_tokens":12,"temperature":0,"stop":[%q]}`, stop))
		c = Completion{}
		if json.Unmarshal(body, &c) != nil || c.Choices[0].Text != full[:strings.Index(full, stop)] || *c.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q in %q: %s", stop, full, body)
		}
	}
}

// TestChat: chat completions use the GGUF's ChatML template (said in a
// header) and equal the runtime on the rendered prompt, streamed or not.
func TestChat(t *testing.T) {
	m := testModel(t)
	url, s, _ := start(t, testConfig(m))
	if s.ChatTemplate() != "gguf:chatml" {
		t.Fatalf("template %s", s.ChatTemplate())
	}
	msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello"}]}]`
	want := expected(t, m, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", 10, 0, 0)
	resp, body := post(t, url+"/v1/chat/completions", `{"model":"x","messages":`+msgs+`,"max_tokens":10,"temperature":0}`)
	var c ChatCompletion
	if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.Object != "chat.completion" || c.Choices[0].Message == nil ||
		*c.Choices[0].Message.Content != want || c.Choices[0].Message.Role != "assistant" || c.Usage == nil {
		t.Fatalf("chat: %d %s (want %q)", resp.StatusCode, body, want)
	}
	if resp.Header.Get("X-Gguftool-Chat-Template") != "gguf:chatml" {
		t.Errorf("template header %q", resp.Header.Get("X-Gguftool-Chat-Template"))
	}
	resp, body = post(t, url+"/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":10,"temperature":0,"stream":true,"logprobs":true,"top_logprobs":2}`)
	events := sse(t, body)
	var text strings.Builder
	var sawRole, sawFinish, sawLogprobs bool
	for _, e := range events[:len(events)-1] {
		var ch ChatCompletion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		d := ch.Choices[0].Delta
		sawRole = sawRole || d.Role == "assistant"
		if d.Content != nil {
			text.WriteString(*d.Content)
		}
		sawFinish = sawFinish || ch.Choices[0].FinishReason != nil
		sawLogprobs = sawLogprobs || (ch.Choices[0].Logprobs != nil && len(ch.Choices[0].Logprobs.Content) > 0)
	}
	if text.String() != want || !sawRole || !sawFinish || !sawLogprobs || events[len(events)-1] != "[DONE]" {
		t.Errorf("chat stream %q (want %q) role %v finish %v logprobs %v", text.String(), want, sawRole, sawFinish, sawLogprobs)
	}
}

// TestBadRequests: malformed and hostile requests each get a 4xx with an
// OpenAI error body.
func TestBadRequests(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.MaxBodyBytes = 4096
	url, _, _ := start(t, cfg)
	long := strings.Repeat("word ", 2000)
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"/v1/completions", `{`, 400},
		{"/v1/completions", `[1,2]`, 400},
		{"/v1/completions", ``, 400},
		{"/v1/completions", `{"prompt":"a"} {"prompt":"b"}`, 400},
		{"/v1/completions", `{"prompt":"a","max_tokens":"ten"}`, 400},
		{"/v1/completions", `{"prompt":"a","max_tokens":100000}`, 400},
		{"/v1/completions", `{"prompt":"a","max_tokens":0}`, 400},
		{"/v1/completions", `{"prompt":"a","temperature":-1}`, 400},
		{"/v1/completions", `{"prompt":"a","top_p":0}`, 400},
		{"/v1/completions", `{"prompt":"a","n":2}`, 400},
		{"/v1/completions", `{"prompt":"a","stop":[1]}`, 400},
		{"/v1/completions", `{"prompt":"a","stop":["a","b","c","d","e"]}`, 400},
		{"/v1/completions", `{"prompt":{"x":1}}`, 400},
		{"/v1/completions", `{"prompt":[999999]}`, 400},
		{"/v1/completions", `{"prompt":["a","b"]}`, 400},
		{"/v1/completions", `{"prompt":""}`, 400},
		{"/v1/completions", `{"prompt":"a","logprobs":50}`, 400},
		{"/v1/completions", `{"prompt":"a","seed":-3}`, 400},
		{"/v1/completions", `{"prompt":"` + long[:4000] + `","max_tokens":256}`, 400},
		{"/v1/completions", `{"prompt":"` + long + `"}`, 413},
		{"/v1/chat/completions", `{"messages":[]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400},
		{"/v1/chat/completions", `{"messages":"hi"}`, 400},
		{"/v1/nothing", `{}`, 404},
	} {
		resp, body := post(t, url+tc.path, tc.body)
		var e struct {
			Error *APIError `json:"error"`
		}
		if resp.StatusCode != tc.code || json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == "" {
			t.Errorf("%s %.60q: %d %s (want %d)", tc.path, tc.body, resp.StatusCode, body, tc.code)
		}
	}
	resp, err := http.Get(url + "/v1/completions")
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("GET completions: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	// curl -d sends application/x-www-form-urlencoded: still JSON.
	resp, _ = post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Content-Type", "application/x-www-form-urlencoded")
	if resp.StatusCode != 200 {
		t.Errorf("curl -d content type: %d", resp.StatusCode)
	}
}

// TestModelsHealthMetrics: the read-only endpoints.
func TestModelsHealthMetrics(t *testing.T) {
	m := testModel(t)
	url, _, _ := start(t, testConfig(m))
	post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":3}`)
	for path, want := range map[string]string{
		"/v1/models": `"id":"test-model"`,
		"/health":    `"status":"ok"`,
		"/metrics":   `gguftool_requests_total{endpoint="completions",code="200"} 1`,
	} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		if path == "/metrics" {
			for _, name := range []string{"gguftool_request_duration_seconds_bucket", "gguftool_completion_tokens_total", "gguftool_decode_tokens_per_second",
				"gguftool_expert_served_total", "gguftool_expert_bytes_read_total", "gguftool_expert_io_wait_seconds_total", "gguftool_queue_depth",
				"gguftool_queue_full_with_room_total"} {
				if !strings.Contains(string(b), name) {
					t.Errorf("metrics lack %s", name)
				}
			}
		}
	}
}

// TestAPIKey: with a key, every API call needs it.
func TestAPIKey(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.APIKey = "sekrit"
	url, _, _ := start(t, cfg)
	if resp, _ := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`); resp.StatusCode != 401 {
		t.Errorf("no key: %d", resp.StatusCode)
	}
	if resp, _ := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Errorf("wrong key: %d", resp.StatusCode)
	}
	if resp, b := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Authorization", "Bearer sekrit"); resp.StatusCode != 200 {
		t.Errorf("key: %d %s", resp.StatusCode, b)
	}
}

// TestQueueFullCancelAndShutdown: past the queue bound a request gets 429
// with Retry-After; a client that goes away stops its generation; a
// shutdown lets the running request finish.
func TestQueueFullCancelAndShutdown(t *testing.T) {
	// A model slow enough that a 3,000-token generation outlasts the test's
	// checks (a tiny one finishes it, and fits its whole stream in the
	// socket buffers, in a few seconds).
	m := testModelWith(t, func(c *synth.Config) {
		c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF, c.Layers = 512, 64, 8, 2, 512, 6
	})
	cfg := testConfig(m)
	cfg.QueueSize = 1
	cfg.MaxTokens = 4000
	cfg.Context = 4096
	url, s, stop := start(t, cfg)
	long := `{"prompt":"a","max_tokens":3000,"temperature":0,"stream":true}`

	// One running (streaming; we read its first event), one waiting.
	ctx1, cancel1 := context.WithCancel(context.Background())
	req1, _ := http.NewRequestWithContext(ctx1, "POST", url+"/v1/completions", strings.NewReader(long))
	resp1, err := http.DefaultClient.Do(req1)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp1.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan int, 1)
	go func() {
		resp, _ := post(t, url+"/v1/completions", `{"prompt":"b","max_tokens":4,"temperature":0}`)
		waiting <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.metrics.mu.Lock()
		q := s.metrics.queued
		s.metrics.mu.Unlock()
		if q == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, body := post(t, url+"/v1/completions", `{"prompt":"c","max_tokens":4}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "queue_full") {
		t.Errorf("over the bound: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if q := s.QueueStats(); q.Rejected != 1 || q.LastRejectionDepth != cfg.QueueSize || q.RejectedWithRoom != 0 {
		t.Errorf("queue stats after the 429: %+v; want one rejection at depth %d, none with room", q, cfg.QueueSize)
	}
	// The first client goes away: its 3000-token generation stops and the
	// waiting request runs.
	cancel1()
	resp1.Body.Close()
	select {
	case code := <-waiting:
		if code != 200 {
			t.Errorf("the waiting request got %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled generation kept the model")
	}
	// Shutdown while a request runs: it completes.
	done := make(chan int, 1)
	go func() {
		resp, _ := post(t, url+"/v1/completions", `{"prompt":"d","max_tokens":40,"temperature":0}`)
		done <- resp.StatusCode
	}()
	time.Sleep(50 * time.Millisecond)
	if err := stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if code := <-done; code != 200 {
		t.Errorf("request during shutdown: %d", code)
	}
}

// TestQueueRejectionDepth: a 429 records how many requests were waiting.
// With the queue full that is its bound; a queue that refuses below its
// bound (here a channel with less room than the configured capacity) is
// counted as rejecting with room, which bench serve fails on.
func TestQueueRejectionDepth(t *testing.T) {
	for _, c := range []struct {
		name           string
		room, capacity int
		wantWithRoom   uint64
	}{
		{"full at the bound", 3, 3, 0},
		{"refused below the bound", 1, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No worker: every job accepted stays queued.
			s := &Server{jobs: make(chan *job, c.room), metrics: newMetrics(c.capacity)}
			if q := s.QueueStats(); q.LastRejectionDepth != -1 {
				t.Fatalf("before any rejection: %+v", q)
			}
			for i := range c.room {
				if ok, closed := s.enqueue(&job{}); !ok || closed {
					t.Fatalf("job %d refused with %d of %d queued", i, i, c.room)
				}
			}
			if ok, closed := s.enqueue(&job{}); ok || closed {
				t.Fatalf("a job past the room: ok %v, closed %v", ok, closed)
			}
			want := QueueStats{Capacity: c.capacity, Depth: c.room, Rejected: 1, RejectedWithRoom: c.wantWithRoom, LastRejectionDepth: c.room}
			if q := s.QueueStats(); q != want {
				t.Errorf("queue stats %+v, want %+v", q, want)
			}
		})
	}
}
