package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzRequest: any body sent to either generation endpoint gets a 2xx or
// a 4xx with an error body — never a 5xx, a panic or a hang.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"hello","max_tokens":2}`,
		`{"prompt":[1,2,3],"stream":true,"logprobs":2}`,
		`{"messages":[{"role":"user","content":"hi"}],"stop":["a"],"temperature":0.5,"seed":1}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"x"}]}],"top_logprobs":1,"logprobs":true}`,
		`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning_content":"r"}],"reasoning_effort":"low"}`,
		`{"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":{"enable_thinking":false,"x":[1,{"y":null}]}}`,
		`{"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":{"bos_token":"x"},"reasoning_effort":7}`,
		`{"prompt":"a","max_tokens":1e3}`, `{"prompt":null}`, `{}`, `[]`, `{"prompt":"\u0000"}`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	m := testModel(f)
	cfg := testConfig(m)
	cfg.MaxTokens, cfg.DefaultMaxTokens, cfg.RequestTimeout = 2, 2, 10*time.Second
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		switch {
		case code >= 500:
			t.Fatalf("%q: %d %s", body, code, rec.Body)
		case code >= 400 && !strings.Contains(rec.Body.String(), `"error"`):
			t.Fatalf("%q: %d without an error body: %s", body, code, rec.Body)
		case code != http.StatusOK && code < 400:
			t.Fatalf("%q: status %d", body, code)
		}
	})
}
