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
	// model made the state. Its weights (with the resident tier chosen at
	// Open), not its shape, decide every key, value and recurrent state,
	// and neither its metadata digest nor its layer count tells two
	// models of one shape apart: a prefix resumes only in the model that
	// made it.
	model     *Model
	tokens    []int
	state     []layerState // copies, outside the Go heap like a session's
	recurrent bool         // some layer keeps a recurrent state: only the whole prefix is reusable
	bytes     int64
}

// Prefix copies the session's state; tokens must be the tokens it has
// evaluated, in order.
func (s *Session) Prefix(tokens []int) (*Prefix, error) {
	if len(tokens) != s.n {
		return nil, fmt.Errorf("engine: a prefix of %d tokens from a session at position %d", len(tokens), s.n)
	}
	p := &Prefix{model: s.m, tokens: slices.Clone(tokens), state: make([]layerState, len(s.state))}
	for i := range s.state {
		if err := p.state[i].copyOf(&s.state[i], s.n); err != nil {
			p.Free()
			return nil, err
		}
		st := &p.state[i]
		p.recurrent = p.recurrent || st.rec != nil
		p.bytes += st.bytes()
	}
	p.bytes += 8 * int64(len(tokens))
	return p, nil
}

// Free returns the prefix's memory now rather than when it is no longer
// reachable; it may not be resumed from afterwards.
func (p *Prefix) Free() {
	for i := range p.state {
		p.state[i].free()
	}
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
	case p.model != m:
		return nil, otherModelError(p.model, m)
	case keep < 0 || keep > len(p.tokens):
		return nil, fmt.Errorf("engine: resume %d positions of a prefix of %d", keep, len(p.tokens))
	case p.recurrent && keep != len(p.tokens) && keep != 0:
		return nil, fmt.Errorf("engine: a recurrent state resumes only whole: %d of %d positions", keep, len(p.tokens))
	}
	s, err := m.NewSession(ctxLen)
	if err != nil {
		return nil, err
	}
	if keep > s.ctxLen {
		s.Close()
		return nil, &ContextError{Have: 0, Add: keep, Max: s.ctxLen}
	}
	if keep == 0 {
		return s, nil
	}
	for il := range s.state {
		src, dst := &p.state[il], &s.state[il]
		if src.k.Type() != dst.k.Type() || src.v.Type() != dst.v.Type() {
			s.Close()
			return nil, fmt.Errorf("engine: a prefix cached in %s/%s resumed into a session caching %s/%s", src.k.Type(), src.v.Type(), dst.k.Type(), dst.v.Type())
		}
		dst.free()
		if err := dst.copyOf(src, keep); err != nil {
			s.Close()
			return nil, err
		}
		dst.k.SetLimit(s.ctxLen)
		dst.v.SetLimit(s.ctxLen)
	}
	s.n = keep
	return s, nil
}

// otherModelError refuses a prefix that another model made, naming both.
func otherModelError(made, m *Model) error {
	var how string
	switch {
	case made == nil:
		how = "no session" // a zero Prefix
	case made.Path == m.Path:
		how = m.Path + " opened separately"
	default:
		how = "another model, " + made.Path
	}
	return fmt.Errorf("engine: a prefix made by %s resumed in %s: a prefix resumes only in the model that made it", how, m.Path)
}
