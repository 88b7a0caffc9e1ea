package tokenizer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
)

// Token attributes: llama_token_attr bits.
const (
	attrUnknown     = 1 << 0
	attrUnused      = 1 << 1
	attrNormal      = 1 << 2
	attrControl     = 1 << 3
	attrUserDefined = 1 << 4
	attrByte        = 1 << 5
	attrLStrip      = 1 << 7
	attrRStrip      = 1 << 8

	attrSpecial = attrUnknown | attrControl // hidden unless special pieces are asked for
)

// attrOfType maps tokenizer.ggml.token_type values (llama_token_type) to
// attributes; other values are undefined (0).
var attrOfType = map[int64]uint16{
	1: attrNormal, 2: attrUnknown, 3: attrControl, 4: attrUserDefined, 5: attrUnused, 6: attrByte,
}

// noToken is LLAMA_TOKEN_NULL.
const noToken = -1

// spaceMark is SentencePiece's visible space, U+2581.
const spaceMark = "\u2581"

// Tokenizer converts between text and token ids. It is immutable and safe
// for concurrent use.
type Tokenizer struct {
	file  string // for messages
	model string // tokenizer.ggml.model
	pre   string // tokenizer.ggml.pre, "default" where a BPE file has none
	spm   bool   // SentencePiece, else byte-level BPE

	text   []string // token texts (an empty text reads as "[EMPTY_<id>]")
	scores []float32
	attrs  []uint16
	ids    map[string]int

	ranks        map[mergePair]int // BPE merge ranks
	steps        []splitStep       // BPE pre-tokenizer
	ignoreMerges bool

	addSpacePrefix, addBOS, addEOS, cleanSpaces bool
	bos, eos, unk                               int

	eog     []int    // end-of-generation ids, ascending
	special []int    // control, user-defined and unknown ids, longest text first
	pieces  []string // each token's piece with special tokens shown
}

type mergePair struct{ left, right string }

// tokMetadata reads the tokenizer keys with llama.cpp's exact type rules.
type tokMetadata struct {
	file   string
	lookup func(string) (gguf.Value, bool)
}

func (m tokMetadata) errorf(key, format string, args ...any) error {
	return fmt.Errorf("tokenizer: %s: %s: %s", m.file, key, fmt.Sprintf(format, args...))
}

// scalar returns key's value if present, failing unless it has type want.
func (m tokMetadata) scalar(key string, want gguf.ValueType) (gguf.Value, bool, error) {
	v, ok := m.lookup(key)
	if !ok {
		return v, false, nil
	}
	if v.Type() != want {
		return v, false, m.errorf(key, "has type %s, llama.cpp requires %s", v.Type(), want)
	}
	return v, true, nil
}

func (m tokMetadata) str(key string) (string, bool, error) {
	v, ok, err := m.scalar(key, gguf.ValueString)
	if !ok {
		return "", false, err
	}
	s, _ := v.Str()
	return s, true, nil
}

// flag sets *dst to key's value when present.
func (m tokMetadata) flag(key string, dst *bool) error {
	v, ok, err := m.scalar(key, gguf.ValueBool)
	if ok {
		*dst, _ = v.BoolValue()
	}
	return err
}

func (m tokMetadata) array(key string, elems ...gguf.ValueType) (gguf.Value, bool, error) {
	v, ok := m.lookup(key)
	if !ok {
		return v, false, nil
	}
	if v.Type() != gguf.ValueArray || !slices.Contains(elems, v.ElemType()) {
		return v, false, m.errorf(key, "has type %s of %s, llama.cpp requires an array of %v", v.Type(), v.ElemType(), elems)
	}
	return v, true, nil
}

// NewTokenizer reads the vocabulary of a GGUF file.
func New(f *gguf.File) (*Tokenizer, error) {
	return newTokenizer(tokMetadata{file: f.Name, lookup: f.Lookup})
}

func newTokenizer(m tokMetadata) (*Tokenizer, error) {
	if m.file == "" {
		m.file = "(unnamed GGUF)"
	}
	t := &Tokenizer{file: m.file, bos: noToken, eos: noToken, unk: noToken}
	model, ok, err := m.str("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, m.errorf("tokenizer.ggml.model", "missing: the file has no tokenizer")
	}
	t.model = model
	pre, _, err := m.str("tokenizer.ggml.pre")
	if err != nil {
		return nil, err
	}
	t.pre = pre

	switch model {
	case "llama":
		t.spm = true
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "gpt2":
		if err := t.choosePre(m); err != nil {
			return nil, err
		}
		if err := t.readMerges(m); err != nil {
			return nil, err
		}
	case "bert", "t5", "rwkv", "plamo2", "gemma4", "hybriddna", "whitespace", "none", "no_vocab":
		return nil, m.errorf("tokenizer.ggml.model", "%q is a tokenizer llama.cpp has but gguftool does not reproduce (only \"gpt2\" and \"llama\")", model)
	default:
		return nil, m.errorf("tokenizer.ggml.model", "unknown tokenizer %q", model)
	}
	if err := m.flag("tokenizer.ggml.add_space_prefix", &t.addSpacePrefix); err != nil {
		return nil, err
	}
	var removeExtraSpaces bool // read only for its type check: SPM tokenization ignores it
	if err := m.flag("tokenizer.ggml.remove_extra_whitespaces", &removeExtraSpaces); err != nil {
		return nil, err
	}
	if err := t.readTokens(m); err != nil {
		return nil, err
	}
	r, err := t.readSpecialIDs(m)
	if err != nil {
		return nil, err
	}
	t.markSpecialTokens(r)
	t.special = t.specialByLength()
	if err := t.buildPieces(); err != nil {
		return nil, err
	}
	if err := t.modelQuirks(m); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tokenizer) readMerges(m tokMetadata) error {
	const key = "tokenizer.ggml.merges"
	v, ok, err := m.array(key, gguf.ValueString)
	if err != nil {
		return err
	}
	if !ok {
		// llama.cpp lets a Kimi-K2 vocabulary go without merges: every
		// word is then cut into its characters.
		if preTokenizers[t.pre].noMerges {
			return nil
		}
		return m.errorf(key, "missing: a gpt2 tokenizer needs its BPE merges")
	}
	merges, _ := v.Strings()
	t.ranks = make(map[mergePair]int, len(merges))
	for i, s := range merges {
		// Split at the first space after the first byte; a merge without
		// one is the pair ("", ""), which never matches. The first rank of
		// a repeated pair stays.
		var p mergePair
		if len(s) > 1 {
			if j := strings.IndexByte(s[1:], ' '); j >= 0 {
				p = mergePair{s[:j+1], s[j+2:]}
			}
		}
		if _, dup := t.ranks[p]; !dup {
			t.ranks[p] = i
		}
	}
	return nil
}

func (t *Tokenizer) choosePre(m tokMetadata) error {
	p, ok := preTokenizers[t.pre]
	if !ok {
		if why, known := unsupportedPre[t.pre]; known {
			return m.errorf("tokenizer.ggml.pre", "pre-tokenizer %q (%s) is not reproduced by gguftool", t.pre, why)
		}
		return m.errorf("tokenizer.ggml.pre", "unknown pre-tokenizer %q", t.pre)
	}
	steps, err := compileSplitSteps(p.exprs)
	if err != nil {
		return fmt.Errorf("tokenizer: %s: pre-tokenizer %q: %w", m.file, t.pre, err)
	}
	if t.pre == "" {
		t.pre = "default"
	}
	t.steps, t.ignoreMerges = steps, p.ignoreMerges
	t.addBOS, t.cleanSpaces = p.addBOS, !p.keepSpaces
	t.bos, t.eos = 11, 11
	if p.noBOS {
		t.bos = noToken
	}
	return nil
}

func (t *Tokenizer) readTokens(m tokMetadata) error {
	const key = "tokenizer.ggml.tokens"
	v, ok, err := m.array(key, gguf.ValueString)
	if err != nil {
		return err
	}
	if !ok {
		return m.errorf(key, "missing: the file has no vocabulary")
	}
	text, _ := v.Strings()
	n := len(text)

	t.scores = make([]float32, n)
	if v, ok, err := m.array("tokenizer.ggml.scores", gguf.ValueFloat32, gguf.ValueInt32); err != nil {
		return err
	} else if ok {
		if v.Len() < n {
			return m.errorf("tokenizer.ggml.scores", "%d scores for %d tokens", v.Len(), n)
		}
		switch s := v.Interface().(type) {
		case []float32:
			copy(t.scores, s)
		case []int32:
			for i := range n {
				t.scores[i] = float32(s[i])
			}
		}
	}

	t.attrs = make([]uint16, n)
	if v, ok, err := m.array("tokenizer.ggml.token_type", gguf.ValueInt32); err != nil {
		return err
	} else if ok {
		if v.Len() < n {
			return m.errorf("tokenizer.ggml.token_type", "%d token types for %d tokens", v.Len(), n)
		}
		types := v.Interface().([]int32)
		for i := range n {
			t.attrs[i] = attrOfType[int64(types[i])]
		}
	} else {
		for i := range t.attrs {
			t.attrs[i] = attrNormal
		}
	}

	t.text = make([]string, n)
	t.ids = make(map[string]int, n)
	for i, s := range text {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if j, dup := t.ids[s]; dup {
			// llama.cpp asserts that texts are unique and aborts.
			return m.errorf(key, "tokens %d and %d have the same text %q", j, i, s)
		}
		t.text[i], t.ids[s] = s, i
	}
	return nil
}

// specialRoles are llama.cpp's special token ids, noToken where unset.
type specialRoles struct {
	bos, eos, eot, eom, unk, sep, pad, mask        int
	fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep int
}

// readSpecialIDs applies the *_token_id keys over the defaults (a default
// outside the vocabulary is dropped; a key outside it is ignored) and the
// add_bos/add_eos flags.
func (t *Tokenizer) readSpecialIDs(m tokMetadata) (*specialRoles, error) {
	r := &specialRoles{bos: t.bos, eos: t.eos, unk: t.unk, eot: noToken, eom: noToken, sep: noToken, pad: noToken,
		mask: noToken, fimPre: noToken, fimSuf: noToken, fimMid: noToken, fimPad: noToken, fimRep: noToken, fimSep: noToken}
	n := uint64(len(t.text))
	for _, k := range []struct {
		key string
		dst *int
	}{
		{"bos", &r.bos}, {"eos", &r.eos}, {"eot", &r.eot}, {"eom", &r.eom}, {"unknown", &r.unk},
		{"seperator", &r.sep}, {"padding", &r.pad}, {"mask", &r.mask},
		{"fim_pre", &r.fimPre}, {"fim_suf", &r.fimSuf}, {"fim_mid", &r.fimMid},
		{"fim_pad", &r.fimPad}, {"fim_rep", &r.fimRep}, {"fim_sep", &r.fimSep},
		{"prefix", &r.fimPre}, {"suffix", &r.fimSuf}, {"middle", &r.fimMid}, // deprecated spellings
	} {
		if *k.dst != noToken && uint64(*k.dst) >= n {
			*k.dst = noToken
		}
		key := "tokenizer.ggml." + k.key + "_token_id"
		v, ok, err := m.scalar(key, gguf.ValueUint32)
		if err != nil {
			return nil, err
		}
		if ok {
			if id, _ := v.Uint(); id < n {
				*k.dst = int(id)
			}
		}
	}
	t.bos, t.eos, t.unk = r.bos, r.eos, r.unk
	if err := m.flag("tokenizer.ggml.add_bos_token", &t.addBOS); err != nil {
		return nil, err
	}
	return r, m.flag("tokenizer.ggml.add_eos_token", &t.addEOS)
}

// The texts llama.cpp takes for roles the metadata leaves unset, and the
// texts that end generation (llama_vocab::impl::load).
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	eogTexts    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
		"<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
	alwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// markSpecialTokens finds the end-of-turn, end-of-message and fill-in-the-
// middle tokens the metadata leaves unset by their text, makes them
// control tokens, and collects the end-of-generation set, as llama.cpp
// does after reading the ids. Where several texts qualify for one role,
// llama.cpp takes the first in its hash map's order; this takes the
// lowest id.
func (t *Tokenizer) markSpecialTokens(r *specialRoles) {
	detect := func(id *int, texts []string) {
		if *id != noToken {
			return
		}
		for _, s := range texts {
			if i, ok := t.ids[s]; ok && (*id == noToken || i < *id) {
				*id = i
			}
		}
		if *id != noToken {
			t.attrs[*id] |= attrControl
		}
	}
	detect(&r.eot, eotTexts)
	detect(&r.eom, eomTexts)
	detect(&r.fimPre, fimPreTexts)
	detect(&r.fimSuf, fimSufTexts)
	detect(&r.fimMid, fimMidTexts)
	detect(&r.fimPad, fimPadTexts)
	detect(&r.fimRep, fimRepTexts)
	detect(&r.fimSep, fimSepTexts)

	eog := map[int]bool{}
	for _, id := range []int{r.fimPad, r.fimRep, r.fimSep} {
		if id != noToken {
			eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if i, ok := t.ids[s]; ok {
			eog[i] = true
			t.attrs[i] |= attrControl
		}
	}
	// gpt-oss: these render even when special tokens are hidden.
	for _, s := range alwaysRendered {
		if i, ok := t.ids[s]; ok {
			t.attrs[i] = attrUserDefined
		}
	}
	for _, id := range []int{r.eos, r.eot, r.eom} {
		if id != noToken {
			eog[id] = true
		}
	}
	inEOG := func(s string) (int, bool) {
		i, ok := t.ids[s]
		return i, ok && eog[i]
	}
	// gpt-oss (o200k_harmony) and solar-open: <|end|> does not end
	// generation there.
	_, ret := inEOG("<|return|>")
	_, call := inEOG("<|call|>")
	_, calls := inEOG("<|calls|>")
	_, flush := inEOG("<|flush|>")
	if end, ok := inEOG("<|end|>"); ok && (call || calls) && (ret || flush) {
		delete(eog, end)
		t.attrs[end] = attrUserDefined
	}
	// gemma4 and paddleocr: </s> does not end generation there.
	if _, ok := inEOG("<|tool_response>"); ok {
		if s, ok := inEOG("</s>"); ok {
			delete(eog, s)
			t.attrs[s] = attrNormal
		}
	}
	for id := range eog {
		t.eog = append(t.eog, id)
	}
	slices.Sort(t.eog)
}

// specialByLength is cache_special_tokens: the ids tokenizer_st_partition
// looks for, longest text first. The order among texts of equal length
// is the one libstdc++'s std::sort leaves, which decides overlapping
// matches.
func (t *Tokenizer) specialByLength() []int {
	var ids []int
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			ids = append(ids, id)
		}
	}
	introsort(ids, func(a, b int) bool { return len(t.text[a]) > len(t.text[b]) })
	return ids
}

// buildPieces is llama.cpp's token-to-piece cache: every token's text as
// it is written out, special tokens included. It fails where llama.cpp's
// loader throws.
func (t *Tokenizer) buildPieces() error {
	t.pieces = make([]string, len(t.text))
	for id, s := range t.text {
		a := t.attrs[id]
		switch {
		case a&(attrSpecial|attrUserDefined) != 0:
			t.pieces[id] = s
		case a&attrNormal != 0 && t.spm:
			t.pieces[id] = strings.ReplaceAll(s, spaceMark, " ")
		case a&attrNormal != 0:
			p, err := decodeByteText(s)
			if err != nil {
				return fmt.Errorf("tokenizer: %s: tokenizer.ggml.tokens: token %d: %v", t.file, id, err)
			}
			t.pieces[id] = p
		case a&attrByte != 0:
			if len(s) < 3 {
				return fmt.Errorf("tokenizer: %s: tokenizer.ggml.tokens: byte token %d %q is too short for <0xXX>", t.file, id, s)
			}
			t.pieces[id] = string([]byte{byte(hexPrefixValue(s[3:min(5, len(s))]))})
		}
	}
	return nil
}

// maxUnknownBytes bounds what the "[UNK_BYTE_…]" spellings of one token
// may add up to: each repeats the token's whole text, so a hostile token
// could otherwise ask for memory quadratic in its length.
const maxUnknownBytes = 1 << 20

// decodeByteText is llama_decode_text: GPT-2 byte characters back to
// bytes. A character that stands for no byte is written as
// "[UNK_BYTE_0x<its UTF-8 in hex><the whole text>]", as llama.cpp writes it.
// It fails where llama.cpp throws (a code point above U+10FFFF) and where
// those spellings would pass maxUnknownBytes.
func decodeByteText(s string) (string, error) {
	cpts := decodeCpts(s)
	unknown := 0
	for _, c := range cpts {
		if c > 0x10FFFF {
			return "", fmt.Errorf("code point U+%X is above U+10FFFF", c)
		}
		if c >= rune(len(runeByte)) || runeByte[c] < 0 {
			unknown++
		}
	}
	if unknown > 0 && unknown*(len(s)+32) > maxUnknownBytes {
		return "", fmt.Errorf("%d characters that stand for no byte, each spelt out with the whole %d-byte text", unknown, len(s))
	}
	var b []byte
	for _, c := range cpts {
		if c < rune(len(runeByte)) && runeByte[c] >= 0 {
			b = append(b, byte(runeByte[c]))
			continue
		}
		b = append(b, "[UNK_BYTE_0x"...)
		for _, u := range appendCpt(nil, c) {
			b = fmt.Appendf(b, "%02x", u)
		}
		b = append(b, s...)
		b = append(b, ']')
	}
	return string(b), nil
}

// hexPrefixValue is strtol(s, NULL, 16) on the (at most two) hex digits of
// a "<0xXX>" token: leading white space, a sign and a 0x prefix are
// accepted and parsing stops at the first non-digit.
func hexPrefixValue(s string) int {
	i := 0
	for i < len(s) && isCLocaleSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexDigitValue(s[i+2]) >= 0 {
		i += 2
	}
	v := 0
	for ; i < len(s) && hexDigitValue(s[i]) >= 0; i++ {
		v = v*16 + hexDigitValue(s[i])
	}
	if neg {
		v = -v
	}
	return v
}

func hexDigitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// isCLocaleSpace is isspace in the C locale.
func isCLocaleSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// modelQuirks sets the strip attributes llama.cpp gives some models'
// special tokens by model, architecture or pre-tokenizer name; they make
// tokenizer_st_partition eat white space around the token.
func (t *Tokenizer) modelQuirks(m tokMetadata) error {
	name, _, err := m.str("general.name")
	if err != nil {
		return err
	}
	arch, _, err := m.str("general.architecture")
	if err != nil {
		return err
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, name)
	containsAny := func(s string, subs ...string) bool {
		return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
	}
	set := func(text string, attr uint16, on, required bool) error {
		id, ok := t.ids[text]
		switch {
		case !ok && required:
			return fmt.Errorf("tokenizer: %s: general.name %q: llama.cpp requires a token %q for this model", t.file, name, text)
		case !ok:
		case on:
			t.attrs[id] |= attr
		default:
			t.attrs[id] &^= attr
		}
		return nil
	}
	switch {
	case containsAny(t.pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		return set("<mask>", attrLStrip, true, false)
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		if err := set("</s>", attrRStrip, true, true); err != nil {
			return err
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if err := set(s, attrRStrip, false, true); err != nil {
				return err
			}
		}
	case containsAny(name, "modern-bert"):
		return set("[MASK]", attrLStrip, true, false)
	}
	return nil
}

// Model is tokenizer.ggml.model: "gpt2" or "llama".
func (t *Tokenizer) Model() string { return t.model }

// Pre is the pre-tokenizer of a BPE vocabulary (tokenizer.ggml.pre, or
// "default" where the file has none); for SentencePiece it is the key's
// value, which the tokenizer does not use.
func (t *Tokenizer) Pre() string { return t.pre }

// Len is the number of tokens.
func (t *Tokenizer) Len() int { return len(t.text) }

// BOS is the beginning-of-sequence id, if the vocabulary has one.
func (t *Tokenizer) BOS() (int, bool) { return t.bos, t.bos != noToken }

// EOG lists the ids that end generation, ascending.
func (t *Tokenizer) EOG() []int { return slices.Clone(t.eog) }

// IsEOG reports whether id ends generation.
func (t *Tokenizer) IsEOG(id int) bool {
	_, ok := slices.BinarySearch(t.eog, id)
	return ok
}

// Piece is llama_token_to_piece with lstrip 0: the token's text as it is
// written out. Control and unknown tokens are empty unless special. An id
// outside the vocabulary, where llama.cpp throws, is empty.
func (t *Tokenizer) Piece(id int, special bool) string {
	if id < 0 || id >= len(t.text) || !special && t.attrs[id]&attrSpecial != 0 {
		return ""
	}
	return t.pieces[id]
}

// Decode is llama_detokenize: the pieces of ids joined. removeSpecial drops
// a leading BOS and trailing EOS the vocabulary adds itself;
// unparseSpecial writes control tokens out. SentencePiece vocabularies
// lose the space they put in front of the text, and the BPE vocabularies
// whose pre-tokenizer asks for it get llama.cpp's clean-up of spaces
// before punctuation and contractions.
func (t *Tokenizer) Decode(ids []int, removeSpecial, unparseSpecial bool) string {
	removeSpace := t.addSpacePrefix
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var b []byte
	for _, id := range ids {
		p := t.Piece(id, unparseSpecial)
		if removeSpace {
			p = strings.TrimPrefix(p, " ")
			removeSpace = false
		}
		b = append(b, p...)
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b)
}

// cleanSpaces is the clean_spaces pass of llama_detokenize, three in-place
// rewrites: drop the space before ? ! . , ; drop the spaces around a lone
// apostrophe; drop the space before 's 'm 're 've.
func cleanSpaces(b []byte) []byte {
	n := len(b)
	if n == 0 {
		return b
	}
	total := 1
	for i := 1; i < n; i++ {
		x := b[i]
		if b[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		b[total] = x
		total++
	}
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := b[i]
		if x == '\'' && i+1 < n && b[i-1] == ' ' && b[i+1] == ' ' {
			total--
			i++
			b[i] = 0
		}
		b[total] = x
		total++
	}
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := b[i]
		if b[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := b[i+1]
			switch {
			case x1 == 's' || x1 == 'm':
				total--
			case x1 != 't' && x1 != 'd' && i+2 < n:
				x2 := b[i+2]
				if x1 == 'r' && x2 == 'e' || x1 == 'v' && x2 == 'e' {
					total--
				}
			}
		}
		b[total] = x
		total++
	}
	return b[:total]
}
