package synth

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gguftool/gguftool/gguf"
)

// Token types (llama_token_type).
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// Special tokens, placed right after the byte tokens and the merges.
const (
	tokEndOfText = "<|endoftext|>"
	tokImStart   = "<|im_start|>"
	tokImEnd     = "<|im_end|>"
)

// corpus is the text the tiny BPE trainer learns its merges from: some
// English and some code, so prompts of either kind tokenize into
// multi-byte tokens.
const corpus = `The quick brown fox jumps over the lazy dog. A mixture of experts model routes each token to a few of its experts, and only those experts are read for that token. The experts live on a fast disk while the model is served, and the router chooses which of them are needed for every layer of the network.
Large language models are stored in files of many gigabytes. Each tensor is stored as a sequence of blocks, and each block holds a scale and a set of small integers. When the model runs, the weights are read from memory, multiplied with the activations, and the result is passed to the next layer.
func main() {
	for i := 0; i < 10; i++ {
		fmt.Println("hello, world", i)
	}
}
def forward(self, x):
    return self.down(self.act(self.gate(x)) * self.up(x))
The answer is 42. There are 1024 tokens in the context, and the time is 12:30.
Quantization stores each weight in fewer bits: eight, six, five or four bits per weight, with a scale for every block of thirty-two or two hundred and fifty-six weights. The smaller the file, the faster it streams from the disk, but the larger the error it adds to the output of the model.
{"model": "qwen3moe", "messages": [{"role": "user", "content": "Hello! How are you today?"}], "max_tokens": 64, "stream": true}
if err != nil {
	return fmt.Errorf("read %s at offset %d: %w", name, off, err)
}
`

var pretokenize = regexp.MustCompile(`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+`)

// byteToUnicode is GPT-2's bytes_to_unicode: printable bytes map to
// themselves, the others to code points from 256 up.
func byteToUnicode() [256]rune {
	var m [256]rune
	used := [256]bool{}
	for b := '!'; b <= '~'; b++ {
		used[b] = true
	}
	for b := '¡'; b <= '¬'; b++ {
		used[b] = true
	}
	for b := '®'; b <= 'ÿ'; b++ {
		used[b] = true
	}
	n := rune(0)
	for b := range 256 {
		if used[b] {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}

// vocabulary is a GPT-2 style byte-level BPE vocabulary, or a
// SentencePiece one (spm).
type vocabulary struct {
	tokens []string
	types  []int32
	merges []string
	eos    uint32 // <|endoftext|>, also bos and padding; SentencePiece: </s>

	spm      bool
	scores   []float32
	bos, unk uint32
}

// metadata is the vocabulary's tokenizer.ggml.* keys; pre names the BPE
// pre-tokenizer.
func (v *vocabulary) metadata(pre string) []gguf.KV {
	if v.spm {
		return []gguf.KV{
			{Key: "tokenizer.ggml.model", Value: gguf.String("llama")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.Array(v.tokens)},
			{Key: "tokenizer.ggml.scores", Value: gguf.Array(v.scores)},
			{Key: "tokenizer.ggml.token_type", Value: gguf.Array(v.types)},
			{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(v.bos)},
			{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(v.eos)},
			{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32(v.unk)},
			{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(true)},
			{Key: "tokenizer.ggml.add_eos_token", Value: gguf.Bool(false)},
			{Key: "tokenizer.ggml.add_space_prefix", Value: gguf.Bool(true)},
		}
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.String("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.String(pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Array(v.tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Array(v.types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.Array(v.merges)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32(v.eos)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32(v.eos)},
		{Key: "tokenizer.ggml.padding_token_id", Value: gguf.Uint32(v.eos)},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.Bool(false)},
	}
}

// buildVocab makes a vocabulary of exactly n tokens: the 256 byte tokens
// (id = byte value), up to n−259 merges learned from the corpus, the
// three special tokens, then <|reserved_N|> control tokens.
func buildVocab(n int) (*vocabulary, error) {
	const specials = 3
	if n < 256+specials {
		return nil, fmt.Errorf("synth: vocabulary of %d tokens is too small (need at least %d)", n, 256+specials)
	}
	b2u := byteToUnicode()
	v := &vocabulary{}
	have := map[string]bool{}
	for b := range 256 {
		s := string(b2u[b])
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, tokenNormal)
		have[s] = true
	}

	counts := map[string]int{}
	for _, w := range pretokenize.FindAllString(corpus, -1) {
		counts[w]++
	}
	words := splitWords(counts, func(w string) []string {
		syms := make([]string, len(w))
		for i := range len(w) {
			syms[i] = string(b2u[w[i]])
		}
		return syms
	})
	for len(v.merges) < n-256-specials {
		a, b, ok := mergeBest(words)
		if !ok {
			break // every word is one token
		}
		v.merges = append(v.merges, a+" "+b)
		if merged := a + b; !have[merged] {
			have[merged] = true
			v.tokens = append(v.tokens, merged)
			v.types = append(v.types, tokenNormal)
		}
	}

	v.eos = uint32(len(v.tokens))
	for _, s := range []string{tokEndOfText, tokImStart, tokImEnd} {
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, tokenControl)
	}
	for i := 0; len(v.tokens) < n; i++ {
		v.tokens = append(v.tokens, fmt.Sprintf("<|reserved_%d|>", i))
		v.types = append(v.types, tokenControl)
	}
	return v, nil
}

// word is one distinct word of the corpus as a sequence of symbols, and
// how often it occurs.
type word struct {
	syms  []string
	count int
}

// splitWords splits each counted word into symbols, in the words' sorted
// order.
func splitWords(counts map[string]int, symbols func(w string) []string) []word {
	words := make([]word, 0, len(counts))
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		words = append(words, word{symbols(w), counts[w]})
	}
	return words
}

// mergeBest is one round of byte-pair encoding, the same for the BPE
// merges and the SentencePiece pieces: it finds the adjacent pair of
// symbols that occurs most often over all words (ties to the pair whose
// "a b" sorts first), merges it in every word and returns it. ok is false
// when every word is a single symbol.
func mergeBest(words []word) (a, b string, ok bool) {
	pairs := map[[2]string]int{}
	for _, w := range words {
		for i := 0; i+1 < len(w.syms); i++ {
			pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
		}
	}
	var best [2]string
	bestCount := 0
	for p, c := range pairs {
		if c > bestCount || (c == bestCount && p[0]+" "+p[1] < best[0]+" "+best[1]) {
			best, bestCount = p, c
		}
	}
	if bestCount == 0 {
		return "", "", false
	}
	merged := best[0] + best[1]
	for wi := range words {
		s := words[wi].syms
		out := s[:0]
		for i := 0; i < len(s); i++ {
			if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
				out = append(out, merged)
				i++
			} else {
				out = append(out, s[i])
			}
		}
		words[wi].syms = out
	}
	return best[0], best[1], true
}

// SentencePiece special tokens, at llama.cpp's default ids 0, 1, 2.
const (
	tokUnknown = "<unk>"
	tokBOS     = "<s>"
	tokEOS     = "</s>"
)

// spaceMark is SentencePiece's visible space.
const spaceMark = "\u2581"

// buildSPMVocab makes a SentencePiece vocabulary of exactly n tokens, laid
// out as Llama's: <unk>, <s>, </s>, the 256 byte-fallback tokens <0xXX>,
// then pieces learned from the corpus, best score first, then <|im_start|>
// and <|im_end|> and <|reserved_N|> control tokens. The pieces are the
// merges of a character-level BPE over the corpus's words, each word with
// ▁ in front as SentencePiece writes a space, scored −(merge number) so
// that llama.cpp's highest-score-first merging replays them in order;
// then the single characters, scored below every merge. Newlines and tabs
// get no piece: they fall back to their byte tokens.
func buildSPMVocab(n int) (*vocabulary, error) {
	v := &vocabulary{spm: true, unk: 0, bos: 1, eos: 2}
	add := func(s string, typ int32, score float32) {
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, typ)
		v.scores = append(v.scores, score)
	}
	add(tokUnknown, tokenUnknown, 0)
	add(tokBOS, tokenControl, 0)
	add(tokEOS, tokenControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenByte, 0)
	}

	counts := map[string]int{}
	chars := map[string]bool{}
	for _, w := range strings.Fields(corpus) {
		w = spaceMark + w
		counts[w]++
		for _, r := range w {
			chars[string(r)] = true
		}
	}
	const specials = 2
	fixed := len(v.tokens) + len(chars) + specials
	if n < fixed {
		return nil, fmt.Errorf("synth: SentencePiece vocabulary of %d tokens is too small (need at least %d)", n, fixed)
	}
	words := splitWords(counts, func(w string) []string {
		var syms []string
		for _, r := range w {
			syms = append(syms, string(r))
		}
		return syms
	})
	have := map[string]bool{}
	var pieces []string
	for len(pieces) < n-fixed {
		a, b, ok := mergeBest(words)
		if !ok {
			break // every word is one piece
		}
		if merged := a + b; !have[merged] {
			have[merged] = true
			pieces = append(pieces, merged)
		}
	}
	for i, p := range pieces {
		add(p, tokenNormal, -float32(i))
	}
	for i, c := range slices.Sorted(maps.Keys(chars)) {
		add(c, tokenNormal, -float32(len(pieces)+i))
	}
	add(tokImStart, tokenControl, 0)
	add(tokImEnd, tokenControl, 0)
	for i := 0; len(v.tokens) < n; i++ {
		add(fmt.Sprintf("<|reserved_%d|>", i), tokenControl, 0)
	}
	return v, nil
}

// chatMLTemplate is the Jinja chat template of Qwen-style models.
const chatMLTemplate = `{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`
