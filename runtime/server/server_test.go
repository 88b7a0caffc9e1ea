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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/tokenizer"
)

// testModel writes a small qwen3moe (ChatML template) and opens it.
func testModel(t testing.TB) *engine.Model { return testModelWith(t, nil) }

// testModelWith is testModel with the synth config changed.
func testModelWith(t testing.TB, mutate func(*synth.Config)) *engine.Model {
	t.Helper()
	// An F32 KV cache: the long-stream tests (longChat) rely on this
	// model not ending its greedy generation within 4,000 tokens, which
	// holds with the F32 cache's numbers (with F16's it ends at 789).
	m, err := engine.Open(context.Background(), writeTestModel(t, mutate), engine.Options{CacheTypeK: engine.KVF32, CacheTypeV: engine.KVF32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// writeTestModel writes testModelWith's model and returns its path.
func writeTestModel(t testing.TB, mutate func(*synth.Config)) string {
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
	return path
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
	if s.ChatTemplate() != "gguf" {
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
	if resp.Header.Get("X-Gguftool-Chat-Template") != "gguf" {
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

// TestChatEveryArch: a chat completion on a model of each architecture
// the engine runs equals the runtime's own greedy output for the
// rendered prompt, plain and streamed.
func TestChatEveryArch(t *testing.T) {
	type model struct {
		name, arch string
		mutate     func(*synth.Config)
	}
	var models []model
	for _, arch := range engine.Archs {
		models = append(models, model{arch, arch, nil})
	}
	// Kimi-K3's shape at a small width (golden's k3-shape): three KDA
	// layers to one MLA layer, 384 experts, top 8, latent experts.
	models = append(models, model{"kimi-k3-shape", "kimi-k3", func(c *synth.Config) {
		c.Layers, c.Embd, c.Heads, c.HeadDim, c.RopeDim, c.KDAHeadDim = 4, 128, 64, 16, 8, 16
		c.Experts, c.ExpertsUsed, c.ExpertFF, c.ExpertLatent, c.DenseFF = 384, 8, 32, 64, 128
	}})
	for _, md := range models {
		arch := md.arch
		t.Run(md.name, func(t *testing.T) {
			m := testModelWith(t, func(c *synth.Config) {
				def := synth.Defaults(arch)
				def.Type, def.Experts, def.ExpertsUsed = c.Type, c.Experts, c.ExpertsUsed
				if arch == "gpt-oss" {
					def.ExpertType = gguf.TypeMXFP4
				}
				if md.mutate != nil {
					md.mutate(&def)
				}
				*c = def
			})
			url, _, _ := start(t, testConfig(m))
			want := expected(t, m, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", 8, 0, 0)
			if want == "" {
				t.Fatal("the runtime generated nothing to compare with")
			}
			msgs := `[{"role":"user","content":"Hello"}]`
			resp, body := post(t, url+"/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":8,"temperature":0}`)
			var c ChatCompletion
			if resp.StatusCode != 200 || json.Unmarshal(body, &c) != nil || c.Choices[0].Message == nil || *c.Choices[0].Message.Content != want {
				t.Fatalf("chat: %d %s (want %q)", resp.StatusCode, body, want)
			}
			_, body = post(t, url+"/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":8,"temperature":0,"stream":true}`)
			var text strings.Builder
			events := sse(t, body)
			for _, e := range events[:len(events)-1] {
				var ch ChatCompletion
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatal(err)
				}
				if d := ch.Choices[0].Delta; d.Content != nil {
					text.WriteString(*d.Content)
				}
			}
			if text.String() != want {
				t.Errorf("stream %q, want %q", text.String(), want)
			}
		})
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
	// Several keys: each is accepted, nothing else, not even the list.
	cfg.APIKey = "team-a,team-b"
	url, _, _ = start(t, cfg)
	for key, want := range map[string]int{"team-a": 200, "team-b": 200, "team-a,team-b": 401, "": 401, "sekrit": 401} {
		if resp, b := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Authorization", "Bearer "+key); resp.StatusCode != want {
			t.Errorf("key %q of several: %d, want %d: %s", key, resp.StatusCode, want, b)
		}
	}
}

// slowConfig serves a model slow enough that a 3,000-token generation
// outlasts a test's checks (a tiny one finishes it, and fits its whole
// stream in the socket buffers, in a few seconds).
func slowConfig(t *testing.T) Config {
	m := testModelWith(t, func(c *synth.Config) {
		c.Embd, c.HeadDim, c.Heads, c.HeadsKV, c.ExpertFF, c.Layers = 512, 64, 8, 2, 512, 6
	})
	cfg := testConfig(m)
	cfg.MaxTokens = 4000
	cfg.Context = 4096
	return cfg
}

// startLong starts a 3,000-token streamed completion and reads its first
// event, so that it holds the model; cancel makes its client go away.
func startLong(t *testing.T, url string) (stream *bufio.Reader, cancel func()) {
	t.Helper()
	ctx, cancelCtx := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
		strings.NewReader(`{"prompt":"a","max_tokens":3000,"temperature":0,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream = bufio.NewReader(resp.Body)
	if _, err := stream.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel = func() {
		cancelCtx()
		resp.Body.Close()
	}
	t.Cleanup(cancel)
	return stream, cancel
}

// eventually polls cond for up to 10 s and reports whether it came true.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// depthIs is a condition for eventually: n requests wait.
func depthIs(s *Server, n int) func() bool {
	return func() bool { return s.QueueStats().Depth == n }
}

// metricsText is what /metrics says.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestQueueFullCancelAndShutdown: past the queue bound a request gets 429
// with Retry-After; a client that goes away stops its generation; a
// shutdown lets the running request finish.
func TestQueueFullCancelAndShutdown(t *testing.T) {
	cfg := slowConfig(t)
	cfg.QueueSize = 1
	url, s, stop := start(t, cfg)

	// One running (streaming; we read its first event), one waiting.
	_, cancel1 := startLong(t, url)
	waiting := make(chan int, 1)
	go func() {
		resp, _ := post(t, url+"/v1/completions", `{"prompt":"b","max_tokens":4,"temperature":0}`)
		waiting <- resp.StatusCode
	}()
	if !eventually(depthIs(s, 1)) {
		t.Fatal("the second request never queued")
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

// TestQueueRejectionDepth: a 429 records how many requests held a place
// without running. With every place taken that is the queue's bound; a
// queue that refuses below its bound (here one whose limit is below the
// configured capacity) is counted as rejecting with room, which bench
// serve fails on.
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
			// No worker: one place runs (taken by hand), the rest wait.
			m := newMetrics(c.capacity)
			s := &Server{queue: newJobQueue(c.room, 1, m, nil), metrics: m}
			if q := s.QueueStats(); q.LastRejectionDepth != -1 {
				t.Fatalf("before any rejection: %+v", q)
			}
			running := &job{}
			if ok, _ := s.queue.reserve(); !ok || !s.queue.push(running) {
				t.Fatal("the first place was refused")
			}
			if j, ok := s.queue.take(false); !ok || j != running {
				t.Fatal("the first job was not taken")
			}
			jobs := make([]*job, c.room)
			for i := range jobs {
				jobs[i] = &job{}
				if ok, closed := s.queue.reserve(); !ok || closed || !s.queue.push(jobs[i]) {
					t.Fatalf("job %d refused with %d of %d queued", i, i, c.room)
				}
			}
			if ok, closed := s.queue.reserve(); ok || closed {
				t.Fatalf("a job past the room: ok %v, closed %v", ok, closed)
			}
			want := QueueStats{Capacity: c.capacity, Depth: c.room, Rejected: 1, RejectedWithRoom: c.wantWithRoom, LastRejectionDepth: c.room}
			if q := s.QueueStats(); q != want {
				t.Errorf("queue stats %+v, want %+v", q, want)
			}
			// A cancelled job leaves at once: its place takes a new job,
			// and the next refusal again sees the queue as full as before.
			if !s.queue.remove(jobs[0]) {
				t.Fatal("a waiting job was not found to remove")
			}
			s.queue.release()
			if q := s.QueueStats(); q.Depth != c.room-1 {
				t.Errorf("depth %d after a removal, want %d", q.Depth, c.room-1)
			}
			if ok, _ := s.queue.reserve(); !ok {
				t.Fatal("the place a removed job freed was refused")
			}
			if ok, _ := s.queue.reserve(); ok {
				t.Fatal("a job past the room after the removal was given a place")
			}
			want.Rejected, want.RejectedWithRoom = 2, 2*c.wantWithRoom
			if q := s.QueueStats(); q != want {
				t.Errorf("queue stats after a removal %+v, want %+v", q, want)
			}
			// The running job's end leaves its place held until its answer
			// is written, counted as not running: a refusal meanwhile still
			// finds the bound's worth of places not running.
			s.queue.left()
			if q := s.QueueStats(); q.Depth != c.room+1 {
				t.Errorf("depth %d once the running job ended, want %d", q.Depth, c.room+1)
			}
			if ok, _ := s.queue.reserve(); ok {
				t.Fatal("the place of a job whose answer is being written was given away")
			}
			if q := s.QueueStats(); q.LastRejectionDepth != c.room+1 || q.RejectedWithRoom != 3*c.wantWithRoom {
				t.Errorf("the refusal while the answer was written: %+v", q)
			}
			s.queue.release()
			if ok, _ := s.queue.reserve(); !ok {
				t.Fatal("the running job's place was not freed once its answer was written")
			}
		})
	}
}

// TestCancelledWhileQueued: clients that give up while their requests
// wait free their queue slots at once, not when the running generation
// ends: a live client is then admitted, not refused with 429 by a queue
// of ghosts, and the metrics count the ghosts as cancelled (499), not as
// 503s.
func TestCancelledWhileQueued(t *testing.T) {
	cfg := slowConfig(t)
	url, s, _ := start(t, cfg)
	stream, cancelLong := startLong(t, url)

	var ghosts sync.WaitGroup
	cancels := make([]context.CancelFunc, cfg.QueueSize)
	for i := range cancels {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		ghosts.Add(1)
		go func() {
			defer ghosts.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"b","max_tokens":4}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	if !eventually(depthIs(s, cfg.QueueSize)) {
		t.Fatalf("the queue never filled: %+v", s.QueueStats())
	}
	for _, cancel := range cancels {
		cancel()
	}
	ghosts.Wait()
	if !eventually(depthIs(s, 0)) {
		t.Errorf("clients gone, yet %d requests still hold the queue", s.QueueStats().Depth)
	}

	live := make(chan int, 1)
	go func() {
		resp, _ := post(t, url+"/v1/completions", `{"prompt":"c","max_tokens":4,"temperature":0}`)
		live <- resp.StatusCode
	}()
	liveQueued := eventually(func() bool {
		select {
		case code := <-live:
			t.Fatalf("a live client got %d while the long generation ran; want it queued", code)
		default:
		}
		return s.QueueStats().Depth == 1
	})
	if !liveQueued {
		t.Fatal("the live request never queued")
	}
	// The long generation still runs: the slot was not freed by its end.
	if _, err := stream.ReadString('\n'); err != nil {
		t.Fatalf("the long generation: %v", err)
	}
	if q := s.QueueStats(); q.Rejected != 0 {
		t.Errorf("queue stats %+v: want no 429", q)
	}

	// Its client goes away too: it is cancelled while running, and the
	// live request runs.
	cancelLong()
	if code := <-live; code != 200 {
		t.Errorf("the live request got %d", code)
	}
	want := []string{
		fmt.Sprintf(`gguftool_cancelled_requests_total{stage="queued"} %d`, cfg.QueueSize),
		`gguftool_cancelled_requests_total{stage="running"} 1`,
		fmt.Sprintf(`gguftool_requests_total{endpoint="completions",code="499"} %d`, cfg.QueueSize+1),
		`gguftool_requests_total{endpoint="completions",code="200"} 1`,
		`gguftool_rejected_requests_total{reason="queue_full"} 0`,
		`gguftool_rejected_requests_total{reason="timeout_in_queue"} 0`,
	}
	var text string
	counted := eventually(func() bool {
		text = metricsText(t, url)
		for _, line := range want {
			if !strings.Contains(text, line+"\n") {
				return false
			}
		}
		return true
	})
	if !counted || strings.Contains(text, `code="503"`) {
		var counts []string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "gguftool_cancelled_") || strings.HasPrefix(line, "gguftool_requests_total") ||
				strings.HasPrefix(line, "gguftool_rejected_") {
				counts = append(counts, line)
			}
		}
		t.Errorf("metrics say\n%s\nwant %q and no 503", strings.Join(counts, "\n"), want)
	}
}

// TestNewRefusesConfig: a configuration the server cannot serve with is
// refused, naming the field, rather than answering every request with an
// error; a default max_tokens that fills the context would refuse every
// request without max_tokens.
func TestNewRefusesConfig(t *testing.T) {
	m := testModel(t)
	for _, tc := range []struct {
		edit    func(*Config)
		wantErr string
	}{
		{func(c *Config) { c.QueueSize = -1 }, "QueueSize -1: must be at least 0"},
		{func(c *Config) { c.MaxTokens = 0 }, "MaxTokens 0: must be at least 1"},
		{func(c *Config) { c.DefaultMaxTokens = c.MaxTokens + 1 }, "DefaultMaxTokens 257: must be in 1..MaxTokens (256)"},
		{func(c *Config) { c.Context = 2 * m.Hparams.Context }, fmt.Sprintf("Context %d: must be in 2..%d", 2*m.Hparams.Context, m.Hparams.Context)},
		{func(c *Config) { c.Context, c.DefaultMaxTokens = 16, 16 }, "DefaultMaxTokens 16: must be below Context (16)"},
		{func(c *Config) { c.MaxBodyBytes = 10 }, "MaxBodyBytes 10: must be at least 1024"},
		{func(c *Config) { c.RequestTimeout = -time.Second }, "RequestTimeout -1s: must be positive"},
	} {
		cfg := testConfig(m)
		tc.edit(&cfg)
		if s, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			if s != nil {
				s.Close()
			}
			t.Errorf("New: %v; want an error containing %q", err, tc.wantErr)
		}
	}
}

// TestNoQueue: with QueueSize 0 nothing waits, but an idle server still
// runs each request as it comes (a queue of none once refused them all).
func TestNoQueue(t *testing.T) {
	cfg := testConfig(testModel(t))
	cfg.QueueSize = 0
	url, _, _ := start(t, cfg)
	for i := range 3 {
		if resp, body := post(t, url+"/v1/completions", `{"prompt":"The experts live on","max_tokens":4}`); resp.StatusCode != 200 {
			t.Fatalf("request %d to an idle server with no queue: %d %s", i, resp.StatusCode, body)
		}
	}
}

// TestParallelEqualsAlone: requests generating together, joining as
// others run, prompts fed in chunks of three, each get the text they get
// alone, greedy or sampled, streamed or not.
func TestParallelEqualsAlone(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.Parallel, cfg.PrefillChunk, cfg.QueueSize = 4, 3, 8
	prompts := []string{"The experts live on", "Hello", "A long prompt that takes several chunks to feed, one step each", "MoE",
		"Streaming experts from disk", "x", "Batching shares every expert read", "The end"}
	params := func(i int) (int, float64, uint64) { return 4 + 3*(i%4), float64(i%2) * 0.8, uint64(i) }
	// Alone first: the model serves one caller at a time.
	var wants []string
	for i, p := range prompts {
		n, temp, seed := params(i)
		wants = append(wants, expected(t, m, p, n, temp, seed))
	}
	url, _, _ := start(t, cfg)
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, temp, seed := params(i)
			want := wants[i]
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":%g,"seed":%d,"stream":%v}`, p, n, temp, seed, i%3 == 0)
			resp, out := post(t, url+"/v1/completions", body)
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d %s", i, resp.StatusCode, out)
				return
			}
			var text strings.Builder
			if i%3 == 0 {
				events := sse(t, out)
				for _, e := range events[:len(events)-1] {
					var ch Completion
					if err := json.Unmarshal([]byte(e), &ch); err != nil {
						t.Errorf("request %d: chunk %q: %v", i, e, err)
						return
					}
					text.WriteString(ch.Choices[0].Text)
				}
			} else {
				var c Completion
				if err := json.Unmarshal(out, &c); err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				text.WriteString(c.Choices[0].Text)
			}
			if text.String() != want {
				t.Errorf("request %d (%q, temperature %g): %q together, %q alone", i, p, temp, text.String(), want)
			}
		}()
	}
	wg.Wait()
	// The steps batched: more rows than steps, and fewer experts fetched
	// than routed uses. Each request's first token and wait were timed.
	text := metricsText(t, url)
	value := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	steps, rows := value("gguftool_batch_steps_total"), value("gguftool_batch_rows_total")
	uses, fetches := value("gguftool_batch_expert_uses_total"), value("gguftool_batch_expert_fetches_total")
	if steps == 0 || rows <= steps || fetches >= uses || value("gguftool_time_to_first_token_seconds_count") != float64(len(prompts)) ||
		value("gguftool_queue_wait_seconds_count") != float64(len(prompts)) {
		t.Errorf("metrics: %g steps of %g rows, %g expert fetches for %g uses:\n%s", steps, rows, fetches, uses, text)
	}
}

// TestPrefixCache: a request whose prompt begins like an earlier one
// starts from its saved state, says how many prompt tokens that spared in
// usage, and gets the text it gets with nothing cached.
func TestPrefixCache(t *testing.T) {
	m := testModel(t)
	first := "The experts live on a fast disk, and the router picks four of them for every token"
	second := first + " that the model reads"
	wantFirst, wantSecond := expected(t, m, first, 6, 0, 0), expected(t, m, second, 6, 0, 0)
	cfg := testConfig(m)
	cfg.PrefixCacheBytes = 64 << 20
	url, _, _ := start(t, cfg)
	for i, c := range []struct {
		prompt, want string
		cached       bool
	}{{first, wantFirst, false}, {second, wantSecond, true}, {first, wantFirst, true}} {
		resp, body := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":6,"temperature":0}`, c.prompt))
		var out Completion
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Usage == nil || out.Usage.PromptTokensDetails == nil {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		got := out.Usage.PromptTokensDetails.CachedTokens
		if out.Choices[0].Text != c.want || (got > 0) != c.cached || got >= out.Usage.PromptTokens {
			t.Errorf("request %d: %q with %d of %d prompt tokens cached; want %q, cached %v", i, out.Choices[0].Text, got,
				out.Usage.PromptTokens, c.want, c.cached)
		}
	}
}
