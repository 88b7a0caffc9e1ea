package chattmpl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The reference is @huggingface/jinja as node-llama-cpp@3.21.1 (installed
// by scripts/llamacpp/install.sh) pins it.
const referenceVersion = "0.5.11"

// corpusNow is the clock both sides' strftime_now read.
var corpusNow = time.Date(2026, 1, 15, 10, 4, 0, 0, time.UTC)

// referenceDir finds the install holding @huggingface/jinja and node, or
// skips the test (fails it when GGUFTOOL_REQUIRE_LLAMACPP=1).
func referenceDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GGUFTOOL_LLAMACPP_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".cache", "llamacpp")
	}
	why := ""
	pkg, err := os.ReadFile(filepath.Join(dir, "node_modules", "@huggingface", "jinja", "package.json"))
	var meta struct{ Version string }
	switch {
	case err != nil:
		why = fmt.Sprintf("@huggingface/jinja is not installed in %s (run scripts/llamacpp/install.sh, or set $GGUFTOOL_LLAMACPP_DIR)", dir)
	case json.Unmarshal(pkg, &meta) != nil || meta.Version != referenceVersion:
		why = fmt.Sprintf("@huggingface/jinja in %s is version %q, want %s", dir, meta.Version, referenceVersion)
	}
	if _, err := exec.LookPath("node"); why == "" && err != nil {
		why = "node is not on $PATH"
	}
	if why != "" {
		if os.Getenv("GGUFTOOL_REQUIRE_LLAMACPP") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return dir
}

// corpusCase is one rendering: a template, its variables, the clock.
type corpusCase struct {
	Template string         `json:"template"`
	Vars     map[string]any `json:"vars"`
	Now      string         `json:"now"`
}

// referenceResult is the reference's rendering or its error.
type referenceResult struct {
	Out   *string `json:"out"`
	Error *string `json:"error"`
}

// texts are the message texts the corpus draws from: empty, unicode,
// whitespace at either end (which strip and friends see), quotes and
// Jinja syntax (which must stay text), think tags and harmony channel
// markers (which templates look for in content).
var texts = []string{
	"Hello", "", "héllo wörld — ü 日本語 🎉", "line one\nline two\n", "  padded both sides  ",
	"\n\nleading newlines", "trailing newlines\n\n", "\u00a0no-break\u3000ideographic\u00a0",
	"<think>inner thought</think>the answer", "before</think>after", "a'b\"c\\d",
	"{{ not a tag }} {% neither %}", "What is 2+2?", "tab\tseparated", "<|channel|>final<|message|>leak",
	"ends with a space ", "\ufeffbyte order mark",
}

// genConversation draws a conversation: an optional system prompt, 1..4
// user turns with assistant replies between them (with and without
// reasoning), sometimes a final assistant turn, and sometimes an odd role
// order that some templates refuse.
func genConversation(r *rand.Rand) []Message {
	pick := func() string { return texts[r.IntN(len(texts))] }
	var msgs []Message
	if r.IntN(2) == 0 {
		msgs = append(msgs, Message{Role: "system", Content: pick()})
	}
	turns := 1 + r.IntN(4)
	for k := range turns {
		msgs = append(msgs, Message{Role: "user", Content: pick()})
		if k < turns-1 || r.IntN(4) == 0 {
			m := Message{Role: "assistant", Content: pick()}
			if r.IntN(2) == 0 {
				reasoning := pick()
				m.Reasoning = &reasoning
			}
			msgs = append(msgs, m)
		}
	}
	switch r.IntN(12) {
	case 0:
		r.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	case 1:
		msgs = append(msgs, Message{Role: "user", Content: pick()}, Message{Role: "user", Content: pick()})
	case 2:
		msgs = append(msgs, Message{Role: "system", Content: pick()})
	}
	return msgs
}

// genVars draws the extras: none, enable_thinking, thinking or
// reasoning_effort, sometimes two at once.
func genVars(r *rand.Rand) map[string]any {
	v := map[string]any{}
	for range 1 + r.IntN(2) {
		switch r.IntN(5) {
		case 1:
			v["enable_thinking"] = r.IntN(2) == 0
		case 2:
			v["thinking"] = r.IntN(2) == 0
		case 3:
			v["reasoning_effort"] = []string{"low", "medium", "high"}[r.IntN(3)]
		case 4:
			v["model_identity"] = texts[r.IntN(len(texts))]
		}
	}
	return v
}

// templateFiles reads testdata/templates.
func templateFiles(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	if err != nil || len(files) != 5 {
		t.Fatalf("testdata/templates: %v %d files, want the 5 real templates", err, len(files))
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = string(b)
	}
	return out
}

// messageVars is how the reference receives messages: the same
// dictionaries Render builds.
func messageVars(msgs []Message) []map[string]any {
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		d := map[string]any{"role": m.Role, "content": m.Content}
		if m.Reasoning != nil {
			d["reasoning_content"], d["thinking"] = *m.Reasoning, *m.Reasoning
		}
		out[i] = d
	}
	return out
}

// TestReferenceCorpus renders a seeded corpus of conversations with the
// five real templates and requires the bytes @huggingface/jinja renders,
// or an error where it errs.
func TestReferenceCorpus(t *testing.T) {
	dir := referenceDir(t)
	templates := templateFiles(t)
	names := make([]string, 0, len(templates))
	for n := range templates {
		names = append(names, n)
	}
	sort.Strings(names)
	type ours struct {
		msgs []Message
		opts Options
		bos  string
	}
	var cases []corpusCase
	var inputs []ours
	r := rand.New(rand.NewPCG(15, 2026))
	tokens := [][2]string{{"<s>", "</s>"}, {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}, {"", ""}}
	for range 300 {
		msgs := genConversation(r)
		opts := Options{AddGenerationPrompt: r.IntN(3) != 0, Vars: genVars(r)}
		tok := tokens[r.IntN(len(tokens))]
		for _, name := range names {
			vars := map[string]any{"messages": messageVars(msgs), "add_generation_prompt": opts.AddGenerationPrompt,
				"bos_token": tok[0], "eos_token": tok[1]}
			for k, v := range opts.Vars {
				vars[k] = v
			}
			cases = append(cases, corpusCase{Template: name, Vars: vars, Now: corpusNow.Format(time.RFC3339)})
			inputs = append(inputs, ours{msgs, opts, tok[0] + "\x00" + tok[1]})
		}
	}
	ref := runReference(t, dir, templates, cases)
	parsed := map[string]*Template{}
	failures, errs := 0, 0
	for i, c := range cases {
		key := c.Template + "\x00" + inputs[i].bos
		tmpl := parsed[key]
		if tmpl == nil {
			bos, eos, _ := strings.Cut(inputs[i].bos, "\x00")
			var err error
			if tmpl, err = Parse(c.Template, templates[c.Template], bos, eos); err != nil {
				t.Fatal(err)
			}
			tmpl.now = func() time.Time { return corpusNow }
			parsed[key] = tmpl
		}
		got, err := tmpl.Render(inputs[i].msgs, inputs[i].opts)
		want := ref[i]
		ok := false
		switch {
		case want.Error != nil:
			errs++
			ok = err != nil
		case err == nil:
			ok = got == *want.Out
		}
		if !ok {
			failures++
			if failures <= 5 {
				b, _ := json.Marshal(c.Vars)
				t.Errorf("%s case %d: vars %s\n got  %q (err %v)\n want %q (err %v)", c.Template, i, b, got, err, deref(want.Out), deref(want.Error))
			}
		}
	}
	if failures > 0 {
		t.Fatalf("%d of %d renderings differ from @huggingface/jinja", failures, len(cases))
	}
	if errs == 0 {
		t.Error("the corpus made no template raise an error; it no longer tests that errors agree")
	}
	t.Logf("%d renderings equal @huggingface/jinja %s byte for byte (%d of them errors on both sides)", len(cases), referenceVersion, errs)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// runReference renders cases with testdata/render.mjs.
func runReference(t *testing.T, dir string, templates map[string]string, cases []corpusCase) []referenceResult {
	t.Helper()
	in, err := json.Marshal(map[string]any{"templates": templates, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "render.mjs"), abs)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node render.mjs: %v\n%s", err, stderr.String())
	}
	var res []referenceResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("render.mjs answered %d results (%v), want %d", len(res), err, len(cases))
	}
	return res
}

// TestParseErrors: a template the evaluator cannot run is refused at
// Parse, naming the construct and the way out; one that raises for an
// odd conversation is accepted, and the raise is a RaisedError.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"hello\n{% include 'other.jinja' %}", `line 2: unknown statement "include"`},
		{"{{ messages | nosuchfilter }}", `unknown filter "nosuchfilter"`},
		{"{% for m in messages %}{{ m.content }}", "unclosed for block"},
	} {
		_, err := Parse("t.jinja", c.src, "", "")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--chat-template FILE") {
			t.Errorf("%q: error %v, want one containing %q and --chat-template FILE", c.src, err, c.want)
		}
	}
	src := "{% if messages[0].role == 'system' %}{{ raise_exception('no system prompts') }}{% endif %}{{ messages[0].content }}"
	tmpl, err := Parse("t.jinja", src, "", "")
	if err != nil {
		t.Fatalf("a template that raises only for system prompts: %v", err)
	}
	_, err = tmpl.Render([]Message{{Role: "system", Content: "x"}}, Options{})
	var raised *RaisedError
	if !errors.As(err, &raised) || raised.Message != "no system prompts" {
		t.Errorf("render: %v, want the template's raise", err)
	}
	if _, err := tmpl.Render([]Message{{Role: "user"}}, Options{Vars: map[string]any{"messages": 1}}); err == nil {
		t.Error("a variable named messages was accepted")
	}
}

// TestRewriteStrip: the rewrite touches only strip calls in tags.
func TestRewriteStrip(t *testing.T) {
	for _, c := range [][2]string{
		{`{{ x.strip('\n') }}`, `{{ x.strip(` + stripCutset + `) }}`},
		{`{%- set y = a.lstrip() + b.rstrip(")") -%}`, `{%- set y = a.lstrip(` + stripCutset + `) + b.rstrip(` + stripCutset + `) -%}`},
		{`text .strip('x') {# c.strip() #}`, `text .strip('x') {# c.strip() #}`},
		{`{{ '.strip(1)' }}{{ x.stripped(1) }}`, `{{ '.strip(1)' }}{{ x.stripped(1) }}`},
		{`{% raw %}{{ x.strip() }}{% endraw %}`, `{% raw %}{{ x.strip() }}{% endraw %}`},
		{`{{ x.strip(`, `{{ x.strip(`},
	} {
		if got := rewriteStrip(c[0]); got != c[1] {
			t.Errorf("%q: got %q, want %q", c[0], got, c[1])
		}
	}
}
