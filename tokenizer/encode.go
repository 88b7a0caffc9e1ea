package tokenizer

// Encoding: special-token partitioning (tokenizer_st_partition), then the
// BPE session (llm_tokenizer_bpe_session) or the SentencePiece session
// (llm_tokenizer_spm_session) on each stretch of plain text.

import (
	"slices"
	"strings"
)

// textFragment is a stretch of text still to tokenize, or a special token
// already found in it (tok ≥ 0).
type textFragment struct {
	tok  int
	text string
}

// Encode is llama_tokenize: text to ids. addSpecial adds the BOS and EOS
// tokens the vocabulary asks for; parseSpecial lets control tokens be
// written in the text (user-defined tokens always are).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	var frags []textFragment
	if text != "" {
		frags = t.partition([]textFragment{{tok: noToken, text: text}}, parseSpecial)
	}
	var out []int
	if addSpecial && t.addBOS && t.bos != noToken {
		out = append(out, t.bos)
	}
	prevSpecial := true // SentencePiece: a space goes in front of the text and after each special token
	for _, f := range frags {
		if f.tok != noToken {
			out = append(out, f.tok)
			prevSpecial = true
			continue
		}
		if !t.spm {
			for _, w := range preTokenize(f.text, t.steps, true) {
				out = t.bpeWord(w, out)
			}
			continue
		}
		s := f.text
		if t.addSpacePrefix && prevSpecial {
			s = " " + s
		}
		out = t.spmText(strings.ReplaceAll(s, " ", spaceMark), out)
		prevSpecial = false
	}
	if addSpecial && t.addEOS && t.eos != noToken {
		out = append(out, t.eos)
	}
	return out
}

// partition cuts the special tokens out of the text, longest first; each
// token splits every text textFragment at its leftmost non-overlapping
// occurrences. Control and unknown tokens count only when parseSpecial.
// Tokens marked lstrip/rstrip take the C-locale white space beside them.
func (t *Tokenizer) partition(frags []textFragment, parseSpecial bool) []textFragment {
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&attrSpecial != 0 {
			continue
		}
		tok := t.text[id]
		if !slices.ContainsFunc(frags, func(f textFragment) bool { return f.tok == noToken && strings.Contains(f.text, tok) }) {
			continue
		}
		var next []textFragment
		for _, f := range frags {
			if f.tok != noToken || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, tok)
				if i < 0 {
					if rest != "" {
						next = append(next, textFragment{tok: noToken, text: rest})
					}
					break
				}
				left := rest[:i]
				if a&attrLStrip != 0 {
					left = strings.TrimRightFunc(left, func(r rune) bool { return r < 0x80 && isCLocaleSpace(byte(r)) })
				}
				if left != "" {
					next = append(next, textFragment{tok: noToken, text: left})
				}
				next = append(next, textFragment{tok: id})
				rest = rest[i+len(tok):]
				if a&attrRStrip != 0 {
					rest = strings.TrimLeftFunc(rest, func(r rune) bool { return r < 0x80 && isCLocaleSpace(byte(r)) })
				}
			}
		}
		frags = next
	}
	return frags
}

// mergeSymbol is a stretch of the text being merged, linked to its neighbours.
type mergeSymbol struct {
	start, n   int // bytes of the word or text
	prev, next int
}

// splitSymbols cuts s into UTF-8 characters by their lead bytes, as
// llama.cpp does, without checking the continuation bytes. The symbols
// are counted first: sized by bytes, the slice of a long word of
// two-byte characters (spaces, byte-encoded) would be twice too large.
func splitSymbols(s string) []mergeSymbol {
	n := 0
	for off := 0; off < len(s); n++ {
		off += min(utf8SeqLen(s[off]), len(s)-off)
	}
	syms := make([]mergeSymbol, 0, n)
	for off := 0; off < len(s); {
		n := min(utf8SeqLen(s[off]), len(s)-off)
		syms = append(syms, mergeSymbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// mergeCandidate is a candidate merge of two adjacent symbols. Whether
// it is still as queued is told by size alone: a symbol only grows, by
// taking in its right neighbour, so while both sides are whole their
// combined length is unchanged exactly when neither has merged since
// (which llama.cpp's BPE checks by comparing the joined text).
type mergeCandidate struct {
	left, right int
	rank        int     // BPE: lower first
	score       float32 // SentencePiece: higher first
	size        int     // the merged length, to spot stale entries
}

// mergeQueue orders candidates as llama.cpp's priority queues do: by
// rank (BPE) or score (SentencePiece), then leftmost first. It is a
// binary heap of the candidates themselves rather than container/heap,
// whose Push and Pop box every candidate: a word of a million spaces
// queues a million of them.
type mergeQueue struct {
	items []mergeCandidate
	spm   bool
}

func (q *mergeQueue) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	if q.spm {
		if a.score != b.score {
			return a.score > b.score
		}
	} else if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.left < b.left
}

func (q *mergeQueue) push(c mergeCandidate) {
	q.items = append(q.items, c)
	for i := len(q.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

func (q *mergeQueue) pop() mergeCandidate {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	for i := 0; ; {
		l, best := 2*i+1, i
		if l < last && q.less(l, best) {
			best = l
		}
		if r := l + 1; r < last && q.less(r, best) {
			best = r
		}
		if best == i {
			break
		}
		q.items[i], q.items[best] = q.items[best], q.items[i]
		i = best
	}
	return top
}

// mergeSymbols pops candidates best first and joins each pair that is
// still as it was queued (neither side merged since), then
// offers the joined symbol's new neighbour pairs to add.
func mergeSymbols(syms []mergeSymbol, q *mergeQueue, add func(l, r int)) {
	for len(q.items) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		add(l.prev, b.left)
		add(b.left, l.next)
	}
}

// bpeWord merges one pre-tokenized word by merge rank and appends its ids.
// A piece that is not a token falls back to its single bytes, each looked
// up as a one-byte text and dropped when there is none, as llama.cpp does.
func (t *Tokenizer) bpeWord(w string, out []int) []int {
	if id, ok := t.ids[w]; ok && t.ignoreMerges {
		return append(out, id)
	}
	syms := splitSymbols(w)
	text := func(i int) string { return w[syms[i].start : syms[i].start+syms[i].n] }
	// Sized for the first candidates (one per adjacent pair) so that
	// queuing them does not copy the slice over and over as it grows.
	q := &mergeQueue{items: make([]mergeCandidate, 0, len(syms))}
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		if rank, ok := t.ranks[mergePair{text(l), text(r)}]; ok {
			q.push(mergeCandidate{left: l, right: r, rank: rank, size: syms[l].n + syms[r].n})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	mergeSymbols(syms, q, add)
	for i := range syms {
		if syms[i].n == 0 {
			continue
		}
		s := text(i)
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			if id, ok := t.ids[s[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// spmText merges one stretch of text (spaces already ▁) by piece score
// and appends its ids. Every merge makes a token, so a final mergeSymbol that
// is not one is a single character: it is written as byte tokens.
func (t *Tokenizer) spmText(s string, out []int) []int {
	syms := splitSymbols(s)
	q := &mergeQueue{spm: true, items: make([]mergeCandidate, 0, len(syms))}
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		start, n := syms[l].start, syms[l].n+syms[r].n
		if id, ok := t.ids[s[start:start+n]]; ok {
			q.push(mergeCandidate{left: l, right: r, score: t.scores[id], size: n})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	mergeSymbols(syms, q, add)
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		piece := s[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			out = t.appendByte(out, piece[j])
		}
	}
	return out
}

// appendByte is byte_to_token for SentencePiece: the <0xXX> token, else a
// token whose text is the byte itself. llama.cpp throws when there is
// neither; the unknown token stands in here, or nothing.
func (t *Tokenizer) appendByte(out []int, b byte) []int {
	const hex = "0123456789ABCDEF"
	if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
		return append(out, id)
	}
	if id, ok := t.ids[string([]byte{b})]; ok {
		return append(out, id)
	}
	if t.unk != noToken {
		return append(out, t.unk)
	}
	return out
}
