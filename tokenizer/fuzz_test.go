package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// fuzzPres are the pre-tokenizers the fuzzer picks from: one of each kind
// of splitter.
var fuzzPres = []string{"qwen2", "gpt-2", "llama-bpe", "default", "deepseek-v3", "gpt-4o", "qwen35", "tiny_aya",
	"laguna", "exaone-moe", "chameleon", "deepseek-llm", "poro-chat", "jais-2", "kimi-k2"}

// FuzzTokenizer builds a tokenizer from fuzzed metadata (tokens, token
// types, merges, special ids, model and pre-tokenizer) and runs fuzzed
// text through it. Building may fail; nothing may panic, and every id
// Encode returns must be in the vocabulary.
func FuzzTokenizer(f *testing.F) {
	f.Add("a\nb\nab\n<|im_end|>\nĠ\nĠa", "a b\nĠ a", "ab a<|im_end|> Ġab", uint8(0), []byte{1, 1, 1, 3, 1, 1}, uint32(3))
	f.Add("<unk>\n<s>\n</s>\n<0x0A>\n<0x41>\n▁\na\n▁a\n▁ab\nb", "", "ab a\nA<s> b", uint8(1), []byte{2, 3, 3, 6, 6, 1, 1, 1, 1, 1}, uint32(1))
	f.Add("x\ny\n\n<|fim_pad|>\n<|end|>\n<|return|>\n<|call|>\n<0x", "x y\n x", "xy<|end|>yx \xff", uint8(2), []byte{1, 1, 4, 1, 3, 3, 3, 6}, uint32(9))
	f.Add("1\n12\n日\n本\n日本", "1 2\n日 本", "1234567 日本語 IT'S", uint8(8), []byte{}, uint32(0))
	f.Add("A\nB\nAB\n€", "A B", "ABab  '€' \r\n\t", uint8(10), []byte{1, 1, 1, 1}, uint32(2))
	f.Add("中\n文\n中文\na\n\U00020000", "中 文", "a中文b's 𠀀x\n1234 \u4dc0", uint8(28), []byte{1}, uint32(4))
	f.Add("中\na\nb", "", "中ab 中\u0301", uint8(28), []byte{1}, uint32(1))
	f.Fuzz(func(t *testing.T, vocab, merges, text string, kind uint8, types []byte, special uint32) {
		toks := strings.Split(vocab, "\n")
		if len(toks) > 1024 {
			toks = toks[:1024]
		}
		kv := map[string]gguf.Value{
			"tokenizer.ggml.tokens":       gguf.Array(toks),
			"tokenizer.ggml.bos_token_id": gguf.Uint32(special),
			"tokenizer.ggml.eos_token_id": gguf.Uint32(special / 2),
			"general.name":                gguf.String([]string{"synth", "Phi-3", "modern-bert"}[int(kind>>5)%3]),
		}
		if kind&1 == 0 {
			kv["tokenizer.ggml.model"] = gguf.String("gpt2")
			kv["tokenizer.ggml.pre"] = gguf.String(fuzzPres[int(kind>>1)%len(fuzzPres)])
			if merges != "" { // no merges: refused, except for kimi-k2
				kv["tokenizer.ggml.merges"] = gguf.Array(strings.Split(merges, "\n"))
			}
		} else {
			kv["tokenizer.ggml.model"] = gguf.String("llama")
			scores := make([]float32, len(toks))
			for i := range scores {
				scores[i] = -float32(i % 7)
			}
			kv["tokenizer.ggml.scores"] = gguf.Array(scores)
		}
		if len(types) > 0 {
			tt := make([]int32, len(toks))
			for i := range tt {
				tt[i] = int32(types[i%len(types)] % 8)
			}
			kv["tokenizer.ggml.token_type"] = gguf.Array(tt)
		}
		if kind&0x10 != 0 {
			kv["tokenizer.ggml.add_eos_token"] = gguf.Bool(true)
			kv["tokenizer.ggml.add_space_prefix"] = gguf.Bool(kind&1 == 0)
		}
		tok, err := newTokenizer(tokMetadata{file: "fuzz.gguf", lookup: func(k string) (gguf.Value, bool) { v, ok := kv[k]; return v, ok }})
		if err != nil {
			return
		}
		var all []int
		for _, add := range []bool{false, true} {
			for _, parse := range []bool{false, true} {
				ids := tok.Encode(text, add, parse)
				for _, id := range ids {
					if id < 0 || id >= tok.Len() {
						t.Fatalf("Encode(%q, %v, %v) gave id %d outside the %d-token vocabulary", text, add, parse, id, tok.Len())
					}
				}
				all = append(all, ids...)
			}
		}
		for _, b := range []byte(text) {
			all = append(all, int(b)-8) // some out-of-range ids too
		}
		for _, remove := range []bool{false, true} {
			for _, unparse := range []bool{false, true} {
				tok.Decode(all, remove, unparse)
			}
		}
		for id := -1; id <= tok.Len(); id++ {
			tok.Piece(id, id%2 == 0)
		}
		if eog := tok.EOG(); !slices.IsSorted(eog) {
			t.Fatalf("EOG %v not sorted", eog)
		}
	})
}
