package tokenizer

// A small backtracking matcher for the pre-tokenizer expressions that
// llama.cpp hands to std::regex (ECMAScript grammar, libstdc++'s
// depth-first executor): ordered alternation, greedy quantifiers,
// lookahead. It works on "units": either llama.cpp's collapsed text, one
// byte per code point with \p{…} classes folded to the bytes 0xD0–0xD5, or
// the code points themselves (std::wregex). Only the syntax those
// expressions use is accepted; anything else is a compile error, so an
// unexpected expression fails loudly instead of splitting differently.

import (
	"fmt"
	"strings"
)

type reOp uint8

const (
	reClass  reOp = iota // one unit from a set
	reConcat             // subs in order
	reAlt                // the first sub that lets the rest match
	reRepeat             // sub, min…max times (max < 0: unbounded), greedy
	reLook               // lookahead: sub must (neg: must not) match here
	reEnd                // $: the end of the range
)

type reNode struct {
	op       reOp
	set      *reSet
	subs     []*reNode
	min, max int
	neg      bool
}

// reSet is a bracket expression or class escape. Membership below 256 is a
// bitmap; ranges above it are kept as they are.
type reSet struct {
	low    [4]uint64
	high   [][2]rune
	negate bool
	also   *reSet // if set, a unit must be in it too
}

func (s *reSet) addRange(lo, hi rune) {
	for c := lo; c <= hi && c < 256; c++ {
		s.low[c>>6] |= 1 << (c & 63)
	}
	if hi >= 256 {
		s.high = append(s.high, [2]rune{max(lo, 256), hi})
	}
}

func (s *reSet) has(c rune) bool {
	in := false
	if c >= 0 && c < 256 {
		in = s.low[c>>6]&(1<<(c&63)) != 0
	} else {
		for _, r := range s.high {
			if c >= r[0] && c <= r[1] {
				in = true
				break
			}
		}
	}
	return in != s.negate && (s.also == nil || s.also.has(c))
}

// addEscape adds the C-locale class of \s, \d or \w (the locale llama.cpp
// runs std::regex in). It reports whether e names such a class.
func (s *reSet) addEscape(e rune) bool {
	switch e {
	case 's':
		s.addRange('\t', '\r')
		s.addRange(' ', ' ')
	case 'd':
		s.addRange('0', '9')
	case 'w':
		s.addRange('0', '9')
		s.addRange('A', 'Z')
		s.addRange('a', 'z')
		s.addRange('_', '_')
	default:
		return false
	}
	return true
}

// reParser turns an expression, as units, into a tree.
type reParser struct {
	src []rune
	pos int
}

func compileRegex(units []rune) (*reNode, error) {
	p := &reParser{src: units}
	n, err := p.alternation()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.src) {
		return nil, p.errorf("unexpected %q", p.src[p.pos])
	}
	return n, nil
}

func (p *reParser) errorf(format string, args ...any) error {
	return fmt.Errorf("regex %q at %d: %s", string(p.src), p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) peek(c rune) bool { return p.pos < len(p.src) && p.src[p.pos] == c }

func (p *reParser) alternation() (*reNode, error) {
	var alts []*reNode
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if !p.peek('|') {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &reNode{op: reAlt, subs: alts}, nil
}

func (p *reParser) sequence() (*reNode, error) {
	var items []*reNode
	for p.pos < len(p.src) && !p.peek('|') && !p.peek(')') {
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		if atom.op != reLook && atom.op != reEnd {
			if atom, err = p.quantified(atom); err != nil {
				return nil, err
			}
		}
		items = append(items, atom)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	// (?=[a])[b] is one unit in both sets: one class, so repetitions of it
	// take the fast path.
	if len(items) == 2 && items[0].op == reLook && !items[0].neg && items[0].subs[0].op == reClass && items[1].op == reClass {
		both := *items[1].set
		both.also = items[0].subs[0].set
		return &reNode{op: reClass, set: &both}, nil
	}
	return &reNode{op: reConcat, subs: items}, nil
}

func (p *reParser) atom() (*reNode, error) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '(':
		n := &reNode{op: reConcat}
		if p.peek('?') {
			if p.pos+1 >= len(p.src) {
				return nil, p.errorf("unterminated group")
			}
			switch p.src[p.pos+1] {
			case ':':
			case '=', '!':
				n = &reNode{op: reLook, neg: p.src[p.pos+1] == '!'}
			default:
				return nil, p.errorf("unsupported group (?%c", p.src[p.pos+1])
			}
			p.pos += 2
		}
		sub, err := p.alternation()
		if err != nil {
			return nil, err
		}
		if !p.peek(')') {
			return nil, p.errorf("missing )")
		}
		p.pos++
		if n.op == reLook {
			n.subs = []*reNode{sub}
			return n, nil
		}
		return sub, nil
	case '[':
		return p.bracket()
	case '$':
		return &reNode{op: reEnd}, nil
	case '\\':
		s := &reSet{}
		if p.pos >= len(p.src) {
			return nil, p.errorf("trailing backslash")
		}
		e := p.src[p.pos]
		p.pos++
		switch e {
		case 'S', 'D', 'W':
			s.addEscape(e - 'A' + 'a')
			s.negate = true
		case 'b', 'B', 'p', 'P', 'x', 'u', 'c', 'k':
			return nil, p.errorf(`unsupported escape \%c`, e)
		default:
			if !s.addEscape(e) {
				lit := controlEscape(e)
				if e >= '1' && e <= '9' {
					return nil, p.errorf("backreferences are not supported")
				}
				s.addRange(lit, lit)
			}
		}
		return &reNode{op: reClass, set: s}, nil
	case '^', '.', '*', '+', '?', '{', '}', ')', ']':
		return nil, p.errorf("unsupported or misplaced %q", c)
	}
	s := &reSet{}
	s.addRange(c, c)
	return &reNode{op: reClass, set: s}, nil
}

// controlEscape maps \r, \n, \t, \v, \f and \0 to their characters; any
// other escaped character stands for itself (identity escape).
func controlEscape(e rune) rune {
	switch e {
	case 'r':
		return '\r'
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'v':
		return '\v'
	case 'f':
		return '\f'
	case '0':
		return 0
	}
	return e
}

func (p *reParser) bracket() (*reNode, error) {
	s := &reSet{}
	if p.peek('^') {
		s.negate = true
		p.pos++
	}
	first := true
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("missing ]")
		}
		if p.peek(']') && !first {
			p.pos++
			return &reNode{op: reClass, set: s}, nil
		}
		first = false
		lo, class, err := p.classAtom(s)
		if err != nil {
			return nil, err
		}
		if class {
			continue
		}
		if p.peek('-') && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hiClass, err := p.classAtom(s)
			if err != nil {
				return nil, err
			}
			if hiClass || hi < lo {
				return nil, p.errorf("bad range")
			}
			s.addRange(lo, hi)
			continue
		}
		s.addRange(lo, lo)
	}
}

// classAtom reads one bracket member: a character (returned) or a class
// escape (added to s, class true).
func (p *reParser) classAtom(s *reSet) (c rune, class bool, err error) {
	c = p.src[p.pos]
	p.pos++
	if c != '\\' {
		return c, false, nil
	}
	if p.pos >= len(p.src) {
		return 0, false, p.errorf("trailing backslash")
	}
	e := p.src[p.pos]
	p.pos++
	switch e {
	case 'S', 'D', 'W', 'p', 'P', 'x', 'u', 'c':
		return 0, false, p.errorf(`unsupported escape \%c in brackets`, e)
	case 'b':
		return '\b', false, nil
	}
	if s.addEscape(e) {
		return 0, true, nil
	}
	return controlEscape(e), false, nil
}

func (p *reParser) quantified(atom *reNode) (*reNode, error) {
	if p.pos >= len(p.src) {
		return atom, nil
	}
	n := &reNode{op: reRepeat, subs: []*reNode{atom}}
	switch p.src[p.pos] {
	case '*':
		n.min, n.max = 0, -1
	case '+':
		n.min, n.max = 1, -1
	case '?':
		n.min, n.max = 0, 1
	case '{':
		p.pos++
		lo, ok := p.number()
		if !ok {
			return nil, p.errorf("bad {n,m}")
		}
		n.min, n.max = lo, lo
		if p.peek(',') {
			p.pos++
			n.max = -1
			if hi, ok := p.number(); ok {
				n.max = hi
			}
		}
		if !p.peek('}') || (n.max >= 0 && n.max < n.min) {
			return nil, p.errorf("bad {n,m}")
		}
	default:
		return atom, nil
	}
	p.pos++
	if p.peek('?') {
		return nil, p.errorf("lazy quantifiers are not supported")
	}
	return n, nil
}

func (p *reParser) number() (int, bool) {
	start, v := p.pos, 0
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' && v < 1<<20 {
		v = v*10 + int(p.src[p.pos]-'0')
		p.pos++
	}
	return v, p.pos > start
}

// reMatcher runs a tree over units[..end].
type reMatcher struct {
	in  []rune
	end int
}

// match reports whether n matches at pos followed by whatever k accepts;
// k gets the position after n. Alternatives and repetition counts are
// tried in ECMAScript's priority order and the first success wins.
func (m *reMatcher) match(n *reNode, pos int, k func(int) bool) bool {
	switch n.op {
	case reClass:
		return pos < m.end && n.set.has(m.in[pos]) && k(pos+1)
	case reConcat:
		return m.sequence(n.subs, pos, k)
	case reAlt:
		for _, s := range n.subs {
			if m.match(s, pos, k) {
				return true
			}
		}
		return false
	case reRepeat:
		if n.subs[0].op == reClass {
			return m.repeatClass(n, pos, k)
		}
		return m.repeat(n, 0, pos, k)
	case reLook:
		if m.match(n.subs[0], pos, func(int) bool { return true }) == n.neg {
			return false
		}
		return k(pos)
	case reEnd:
		return pos == m.end && k(pos)
	}
	return false
}

func (m *reMatcher) sequence(subs []*reNode, pos int, k func(int) bool) bool {
	if len(subs) == 0 {
		return k(pos)
	}
	return m.match(subs[0], pos, func(p int) bool { return m.sequence(subs[1:], p, k) })
}

// repeatClass is repeat for a one-unit body, without recursion: take as
// many as allowed, then give back one at a time.
func (m *reMatcher) repeatClass(n *reNode, pos int, k func(int) bool) bool {
	set, count := n.subs[0].set, 0
	for pos+count < m.end && (n.max < 0 || count < n.max) && set.has(m.in[pos+count]) {
		count++
	}
	for ; count >= n.min; count-- {
		if k(pos + count) {
			return true
		}
	}
	return false
}

// repeat tries one more iteration before stopping (greedy); an iteration
// that consumes nothing once min is reached is refused, as ECMAScript
// requires.
func (m *reMatcher) repeat(n *reNode, count, pos int, k func(int) bool) bool {
	if n.max < 0 || count < n.max {
		more := m.match(n.subs[0], pos, func(p int) bool {
			return (p != pos || count < n.min) && m.repeat(n, count+1, p, k)
		})
		if more {
			return true
		}
	}
	return count >= n.min && k(pos)
}

// find returns the leftmost non-empty match in [from, m.end).
func (m *reMatcher) find(re *reNode, from int) (start, end int, ok bool) {
	for start = from; start < m.end; start++ {
		end = -1
		if m.match(re, start, func(p int) bool {
			if p == start {
				return false
			}
			end = p
			return true
		}) {
			return start, end, true
		}
	}
	return 0, 0, false
}

// collapseRegex rewrites an expression that uses \p{…} classes for the
// collapsed text, as unicode_regex_split does: each known class becomes
// its collapsed byte plus its ASCII members, bracketed unless it already
// sits inside brackets. The result is returned as byte units.
func collapseRegex(expr string) ([]rune, error) {
	for i := 0; i < len(expr); i++ {
		if expr[i] >= 0x80 {
			return nil, fmt.Errorf("regex %q mixes unicode categories and non-ASCII characters", expr)
		}
	}
	var out []rune
	emit := func(s string) {
		for i := 0; i < len(s); i++ {
			out = append(out, rune(s[i]))
		}
	}
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			out = append(out, '[')
			inside = true
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			out = append(out, ']')
			inside = false
			continue
		}
		if c == '\\' && i+3 < len(expr) && expr[i+1] == 'p' && expr[i+2] == '{' {
			if j := strings.IndexByte(expr[i+3:], '}'); j >= 0 && i+3+j <= i+10 {
				if cat, ok := unicodeClasses[expr[i:i+3+j+1]]; ok {
					if !inside {
						out = append(out, '[')
					}
					out = append(out, rune(collapsedByte[cat]))
					emit(collapsedASCII[cat])
					if !inside {
						out = append(out, ']')
					}
					i += 3 + j
					continue
				}
			}
		}
		out = append(out, rune(c))
	}
	return out, nil
}

// The \p{…} classes llama.cpp collapses, with the flag each stands for
// (every letter subclass counts as a letter).
var unicodeClasses = map[string]uint16{
	`\p{N}`: cptNumber, `\p{L}`: cptLetter, `\p{P}`: cptPunct, `\p{M}`: cptMark, `\p{S}`: cptSymbol,
	`\p{Lu}`: cptLetter, `\p{Ll}`: cptLetter, `\p{Lt}`: cptLetter, `\p{Lm}`: cptLetter, `\p{Lo}`: cptLetter,
}

// usesUnicodeClass reports whether an expression needs the collapsed text.
func usesUnicodeClass(expr string) bool {
	for name := range unicodeClasses {
		if strings.Contains(expr, name) {
			return true
		}
	}
	return false
}

// collapsedByte is the byte a non-ASCII code point of each category
// becomes in the collapsed text; other categories become 0xD0.
var collapsedByte = map[uint16]byte{
	cptNumber: 0xD1, cptLetter: 0xD2, cptPunct: 0xD3, cptMark: 0xD4, cptSymbol: 0xD5,
}

// collapsedASCII is the bracket content for a category's ASCII members.
var collapsedASCII = map[uint16]string{
	cptNumber: `0-9`,
	cptLetter: `A-Za-z`,
	cptPunct:  `!-#%-*,-/:-;?-@\[-\]_\{\}`,
	cptMark:   ``,
	cptSymbol: `\$\+<->^` + "`" + `\|\~`,
}

// collapse maps code points to collapsed units: ASCII stays, whitespace
// becomes \v, a category with a collapsed byte becomes that byte, and the
// rest 0xD0.
func collapse(cpts []rune) []rune {
	out := make([]rune, len(cpts))
	for i, c := range cpts {
		switch {
		case c >= 0 && c < 128:
			out[i] = c
		default:
			f := cptFlags(c)
			if f&cptWhitespace != 0 {
				out[i] = '\v'
			} else if b, ok := collapsedByte[f&cptCategories]; ok {
				out[i] = rune(b)
			} else {
				out[i] = 0xD0
			}
		}
	}
	return out
}

// widen is the text std::wregex sees: the code points, with non-ASCII
// whitespace turned into \v because its \s knows only ASCII.
func widen(cpts []rune) []rune {
	out := make([]rune, len(cpts))
	for i, c := range cpts {
		out[i] = c
		if c > 0x7F && cptFlags(c)&cptWhitespace != 0 {
			out[i] = '\v'
		}
	}
	return out
}
