package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/synth"
	"github.com/gguftool/gguftool/tokenizer"
)

// thinkTemplate is a DeepSeek-V3.1-style template: bos_token first, the
// generation prompt ends inside <think>, and enable_thinking=false adds a
// marker, so a request's kwargs show in the prompt.
const thinkTemplate = `{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}` +
	`{% if enable_thinking is defined and not enable_thinking %}/nothink{% endif %}{% if add_generation_prompt %}<think>{% endif %}`

// expectedChat runs the runtime on a rendered chat prompt as the server
// does for a template with reasoning markers: one BOS, control tokens
// written out.
func expectedChat(t *testing.T, m *engine.Model, prompt string, n int) string {
	t.Helper()
	tok, err := tokenizer.New(m.Meta)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(prompt, true, true)
	if bos, ok := tok.BOS(); ok && len(ids) > 1 && ids[0] == bos && ids[1] == bos {
		ids = ids[1:]
	}
	g, err := m.Generate(context.Background(), ids, engine.GenerateOptions{MaxTokens: n,
		Sampler: engine.SamplerOptions{Temperature: 0, TopP: 1}, Stop: tok.EOG()})
	if err != nil {
		t.Fatal(err)
	}
	out := g.Tokens
	if len(out) > 0 && tok.IsEOG(out[len(out)-1]) {
		out = out[:len(out)-1]
	}
	return jsonText(tok.Decode(out, false, true))
}

// TestChatTemplateFile: a template given in the configuration replaces
// the GGUF's, is named file:NAME, receives chat_template_kwargs, and a
// reply to a prompt ending in <think> is reasoning (reasoning_content),
// streamed or not.
func TestChatTemplateFile(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.ChatTemplate, cfg.ChatTemplateName = thinkTemplate, "think.jinja"
	url, s, _ := start(t, cfg)
	if s.ChatTemplate() != "file:think.jinja" {
		t.Fatalf("template %s", s.ChatTemplate())
	}
	tok, _ := tokenizer.New(m.Meta)
	bos, _ := tok.BOS()
	for _, c := range []struct{ kwargs, prompt string }{
		{`{}`, tok.Piece(bos, true) + "[user]Hello<think>"},
		{`{"enable_thinking":false}`, tok.Piece(bos, true) + "[user]Hello/nothink<think>"},
	} {
		reply := expectedChat(t, m, c.prompt, 8)
		if strings.Contains(reply, "think>") {
			t.Fatalf("the model's reply %q contains a think tag; the test expects none", reply)
		}
		want := strings.Trim(reply, " \t\r\n")
		req := `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0,"chat_template_kwargs":` + c.kwargs
		resp, body := post(t, url+"/v1/chat/completions", req+`}`)
		var cc ChatCompletion
		if resp.StatusCode != 200 || json.Unmarshal(body, &cc) != nil || resp.Header.Get("X-Gguftool-Chat-Template") != "file:think.jinja" {
			t.Fatalf("%s: %d %s", c.kwargs, resp.StatusCode, body)
		}
		msg := cc.Choices[0].Message
		got := ""
		if msg.ReasoningContent != nil {
			got = *msg.ReasoningContent
		}
		if got != want || *msg.Content != "" {
			t.Errorf("%s: reasoning %q content %q, want reasoning %q (reply %q)", c.kwargs, got, *msg.Content, want, reply)
		}
		resp, body = post(t, url+"/v1/chat/completions", req+`,"stream":true}`)
		var streamed, content strings.Builder
		for _, e := range sse(t, body) {
			var ch ChatCompletion
			if e == "[DONE]" || json.Unmarshal([]byte(e), &ch) != nil {
				continue
			}
			if d := ch.Choices[0].Delta; d.ReasoningContent != nil {
				streamed.WriteString(*d.ReasoningContent)
			}
			if d := ch.Choices[0].Delta; d.Content != nil {
				content.WriteString(*d.Content)
			}
		}
		if resp.StatusCode != 200 || streamed.String() != want || content.String() != "" {
			t.Errorf("%s stream: reasoning %q content %q, want %q", c.kwargs, streamed.String(), content.String(), want)
		}
	}
}

// TestChatTemplateRequests: reasoning_effort, chat_template_kwargs and
// reasoning_content are checked, and a conversation the template refuses
// is a 400.
func TestChatTemplateRequests(t *testing.T) {
	m := testModel(t)
	cfg := testConfig(m)
	cfg.ChatTemplate, cfg.ChatTemplateName = `{% if messages[0].role == 'system' %}{{ raise_exception('no system prompts') }}{% endif %}`+
		`{{ reasoning_effort }}{% for m in messages %}{{ m.content }}{{ m.reasoning_content }}{% endfor %}`, "strict.jinja"
	url, _, _ := start(t, cfg)
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"messages":[{"role":"user","content":"a"}],"reasoning_effort":"high","max_tokens":1}`, 200, ""},
		{`{"messages":[{"role":"user","content":"a"}],"reasoning_effort":"extreme"}`, 400, "reasoning_effort"},
		{`{"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":[1]}`, 400, "chat_template_kwargs"},
		{`{"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":{"messages":1}}`, 400, "messages"},
		{`{"messages":[{"role":"system","content":"a"}]}`, 400, "no system prompts"},
		{`{"messages":[{"role":"user","content":"a","reasoning_content":"r"}]}`, 400, "assistant messages only"},
		{`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","reasoning_content":"r"},{"role":"user","content":"c"}],"max_tokens":1}`, 200, ""},
	} {
		resp, body := post(t, url+"/v1/chat/completions", c.body)
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d mentioning %q", c.body, resp.StatusCode, body, c.code, c.want)
		}
	}
}

// TestChatTemplateChoice: a model without a template gets ChatML; a
// template that cannot be evaluated stops New with the way out.
func TestChatTemplateChoice(t *testing.T) {
	c := synth.Defaults("qwen3moe")
	c.Type = gguf.TypeQ8_0
	c.Experts, c.ExpertsUsed = 16, 4
	kvs, tensors, err := c.Model()
	if err != nil {
		t.Fatal(err)
	}
	var kept []gguf.KV
	for _, kv := range kvs {
		if kv.Key != "tokenizer.chat_template" {
			kept = append(kept, kv)
		}
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(context.Background(), path, kept, tensors, gguf.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(context.Background(), path, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url, s, _ := start(t, testConfig(m))
	if s.ChatTemplate() != "builtin:chatml" {
		t.Errorf("template %s, want builtin:chatml", s.ChatTemplate())
	}
	want := expected(t, m, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", 6, 0, 0)
	_, body := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0}`)
	var cc ChatCompletion
	if json.Unmarshal(body, &cc) != nil || *cc.Choices[0].Message.Content != want {
		t.Errorf("builtin ChatML: %s, want %q", body, want)
	}

	cfg := testConfig(m)
	cfg.ChatTemplate, cfg.ChatTemplateName = "{% for m in messages %}{% include 'turn.jinja' %}{% endfor %}", "bad.jinja"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "include") || !strings.Contains(err.Error(), "--chat-template FILE") {
		t.Errorf("an include: %v, want an error naming it and --chat-template FILE", err)
	}
}
