package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of what a slow, stalled or hostile client can do to the
// server: over loopback, with real HTTP clients and raw connections.

// connOpts are the connection settings a test changes (zero: the
// server's default).
type connOpts struct {
	readHeader, read, write, idle time.Duration
	maxConns                      int
}

func (c connOpts) apply(cfg *Config) {
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = c.readHeader, c.read, c.write, c.idle
	cfg.MaxConnections = c.maxConns
}

// answerWithin bounds how long a raw connection waits for an answer the
// server owes it at once, so that a server that never answers fails the
// test instead of hanging it. It bounds liveness only: no assertion
// depends on how long anything took.
const answerWithin = 30 * time.Second

// dialStingy connects to the server at url with a receive buffer as small
// as the kernel allows, as a client that reads nothing soon looks.
func dialStingy(t *testing.T, url string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dial connects to the server at url.
func dial(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sendPOST writes a POST of body to path on c, with extra header lines.
func sendPOST(t *testing.T, c net.Conn, path, body string, header ...string) {
	t.Helper()
	h := strings.Join(append(header, ""), "\r\n")
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		path, len(body), h, body); err != nil {
		t.Fatal(err)
	}
}

// readAnswer reads one response from c, failing if none comes.
func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(answerWithin))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, string(b)
}

// closedByServer reports whether the server closed c: a read of it ends
// with EOF (or a reset) rather than data or the liveness bound.
func closedByServer(t *testing.T, c net.Conn, br *bufio.Reader) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(answerWithin))
	_, err := br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// metric is the value of an unlabelled (or fully labelled) series in
// /metrics, 0 when the server does not export it.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(metricsText(t, url))
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// chatStream is what a streamed chat response says: its text, the tokens
// its logprobs list, its finish reason and usage.
type chatStream struct {
	text             string
	tokens           int
	finish           string
	completionTokens int
	errors           []string
}

func readChatStream(t *testing.T, body []byte) chatStream {
	t.Helper()
	var out chatStream
	var text strings.Builder
	for _, e := range sse(t, body) {
		if e == "[DONE]" {
			continue
		}
		if strings.HasPrefix(e, `{"error"`) {
			out.errors = append(out.errors, e)
			continue
		}
		var ch ChatCompletion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("chunk %.80q: %v", e, err)
		}
		c := ch.Choices[0]
		if c.Delta.Content != nil {
			text.WriteString(*c.Delta.Content)
		}
		if c.Logprobs != nil {
			out.tokens += len(c.Logprobs.Content)
		}
		if c.FinishReason != nil {
			out.finish = *c.FinishReason
		}
		if ch.Usage != nil {
			out.completionTokens = ch.Usage.CompletionTokens
		}
	}
	out.text = text.String()
	return out
}

// longChat is a streamed chat of 4,000 tokens, each with its 20 most
// likely alternatives (about 2.5 KB an event, 10 MB in all: more than
// loopback's socket buffers hold). Greedy, the test model does not end it
// early.
const longChat = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4000,"temperature":0,"stream":true,"logprobs":true,"top_logprobs":20}`

func longChatConfig(t *testing.T) Config {
	cfg := testConfig(testModel(t))
	cfg.MaxTokens, cfg.Context = 4000, 4096
	cfg.RequestTimeout = 3 * time.Minute
	return cfg
}

// TestSlowReaderDoesNotStallOthers: a client that stops reading its
// stream pauses its own request and nothing else. Two identical 4,000
// token streams start together; one client never reads. The other gets
// its whole stream while the stalled one is still paused (not ended, not
// timed out: the ordering, not a duration, is the check), and the stalled
// client, once it reads, gets its whole stream too, the same text.
func TestSlowReaderDoesNotStallOthers(t *testing.T) {
	cfg := longChatConfig(t)
	cfg.Parallel = 2
	// The stalled client is to stay paused, not be cut, while the other
	// runs: its writes may wait as long as the request may run.
	connOpts{write: cfg.RequestTimeout}.apply(&cfg)
	url, _, _ := start(t, cfg)

	stalled := dialStingy(t, url)
	sendPOST(t, stalled, "/v1/chat/completions", longChat)
	resp, body := post(t, url+"/v1/chat/completions", longChat)
	if resp.StatusCode != 200 {
		t.Fatalf("the reading client got %d: %.200s", resp.StatusCode, body)
	}
	reader := readChatStream(t, body)
	if reader.tokens != 4000 || reader.finish != "length" || len(reader.errors) > 0 {
		t.Fatalf("the reading client got %d tokens, finish %q, errors %q; want 4000, length", reader.tokens, reader.finish, reader.errors)
	}
	// The reading client is done: the stalled one must still be paused,
	// its request neither ended nor timed out.
	paused, pauses := metric(t, url, "gguftool_paused_streams"), metric(t, url, "gguftool_stream_pauses_total")
	timedOut := metric(t, url, `gguftool_requests_total{endpoint="chat",code="504"}`)
	if paused != 1 || pauses < 1 || timedOut != 0 {
		t.Fatalf("when the reading client finished: %g streams paused (%g pauses), %g timed out; want the stalled one paused", paused, pauses, timedOut)
	}
	// The stalled client reads at last, with room to read quickly: its
	// stream resumes and is whole.
	stalled.(*net.TCPConn).SetReadBuffer(1 << 20)
	br := bufio.NewReader(stalled)
	sresp, sbody := readAnswer(t, stalled, br)
	got := readChatStream(t, []byte(sbody))
	if sresp.StatusCode != 200 || got.tokens != 4000 || got.completionTokens != 4000 || got.finish != "length" || len(got.errors) > 0 {
		t.Fatalf("the stalled client got %d: %d tokens (usage %d), finish %q, errors %q", sresp.StatusCode, got.tokens, got.completionTokens, got.finish, got.errors)
	}
	if got.text != reader.text {
		t.Errorf("the paused stream's text differs from the same request's read at once (%d and %d bytes)", len(got.text), len(reader.text))
	}
}

// TestStalledClientCutByWriteTimeout: a client that stops reading holds
// the model only until a write to it has waited WriteTimeout; then its
// request is cut (counted as a client gone, 499, and a write failure) and
// the request waiting behind it runs. Without the cut it would wait for
// the stalled request's own timeout (504).
func TestStalledClientCutByWriteTimeout(t *testing.T) {
	cfg := longChatConfig(t)
	cfg.Parallel = 1
	connOpts{write: 200 * time.Millisecond}.apply(&cfg)
	url, _, _ := start(t, cfg)

	stalled := dialStingy(t, url)
	sendPOST(t, stalled, "/v1/chat/completions", longChat)
	resp, body := post(t, url+"/v1/completions", `{"prompt":"The experts live on","max_tokens":4,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("the request behind the stalled one got %d: %s", resp.StatusCode, body)
	}
	want := map[string]float64{
		"gguftool_write_failures_total":                              1,
		`gguftool_cancelled_requests_total{stage="running"}`:         1,
		`gguftool_requests_total{endpoint="chat",code="499"}`:        1,
		`gguftool_requests_total{endpoint="chat",code="504"}`:        0,
		`gguftool_requests_total{endpoint="completions",code="200"}`: 1,
	}
	got := map[string]float64{}
	// The stalled request's handler counts itself as it returns, which
	// may be just after the other request's answer.
	ok := eventually(func() bool {
		for series, v := range want {
			if got[series] = metric(t, url, series); got[series] != v {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Errorf("metrics %v, want %v", got, want)
	}
}

// TestConnectionTimeouts: a connection is cut, or answered, whatever its
// client does: headers or a body sent in part, an unauthenticated body,
// an idle keep-alive.
func TestConnectionTimeouts(t *testing.T) {
	m := testModel(t)
	short := 200 * time.Millisecond
	t.Run("unauthenticated part of a body gets 401 at once", func(t *testing.T) {
		cfg := testConfig(m)
		cfg.APIKey = "k"
		// The body may take longer than any test: the answer must come
		// from the key check, not the body's timeout (a 408).
		connOpts{read: 10 * time.Minute}.apply(&cfg)
		url, _, _ := start(t, cfg)
		c := dial(t, url)
		if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n{\"prompt\":"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, body := readAnswer(t, c, br)
		if resp.StatusCode != 401 || !strings.Contains(body, "invalid_api_key") || !closedByServer(t, c, br) {
			t.Errorf("got %d %s; want 401 invalid_api_key and the connection closed", resp.StatusCode, body)
		}
	})
	t.Run("part of a body times out", func(t *testing.T) {
		cfg := testConfig(m)
		cfg.APIKey = "k"
		connOpts{read: short}.apply(&cfg)
		url, _, _ := start(t, cfg)
		c := dial(t, url)
		if _, err := fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer k\r\nContent-Length: 1000\r\n\r\n{\"prompt\":"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, body := readAnswer(t, c, br)
		if resp.StatusCode != 408 || !strings.Contains(body, "request_timeout") || !closedByServer(t, c, br) {
			t.Errorf("got %d %s; want 408 request_timeout and the connection closed", resp.StatusCode, body)
		}
	})
	t.Run("part of the headers times out", func(t *testing.T) {
		cfg := testConfig(m)
		connOpts{readHeader: short}.apply(&cfg)
		url, _, _ := start(t, cfg)
		c := dial(t, url)
		if _, err := fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: test\r\n"); err != nil {
			t.Fatal(err)
		}
		if !closedByServer(t, c, bufio.NewReader(c)) {
			t.Error("a connection whose headers never end stayed open")
		}
	})
	t.Run("an idle keep-alive is closed", func(t *testing.T) {
		cfg := testConfig(m)
		connOpts{idle: short}.apply(&cfg)
		url, _, _ := start(t, cfg)
		c := dial(t, url)
		if _, err := fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if resp, body := readAnswer(t, c, br); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("health: %d (close %v) %s; want a kept-alive 200", resp.StatusCode, resp.Close, body)
		}
		if !closedByServer(t, c, br) {
			t.Error("an idle keep-alive connection stayed open")
		}
	})
}

// TestConnectionCap: past MaxConnections open connections a new one is
// answered 503 (too_many_connections) and closed; once one closes, new
// connections are served again.
func TestConnectionCap(t *testing.T) {
	cfg := testConfig(testModel(t))
	// The held connections send nothing: they must outlast the test.
	connOpts{readHeader: 10 * time.Minute, maxConns: 2}.apply(&cfg)
	url, _, _ := start(t, cfg)
	held := []net.Conn{dial(t, url), dial(t, url)}
	c := dial(t, url)
	if _, err := fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, body := readAnswer(t, c, br)
	if resp.StatusCode != 503 || !strings.Contains(body, "too_many_connections") || resp.Header.Get("Retry-After") == "" || !closedByServer(t, c, br) {
		t.Fatalf("a connection past the cap got %d %s (Retry-After %q); want 503 too_many_connections, closed",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	for _, h := range held {
		h.Close()
	}
	// The server frees their places as it notices them closed; until
	// then new connections are refused too.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var got string
	refused := 1
	served := eventually(func() bool {
		resp, err := client.Get(url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got = string(b)
		if resp.StatusCode == 503 {
			refused++
		}
		return resp.StatusCode == 200
	})
	if want := fmt.Sprintf("gguftool_connections_refused_total %d\n", refused); !served || !strings.Contains(got, want) {
		t.Errorf("after the held connections closed: served %v; want %q in the metrics:\n%s", served, want, got)
	}
}

// TestAPIKeyParsing: keys are trimmed, the Bearer scheme is matched in
// any case (RFC 7235), anything else is refused; a key list with no key
// in it is refused by New, not served to refuse everyone.
func TestAPIKeyParsing(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.APIKey = " aaa, bbb ,"
	url, _, _ := start(t, cfg)
	for auth, want := range map[string]int{
		"Bearer aaa": 200, "Bearer bbb": 200, "bearer bbb": 200, "BEARER aaa": 200, "Bearer  aaa ": 200,
		"Bearer  bbb": 200, "Bearer aaa, bbb": 401, "Bearer  aaa, bbb ,": 401, "Bearer": 401, "Bearer ": 401,
		"Basic aaa": 401, "aaa": 401, "Bearer aa": 401, "Bearer aaaa": 401, "": 401,
	} {
		if resp, b := post(t, url+"/v1/completions", `{"prompt":"a","max_tokens":2}`, "Authorization", auth); resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d: %s", auth, resp.StatusCode, want, b)
		}
	}
	for _, list := range []string{",", " , ", " ", ",,"} {
		cfg.APIKey = list
		if s, err := New(cfg); err == nil || !strings.Contains(err.Error(), "holds no key") {
			if s != nil {
				s.Close()
			}
			t.Errorf("APIKey %q: New gave %v; want an error saying it holds no key", list, err)
		}
	}
}

// TestNoKeyOneLane: without API keys, requests are admitted first come,
// first served whatever Authorization they carry: a client cannot give
// itself a lane of its own (and jump the queue) by sending one. One
// request runs at a time, each a long stream: the one whose first event
// arrives is the one admitted, and it is cancelled to admit the next.
func TestNoKeyOneLane(t *testing.T) {
	cfg := slowConfig(t)
	url, _, _ := start(t, cfg)
	_, cancelLong := startLong(t, url)
	auths := []string{"Bearer x", "Bearer x", "Bearer y"}
	cancels := make([]context.CancelFunc, len(auths))
	admitted := make(chan int, len(auths))
	for i, auth := range auths {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cancels[i] = cancel
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions",
			strings.NewReader(`{"prompt":"a","max_tokens":3000,"temperature":0,"stream":true}`))
		req.Header.Set("Authorization", auth)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err == nil {
				admitted <- i
			}
		}()
		// Queued in this order: each is in flight before the next is sent.
		if !eventually(func() bool { return metric(t, url, "gguftool_requests_in_flight") == float64(i+2) }) {
			t.Fatalf("request %d never queued", i)
		}
	}
	cancelLong()
	var order []int
	for range auths {
		select {
		case i := <-admitted:
			order = append(order, i)
			cancels[i]()
		case <-time.After(answerWithin):
			t.Fatalf("after %v, no further request was admitted", order)
		}
	}
	if fmt.Sprint(order) != "[0 1 2]" {
		t.Errorf("admitted in the order %v (Authorization %q); want first come, first served", order, auths)
	}
}
