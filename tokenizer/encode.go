package tokenizer

// Encoding: special-token partitioning (tokenizer_st_partition), then the
// BPE session (llm_tokenizer_bpe_session) or the SentencePiece session
// (llm_tokenizer_spm_session) on each stretch of plain text.

import (
	"container/heap"
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
// llama.cpp does, without checking the continuation bytes.
func splitSymbols(s string) []mergeSymbol {
	syms := make([]mergeSymbol, 0, len(s))
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

// mergeCandidate is a candidate merge of two adjacent symbols.
type mergeCandidate struct {
	left, right int
	rank        int     // BPE: lower first
	score       float32 // SentencePiece: higher first
	size        int     // SentencePiece: the merged length, to spot stale entries
	text        string  // BPE: the merged text, to spot stale entries
}

// mergeQueue orders candidates as llama.cpp's priority queues do: by
// rank (BPE) or score (SentencePiece), then leftmost first.
type mergeQueue struct {
	items []mergeCandidate
	spm   bool
}

func (q *mergeQueue) Len() int { return len(q.items) }
func (q *mergeQueue) Less(i, j int) bool {
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
func (q *mergeQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *mergeQueue) Push(x any)    { q.items = append(q.items, x.(mergeCandidate)) }
func (q *mergeQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// mergeSymbols pops candidates best first and joins each pair that is
// still as it was queued (stale says when a side has changed since), then
// offers the joined symbol's new neighbour pairs to add.
func mergeSymbols(syms []mergeSymbol, q *mergeQueue, add func(l, r int), stale func(mergeCandidate) bool) {
	for q.Len() > 0 {
		b := heap.Pop(q).(mergeCandidate)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || stale(b) {
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
	q := &mergeQueue{}
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		lt, rt := text(l), text(r)
		if rank, ok := t.ranks[mergePair{lt, rt}]; ok {
			heap.Push(q, mergeCandidate{left: l, right: r, rank: rank, text: lt + rt})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	mergeSymbols(syms, q, add, func(b mergeCandidate) bool { return text(b.left)+text(b.right) != b.text })
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
	q := &mergeQueue{spm: true}
	add := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		start, n := syms[l].start, syms[l].n+syms[r].n
		if id, ok := t.ids[s[start:start+n]]; ok {
			heap.Push(q, mergeCandidate{left: l, right: r, score: t.scores[id], size: n})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(i-1, i)
	}
	mergeSymbols(syms, q, add, func(b mergeCandidate) bool { return syms[b.left].n+syms[b.right].n != b.size })
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
