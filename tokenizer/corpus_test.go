package tokenizer

import (
	"math/rand/v2"
	"strings"
)

// tokenizerCorpus is the text the tokenizer is checked on against
// llama.cpp: hand-picked hard cases, then random mixtures of fragments
// drawn from a fixed seed, so the corpus is the same on every run without
// being committed as data.
func tokenizerCorpus() []string {
	out := append([]string(nil), handCorpus...)
	rng := rand.New(rand.NewPCG(20261130, 1))
	for range 1000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			pool := fragmentPools[rng.IntN(len(fragmentPools))]
			b.WriteString(pool[rng.IntN(len(pool))])
		}
		out = append(out, b.String())
	}
	return out
}

// handCorpus holds the cases each part of the tokenizer is known to be
// sensitive to.
var handCorpus = []string{
	// Empty text and white space.
	"", " ", "  ", "   ", "\t", "\n", "\n\n\n", " \t\n ", "\r\n", "\r\n\r\n", " \n", "\n ", "a\n\nb",
	"hello  world", "  leading", "trailing  ", " both ", "a \n b", "x\t\ty", "\v\f", " \r ", "end\n",
	strings.Repeat(" ", 40), strings.Repeat("\n", 17), strings.Repeat(" \n", 9),
	// Numbers.
	"1234567", "0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "2024-01-01",
	"v1.2.3", "0x1F", "١٢٣٤", "½ + ¼", "x²+y³", "Ⅻ", "第3章", "9" + strings.Repeat("8", 40),
	// Contractions.
	"I'm", "they'll", "IT'S", "we've", "you're", "she'd", "don't", "ISN'T", "WE'RE", "You'Ve", "'s", "'",
	"''", "rock 'n' roll", "O'Neil", "it’s", "'ll go", " 'd", "x'", "'S'", "can't've",
	// Special tokens in text.
	"<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<|im_start|><|im_end|>", "a<|im_end|>b",
	"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n", "<s>", "</s>",
	"<s>hello</s>", "<unk>", "<|im_end", "im_end|>", "<|<|im_end|>|>", "<|reserved_0|>",
	"<|reserved_10|><|reserved_1|>", "<0x41>", " <|im_end|> ", "<|endoftext|><|endoftext|>",
	"text <s> more </s> end", "<|im_start|> spaced <|im_end|>\n\n", "<<|im_start|>>",
	// Scripts and symbols.
	"你好，世界", "日本語のテキスト", "カタカナ ひらがな", "한국어 문장", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪",
	"e\u0301", "ñ", "Å", "a\u0308\u0304", "مرحبا بالعالم", "नमस्ते दुनिया", "सत्यमेव जयते", "สวัสดีครับ",
	"שלום עולם", "Καλημέρα κόσμε", "Привет, мир!", "Crème brûlée à la française", "naïve façade",
	"Straße", "ﬁnance", "ＡＢＣ１２３", "a\u200bb", "a\u00a0b", "a\u3000b", "x\u2028y", "x\u0085y",
	"𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ǅemal", "İstanbul", "\u212a", "ᏣᎳᎩ", "ⴰⵣⵓⵍ", "€100", "¥500 ≈ $3.4", "→ ← ↑ ↓", "∑∫√∞",
	"♠♥♦♣", "¿Qué?", "«quote»", "—dash—", "…", "(╯°□°)╯︵ ┻━┻", "٣ أشهر", "ÆØÅ æøå",
	// Code.
	"func main() {\n\tfmt.Println(\"hi\")\n}", "def f(x):\n    return x**2\n", "if (a && b) { return; }",
	"x := []int{1, 2, 3}", "<div class=\"x\">hi</div>", "SELECT * FROM t WHERE id = 1;", "a+=b; c-=d;",
	"#include <stdio.h>", "// comment", "/* block */", "$var = @array;", "~!@#$%^&*()_+`-={}[]|\\:;\"'<>,.?/",
	"\\n", "path/to/file.go:12:3", "https://example.com/a?b=c&d=e", "user@example.com", "\t\treturn nil",
	"    indented\n        more", "a==b!=c<=d>=e", "i++; j--;", "`backtick`", "x^y|z~w", "{{template}}",
	// Clean-up of spaces on detokenization.
	"Hello , world !", "What ?", "a . b", "he said ' hi ' there", "it 's", "I 'm", "we 're", "they 've",
	"don 't", "we 'll", "x ' y", " ' ' ", "a ,b", "end .",
	// Bytes that are not UTF-8.
	"\xff", "\x80", "abc\xffdef", "\xc3", "\xc3\x28", "\xe2\x82", "\xe2\x82\x28", "\xf0\x9f\x98", "\xed\xa0\x80",
	"\xc0\x80", "\xc1\xbf", "\xf8\x88\x80\x80\x80", "\xfe\xff", "a\x00b", "\x00", "\xe9t\xe9", "ok\x80\x80ok",
	// Text that looks like vocabulary internals.
	"▁", "▁▁", "hello▁world", " ▁ ", "Ġ", "Ċ", "ĠĠ", "Ā", "ā", "[EMPTY_0]", "[UNK_BYTE_0x41]",
	// Long runs.
	strings.Repeat("a", 300), strings.Repeat("ab ", 100), strings.Repeat("😀", 20), strings.Repeat("-", 64),
	strings.Repeat("the quick brown fox ", 20),
}

// fragmentPools are what the random corpus strings are made of.
var fragmentPools = [][]string{
	{"the", "quick", "brown", "fox", "Model", "experts", "tokens", "QUANT", "router", "layer", "a", "I",
		"naïve", "über", "façade", "日本", "中文字", "한글", "Ωμέγα", "мир", "नम", "سلام", "ไทย", "😀", "🚀", "e\u0301"},
	{" ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", "\u00a0", "\u3000", ", ", ". ", "! ", "? ", " - "},
	{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'", "’"},
	{"0", "7", "42", "123", "2024", "31415926", "1,000", "3.5", "١٢", "Ⅳ"},
	{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<|reserved_3|>", "<|im_", "|>"},
	{"\xff", "\x80", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xc0\x80", "\x00"},
	{"(", ")", "{", "}", "[]", "->", "::", ":=", "==", "!=", "&&", "||", "...", "\"", "`", "$", "#", "@", "%", "^", "~", "/*", "*/"},
	{"func", "return", "for i := range n", "def", "print(x)", "x = y + 1", "if err != nil", "</div>", "<b>"},
}
