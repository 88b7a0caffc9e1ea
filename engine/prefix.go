package engine

import (
	"fmt"
	"slices"
)

// Prefix is a session's state after its first positions: what a new
// session whose prompt begins with the same tokens can start from instead
// of evaluating them again (a shared system prompt, a chat's history).
// It holds a copy, so the session it came from goes on unaffected.
type Prefix struct {
	tokens          []int
	k, v, conv, ssm [][]float32
	recurrent       bool // some layer keeps a recurrent state: only the whole prefix is reusable
	bytes           int64
}

// Prefix copies the session's state; tokens must be the tokens it has
// evaluated, in order.
func (s *Session) Prefix(tokens []int) (*Prefix, error) {
	if len(tokens) != s.n {
		return nil, fmt.Errorf("engine: a prefix of %d tokens from a session at position %d", len(tokens), s.n)
	}
	p := &Prefix{tokens: slices.Clone(tokens)}
	clone := func(src [][]float32) [][]float32 {
		out := make([][]float32, len(src))
		for i, b := range src {
			out[i] = slices.Clone(b)
			p.bytes += 4 * int64(len(b))
		}
		return out
	}
	p.k, p.v, p.conv, p.ssm = clone(s.k), clone(s.v), clone(s.conv), clone(s.ssm)
	for _, st := range s.ssm {
		p.recurrent = p.recurrent || st != nil
	}
	p.bytes += 8 * int64(len(tokens))
	return p, nil
}

// Tokens are the prefix's tokens (not to be changed).
func (p *Prefix) Tokens() []int { return p.tokens }

// Bytes is the memory the prefix holds.
func (p *Prefix) Bytes() int64 { return p.bytes }

// Reusable is how many leading tokens of prompt a session resumed from p
// can skip. Attention keys and values of a position depend only on the
// tokens up to it, so any common leading run is reusable; a recurrent
// state is reusable only whole, when all of p begins prompt. At least one
// token of the prompt is always left to evaluate, for its logits.
func (p *Prefix) Reusable(prompt []int) int {
	n := 0
	for n < len(p.tokens) && n < len(prompt) && p.tokens[n] == prompt[n] {
		n++
	}
	n = min(n, len(prompt)-1)
	if p.recurrent && n != len(p.tokens) {
		return 0
	}
	return max(n, 0)
}

// ResumeSession starts a session of ctxLen positions (the model's context
// when 0) from the first keep positions of p, as if it had evaluated
// them: keep must be at most p.Reusable of the prompt it will continue.
func (m *Model) ResumeSession(p *Prefix, keep, ctxLen int) (*Session, error) {
	switch {
	case keep < 0 || keep > len(p.tokens):
		return nil, fmt.Errorf("engine: resume %d positions of a prefix of %d", keep, len(p.tokens))
	case p.recurrent && keep != len(p.tokens) && keep != 0:
		return nil, fmt.Errorf("engine: a recurrent state resumes only whole: %d of %d positions", keep, len(p.tokens))
	case len(p.k) != m.Hparams.Layers:
		return nil, fmt.Errorf("engine: a prefix of another model")
	}
	s, err := m.NewSession(ctxLen)
	if err != nil {
		return nil, err
	}
	if keep > s.ctxLen {
		return nil, &ContextError{Have: 0, Add: keep, Max: s.ctxLen}
	}
	if keep == 0 {
		return s, nil
	}
	rows := func(b []float32) []float32 {
		if b == nil {
			return nil
		}
		return slices.Clone(b[:len(b)/len(p.tokens)*keep])
	}
	for il := range s.k {
		s.k[il], s.v[il] = rows(p.k[il]), rows(p.v[il])
		s.conv[il], s.ssm[il] = slices.Clone(p.conv[il]), slices.Clone(p.ssm[il])
	}
	s.n = keep
	return s, nil
}
