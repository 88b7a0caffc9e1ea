// Package chattmpl renders chat conversations with a model's own Jinja
// chat template (the GGUF's tokenizer.chat_template, or a file the user
// names) and splits a generated reply back into its content and its
// reasoning.
//
// A template is parsed once, by Parse, which also renders a few probe
// conversations so that a construct the evaluator lacks is an error at
// start-up rather than on the first request. Rendering follows
// @huggingface/jinja (the implementation transformers.js uses), which the
// tests compare against byte for byte on the real templates of
// DeepSeek-V3.1, Kimi-K2, GLM-4.6, gpt-oss and Qwen3: where that
// implementation departs from Python Jinja (strip, lstrip and rstrip
// ignore their argument and trim JavaScript whitespace), chattmpl follows
// it. The evaluator underneath is github.com/ardanlabs/jinja; docs/server.md
// says why.
package chattmpl

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // system, user or assistant (what the template sees)
	Content string
	// Reasoning is an assistant turn's reasoning, nil when the turn has
	// none. Templates read it under two names: reasoning_content (Qwen3,
	// GLM) and thinking (gpt-oss); both are set.
	Reasoning *string
}

// Options are the per-request inputs of a rendering besides the messages.
type Options struct {
	// AddGenerationPrompt ends the prompt where the assistant's reply
	// begins.
	AddGenerationPrompt bool
	// Vars are further template variables: reasoning_effort (gpt-oss),
	// enable_thinking or thinking (Qwen3, DeepSeek-V3.1, GLM), whatever a
	// request's chat_template_kwargs carry. Values are JSON values as
	// encoding/json decodes them (string, float64, bool, nil, []any,
	// map[string]any); a name the renderer sets itself is refused.
	Vars map[string]any
}

// Template is a parsed chat template, safe for concurrent use.
type Template struct {
	name     string
	compiled *jinja.Template
	bos, eos string
	format   Format
	// now is the clock strftime_now reads; tests fix it.
	now func() time.Time
}

// WayOut is what every error about a template that cannot be used tells
// the user to do.
const WayOut = "pass --chat-template FILE with a template this server can evaluate"

// reserved are the variables the renderer sets; Options.Vars may not.
var reserved = map[string]bool{
	"messages": true, "add_generation_prompt": true, "bos_token": true, "eos_token": true,
	"raise_exception": true, "strftime_now": true, stripCutset: true,
}

// Parse compiles source, named name in errors (such as "tokenizer.chat_template"
// or a file name), with bos and eos as the template's bos_token and
// eos_token. A template that does not compile, or fails on the probe
// conversations other than through its own raise_exception, is an error
// naming the construct and line where the evaluator says them, and WayOut.
func Parse(name, source, bos, eos string) (*Template, error) {
	compiled, err := jinja.Compile(rewriteStrip(source))
	if err != nil {
		return nil, &ParseError{Name: name, Why: err.Error()}
	}
	t := &Template{name: name, compiled: compiled, bos: bos, eos: eos, format: detectFormat(source), now: time.Now}
	for i, probe := range probes() {
		for _, gen := range []bool{true, false} {
			_, err := t.Render(probe, Options{AddGenerationPrompt: gen})
			var raised *RaisedError
			if err != nil && !errors.As(err, &raised) {
				return nil, &ParseError{Name: name, Why: fmt.Sprintf("cannot evaluate it (probe conversation %d): %v", i+1, err)}
			}
		}
	}
	return t, nil
}

// probes are the conversations Parse renders: the shapes every request
// takes (one user turn; a system prompt and a finished exchange with and
// without reasoning), so that what a template does for them is known to
// evaluate.
func probes() [][]Message {
	thought := "Greeting back."
	return [][]Message{
		{{Role: "user", Content: "Hello"}},
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"},
			{Role: "assistant", Content: "Hi."}, {Role: "user", Content: "Again"}},
		{{Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi.", Reasoning: &thought}},
	}
}

// ParseError is a template Parse refuses: Why names the construct (and
// its line where the evaluator says it).
type ParseError struct{ Name, Why string }

func (e *ParseError) Error() string {
	return fmt.Sprintf("chat template %s: %s; %s", e.Name, e.Why, WayOut)
}

// Name is what the template was called when parsed.
func (t *Template) Name() string { return t.name }

// Format is how the template's model marks its reasoning in a reply.
func (t *Template) Format() Format { return t.format }

// RaisedError is a template's own raise_exception: the conversation is
// one the template refuses (a role order it does not accept, say), not a
// construct the evaluator lacks.
type RaisedError struct{ Message string }

func (e *RaisedError) Error() string {
	return "the chat template refused the conversation: " + e.Message
}

// Render renders msgs into a prompt.
func (t *Template) Render(msgs []Message, o Options) (string, error) {
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		dict := d.AsDict()
		dict.Set("role", jinja.NewString(m.Role))
		dict.Set("content", jinja.NewString(m.Content))
		if m.Reasoning != nil {
			dict.Set("reasoning_content", jinja.NewString(*m.Reasoning))
			dict.Set("thinking", jinja.NewString(*m.Reasoning))
		}
		list[i] = d
	}
	data := map[string]jinja.Value{}
	for k, v := range o.Vars {
		if reserved[k] {
			return "", fmt.Errorf("template variable %q is set by the server and cannot be passed", k)
		}
		data[k] = value(v)
	}
	data["messages"] = jinja.NewList(list)
	data["add_generation_prompt"] = jinja.NewBool(o.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(t.bos)
	data["eos_token"] = jinja.NewString(t.eos)
	data[stripCutset] = jinja.NewString(jsWhitespace)
	var raised *RaisedError
	data["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := ""
		if len(args) > 0 {
			msg = args[0].String()
			if args[0].IsString() {
				msg = args[0].AsString()
			}
		}
		raised = &RaisedError{Message: msg}
		return jinja.Undefined(), raised
	})
	now := t.now()
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(Strftime(now, args[0].AsString())), nil
	})
	out, err := t.compiled.RenderValues(data)
	if err != nil {
		// The evaluator may wrap or flatten the callable's error; the
		// callable having run is what says the template raised it.
		if raised != nil {
			return "", raised
		}
		return "", fmt.Errorf("chat template %s: %v", t.name, err)
	}
	return out, nil
}

// value converts a decoded JSON value for the template. Whole numbers
// become integers, as JavaScript prints them without a fraction.
func value(v any) jinja.Value {
	switch x := v.(type) {
	case float64:
		if x == float64(int64(x)) {
			return jinja.NewInt(int64(x))
		}
		return jinja.NewFloat(x)
	case []any:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			items[i] = value(e)
		}
		return jinja.NewList(items)
	case map[string]any:
		// Sorted, so that a template iterating the mapping sees one order.
		d := jinja.NewDict()
		for _, k := range slices.Sorted(maps.Keys(x)) {
			d.AsDict().Set(k, value(x[k]))
		}
		return d
	}
	return jinja.FromGoValue(v)
}

// Strftime formats t with the strftime directives chat templates use
// (%Y %m %d %b %B %H %M %%), as @huggingface/jinja does; anything else is
// copied as it stands.
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		switch format[i+1] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			continue
		}
		i++
	}
	return b.String()
}
