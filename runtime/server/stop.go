package server

import (
	"strings"
	"unicode/utf8"

	"github.com/gguftool/gguftool/tokenizer"
)

// stopper turns generated tokens into text to send: it cuts the text at
// the first stop sequence, and holds back what could still become one
// (a suffix that is a stop sequence's prefix) or an incomplete UTF-8
// character, so a stream never sends text the final answer would not
// contain.
type stopper struct {
	tok   *tokenizer.Tokenizer
	stops []string
	// special writes control tokens out, for a chat template whose
	// reasoning markers may be control tokens (gpt-oss's channels).
	special bool
	ids     []int
	text    string
	sent    int
}

// push adds a token and returns the text that can be sent now, and
// whether a stop sequence ended the text.
func (s *stopper) push(id int) (string, bool) {
	s.ids = append(s.ids, id)
	s.text = s.tok.Decode(s.ids, false, s.special)
	cut := -1
	for _, stop := range s.stops {
		if i := strings.Index(s.text, stop); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		s.text = s.text[:cut]
		return s.take(max(cut, s.sent)), true
	}
	safe := len(s.text)
	for _, stop := range s.stops {
		for k := min(len(stop)-1, len(s.text)); k > 0; k-- {
			if strings.HasSuffix(s.text, stop[:k]) {
				safe = min(safe, len(s.text)-k)
				break
			}
		}
	}
	// An incomplete character at the end waits for the token that ends it.
	for i := safe - 1; i >= max(s.sent, safe-utf8.UTFMax); i-- {
		if utf8.RuneStart(s.text[i]) {
			if !utf8.FullRuneInString(s.text[i:safe]) {
				safe = i
			}
			break
		}
	}
	return s.take(safe), false
}

// flush returns whatever was held back once generation has ended.
func (s *stopper) flush() string { return s.take(len(s.text)) }

func (s *stopper) take(end int) string {
	if end <= s.sent {
		return ""
	}
	out := s.text[s.sent:end]
	s.sent = end
	return out
}
