package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gguftool/gguftool/chattmpl"
)

// responder writes one generation as a JSON response or as server-sent
// events.
type responder struct {
	s       *Server
	w       http.ResponseWriter
	rl      *reqLog
	id      string
	object  string
	chat    bool
	p       params
	started bool
	// split, when the template marks reasoning, divides the reply into
	// reasoning and content.
	split     *chattmpl.Splitter
	reasoning strings.Builder
	text      strings.Builder
	tokens    []tokenInfo
	offset    int
}

func (o *responder) created() int64 { return time.Now().Unix() }

// piece handles new text; an error says the client did not take it.
func (o *responder) piece(ev event) error {
	reasoning, text := o.divide(ev.text, false)
	if !o.p.stream {
		o.reasoning.WriteString(reasoning)
		o.text.WriteString(text)
		o.tokens = append(o.tokens, ev.tokens...)
		return nil
	}
	if err := o.start(); err != nil {
		return err
	}
	if text == "" && reasoning == "" && o.p.logprobs < 0 {
		return nil
	}
	return o.send(o.chunk(reasoning, text, ev.tokens, nil, nil))
}

// divide splits new text into reasoning and content; last adds what the
// splitter held back.
func (o *responder) divide(text string, last bool) (reasoning, content string) {
	if o.split == nil {
		return "", text
	}
	reasoning, content = o.split.Push(text)
	if last {
		r, c := o.split.Flush()
		reasoning, content = reasoning+r, content+c
	}
	return reasoning, content
}

// start writes the stream's headers and, for chat, the role delta.
func (o *responder) start() error {
	if o.started {
		return nil
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	if !o.chat {
		return nil
	}
	empty := ""
	return o.send(&ChatCompletion{ID: o.id, Object: "chat.completion.chunk", Created: o.created(), Model: o.s.cfg.ModelName,
		SystemFingerprint: "gguftool", Choices: []ChatChoice{{Delta: &ChatOut{Role: "assistant", Content: &empty}}}})
}

// send writes one event of the stream and flushes it; an error says the
// client did not take it within the write timeout, or is gone.
func (o *responder) send(v any) error {
	b, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(o.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return http.NewResponseController(o.w).Flush()
}

// chunk is one streamed piece; finish and usage are set on the last.
// reasoning is the chat reply's reasoning in it, if any.
func (o *responder) chunk(reasoning, text string, toks []tokenInfo, finish *string, usage *Usage) any {
	if o.chat {
		c := ChatChoice{Delta: &ChatOut{}, FinishReason: finish, Logprobs: o.chatLogprobs(toks)}
		if reasoning != "" {
			c.Delta.ReasoningContent = &reasoning
		}
		if text != "" || finish == nil && reasoning == "" {
			c.Delta.Content = &text
		}
		return &ChatCompletion{ID: o.id, Object: "chat.completion.chunk", Created: o.created(), Model: o.s.cfg.ModelName,
			SystemFingerprint: "gguftool", Choices: []ChatChoice{c}, Usage: usage}
	}
	return &Completion{ID: o.id, Object: "text_completion", Created: o.created(), Model: o.s.cfg.ModelName,
		Choices: []CompletionChoice{{Text: text, FinishReason: finish, Logprobs: o.completionLogprobs(toks)}}, Usage: usage}
}

func (o *responder) finish(ev event) {
	if ev.err != nil {
		e := &APIError{Status: 500, Type: "server_error", Message: ev.err.Error()}
		if errors.Is(ev.err, context.DeadlineExceeded) || errors.Is(ev.err, context.Canceled) {
			e = o.s.stopped(ev)
		}
		o.rl.attrs = append(o.rl.attrs, "completion_tokens", ev.usage.CompletionTokens)
		switch {
		case e.Status == statusClientClosed:
			// No one is left to read an answer.
			o.rl.clientClosed = true
			o.rl.attrs = append(o.rl.attrs, "error", e.Message)
		case o.started:
			o.rl.attrs = append(o.rl.attrs, "error", e.Message)
			o.send(map[string]*APIError{"error": e})
		default:
			writeError(o.w, o.rl, e)
		}
		return
	}
	o.rl.attrs = append(o.rl.attrs, "completion_tokens", ev.usage.CompletionTokens, "finish", ev.finish)
	finish := ev.finish
	usage := ev.usage
	reasoning, last := o.divide(ev.text, true)
	if o.p.stream {
		// A write the client does not take leaves nothing to do but stop.
		if o.start() == nil && o.send(o.chunk(reasoning, last, ev.tokens, &finish, &usage)) == nil {
			fmt.Fprint(o.w, "data: [DONE]\n\n")
			http.NewResponseController(o.w).Flush()
		}
		return
	}
	o.reasoning.WriteString(reasoning)
	o.text.WriteString(last)
	o.tokens = append(o.tokens, ev.tokens...)
	text := o.text.String()
	if o.chat {
		out := &ChatOut{Role: "assistant", Content: &text}
		if r := o.reasoning.String(); r != "" {
			out.ReasoningContent = &r
		}
		writeJSON(o.w, &ChatCompletion{ID: o.id, Object: "chat.completion", Created: o.created(), Model: o.s.cfg.ModelName,
			SystemFingerprint: "gguftool", Usage: &usage, Choices: []ChatChoice{{
				Message: out, FinishReason: &finish, Logprobs: o.chatLogprobs(o.tokens)}}})
		return
	}
	writeJSON(o.w, &Completion{ID: o.id, Object: "text_completion", Created: o.created(), Model: o.s.cfg.ModelName, Usage: &usage,
		Choices: []CompletionChoice{{Text: text, FinishReason: &finish, Logprobs: o.completionLogprobs(o.tokens)}}})
}

func (o *responder) completionLogprobs(toks []tokenInfo) *CompletionLogprobs {
	if o.p.logprobs < 0 {
		return nil
	}
	lp := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, t := range toks {
		piece := o.s.tok.Piece(t.id, true)
		lp.Tokens = append(lp.Tokens, piece)
		lp.TokenLogprobs = append(lp.TokenLogprobs, t.logprob)
		top := map[string]float64{}
		for _, a := range t.top {
			top[o.s.tok.Piece(int(a[0]), true)] = a[1]
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, o.offset)
		o.offset += len(piece)
	}
	return lp
}

func (o *responder) chatLogprobs(toks []tokenInfo) *ChatLogprobs {
	if o.p.logprobs < 0 {
		return nil
	}
	c := &ChatLogprobs{Content: []TokenLogprob{}}
	for _, t := range toks {
		piece := o.s.tok.Piece(t.id, true)
		tl := TokenLogprob{Token: piece, Logprob: t.logprob, Bytes: byteInts(piece), TopLogprobs: []TopAlternate{}}
		for _, a := range t.top {
			p := o.s.tok.Piece(int(a[0]), true)
			tl.TopLogprobs = append(tl.TopLogprobs, TopAlternate{Token: p, Logprob: a[1], Bytes: byteInts(p)})
		}
		c.Content = append(c.Content, tl)
	}
	return c
}

func byteInts(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}
