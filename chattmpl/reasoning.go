package chattmpl

import (
	"strings"
)

// Format is how a model marks the reasoning in its replies.
type Format int

// The reasoning formats.
const (
	// FormatNone: the reply is all content.
	FormatNone Format = iota
	// FormatThink: reasoning between <think> and </think> before the
	// content (DeepSeek-R1/V3.1, Qwen3, GLM-4.5/4.6, Kimi-K2-Thinking).
	// The opening tag may be in the prompt already (DeepSeek-V3.1's
	// thinking mode ends the generation prompt with it).
	FormatThink
	// FormatHarmony: gpt-oss's channels, <|channel|>analysis<|message|>…<|end|>
	// for reasoning and <|channel|>final<|message|>… for the answer.
	FormatHarmony
)

func (f Format) String() string {
	switch f {
	case FormatThink:
		return "think"
	case FormatHarmony:
		return "harmony"
	}
	return "none"
}

// detectFormat reads the format from the markers a template writes.
func detectFormat(source string) Format {
	switch {
	case strings.Contains(source, "<|channel|>") && strings.Contains(source, "<|message|>"):
		return FormatHarmony
	case strings.Contains(source, thinkOpen):
		return FormatThink
	}
	return FormatNone
}

// The markers of the two formats.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"

	harmonyStart   = "<|start|>"
	harmonyChannel = "<|channel|>"
	harmonyMessage = "<|message|>"
	harmonyEnd     = "<|end|>"
	harmonyReturn  = "<|return|>"
	harmonyCall    = "<|call|>"
)

// Splitter splits a reply, as it is generated, into reasoning and
// content. It holds back text that could still become a marker, and the
// whitespace that separates the reasoning from the content, so a stream
// never sends what the finished reply would not contain.
type Splitter struct {
	format Format
	buf    string // text not yet classified
	state  splitState
	// pendingSpace is whitespace at the end of the reasoning, sent only if
	// more reasoning follows it.
	pendingSpace string
	// trimLead drops whitespace at the start of the current part.
	trimLead bool
	header   string // a harmony header read so far (the channel name)
}

type splitState int

const (
	stateContent   splitState = iota // text is content
	stateReasoning                   // text is reasoning
	stateHeader                      // harmony: reading a role or channel name up to <|message|>
	stateBetween                     // harmony: after a message's end, before the next header
)

// NewSplitter starts splitting a reply in format f to a prompt; the
// prompt says whether the reply begins inside the reasoning (the prompt
// ends with <think>).
func (t *Template) NewSplitter(prompt string) *Splitter {
	// Whitespace before a <think> the model opens is neither part: it is
	// held (and dropped) until the first text shows which part begins.
	s := &Splitter{format: t.format, trimLead: t.format == FormatThink}
	if t.format == FormatThink && strings.HasSuffix(strings.TrimRight(prompt, " \n"), thinkOpen) {
		s.state, s.trimLead = stateReasoning, true
	}
	return s
}

// Push adds generated text and returns the reasoning and content that
// can be sent now.
func (s *Splitter) Push(text string) (reasoning, content string) {
	if s.format == FormatNone {
		return "", text
	}
	s.buf += text
	var r, c strings.Builder
	for s.step(&r, &c, false) {
	}
	return r.String(), c.String()
}

// Flush returns what was held back once generation has ended.
func (s *Splitter) Flush() (reasoning, content string) {
	if s.format == FormatNone {
		return "", ""
	}
	var r, c strings.Builder
	for s.step(&r, &c, true) {
	}
	return r.String(), c.String()
}

// markers are the markers that change the state s is in.
func (s *Splitter) markers() []string {
	if s.format == FormatThink {
		if s.state == stateReasoning {
			return []string{thinkClose}
		}
		return []string{thinkOpen, thinkClose}
	}
	if s.state == stateHeader {
		return []string{harmonyMessage, harmonyEnd, harmonyReturn, harmonyCall, harmonyStart, harmonyChannel}
	}
	return []string{harmonyStart, harmonyChannel, harmonyEnd, harmonyReturn, harmonyCall}
}

// step consumes the buffer up to and including the next marker, writing
// what it classifies; it reports whether it consumed a marker. Without
// one it consumes all it safely can (everything, at the end).
func (s *Splitter) step(r, c *strings.Builder, final bool) bool {
	at, marker := -1, ""
	for _, m := range s.markers() {
		if i := strings.Index(s.buf, m); i >= 0 && (at < 0 || i < at) {
			at, marker = i, m
		}
	}
	if at < 0 {
		safe := len(s.buf)
		if !final {
			safe -= partialMarker(s.buf, s.markers())
		}
		s.emit(s.buf[:safe], r, c, final)
		s.buf = s.buf[safe:]
		return false
	}
	s.emit(s.buf[:at], r, c, true)
	s.buf = s.buf[at+len(marker):]
	s.transition(marker)
	return true
}

// partialMarker is the length of the longest suffix of text that is a
// proper prefix of a marker.
func partialMarker(text string, markers []string) int {
	n := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(text)); k > n; k-- {
			if strings.HasSuffix(text, m[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// emit writes text to the part the state says. ended says no more text
// of this part follows (a marker or the end of the reply comes next).
func (s *Splitter) emit(text string, r, c *strings.Builder, ended bool) {
	switch s.state {
	case stateHeader:
		s.header += text
		return
	case stateBetween:
		return
	}
	if s.trimLead {
		text = strings.TrimLeft(text, " \t\r\n")
		if text == "" {
			return
		}
		s.trimLead = false
	}
	if s.state == stateContent {
		c.WriteString(text)
		return
	}
	if s.format == FormatThink {
		// The whitespace before </think> is not part of the reasoning.
		text = s.pendingSpace + text
		body := strings.TrimRight(text, " \t\r\n")
		s.pendingSpace = text[len(body):]
		if ended {
			s.pendingSpace = ""
		}
		text = body
	}
	r.WriteString(text)
}

// transition moves to the state after marker.
func (s *Splitter) transition(marker string) {
	switch marker {
	case thinkOpen:
		s.state, s.trimLead = stateReasoning, true
	case thinkClose:
		s.state, s.trimLead, s.pendingSpace = stateContent, true, ""
	case harmonyStart, harmonyChannel:
		s.state, s.header = stateHeader, ""
	case harmonyMessage:
		// The channel is the header's first word; analysis is the
		// reasoning, anything else (final, commentary) is content.
		s.state, s.trimLead = stateContent, false
		if f := strings.Fields(s.header); len(f) > 0 && f[0] == "analysis" {
			s.state = stateReasoning
		}
	default: // the end of a harmony message
		s.state = stateBetween
	}
}

// Split splits a whole reply to prompt into its reasoning and content.
func (t *Template) Split(prompt, reply string) (reasoning, content string) {
	s := t.NewSplitter(prompt)
	r1, c1 := s.Push(reply)
	r2, c2 := s.Flush()
	return r1 + r2, c1 + c2
}
