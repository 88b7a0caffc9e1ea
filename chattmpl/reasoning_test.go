package chattmpl

import (
	"testing"
)

// splitCases are replies in the shapes the real models emit, with the
// reasoning and content the OpenAI fields should carry.
var splitCases = []struct {
	template, prompt, reply string
	reasoning, content      string
}{
	// Qwen3 thinking: the model opens the tag itself.
	{"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n", "<think>\nLet me add.\n</think>\n\n4", "Let me add.", "4"},
	// Qwen3 with thinking off: the prompt closed an empty think block.
	{"Qwen-Qwen3-0.6B.jinja", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "4", "", "4"},
	// DeepSeek-V3.1 thinking mode: the prompt ends inside the tag.
	{"deepseek-ai-DeepSeek-V3.1.jinja", "<｜Assistant｜><think>", "Add them.</think>It is 4.", "Add them.", "It is 4."},
	{"deepseek-ai-DeepSeek-V3.1.jinja", "<｜Assistant｜><think></think>", "It is 4.", "", "It is 4."},
	// Reasoning cut off by max_tokens.
	{"deepseek-ai-DeepSeek-V3.1.jinja", "<｜Assistant｜><think>", "Still thinking \n", "Still thinking", ""},
	// GLM-4.6.
	{"GLM-4.6.jinja", "<|assistant|>", "\n<think>Plan.\nMore.</think>\nAnswer  ", "Plan.\nMore.", "Answer  "},
	// gpt-oss harmony: analysis then final.
	{"openai-gpt-oss-120b.jinja", "<|start|>assistant",
		"<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>", "User asks 2+2.", "4"},
	{"openai-gpt-oss-120b.jinja", "<|start|>assistant", "<|channel|>final<|message|>Just 4.", "", "Just 4."},
	// Kimi-K2 has no reasoning markers: all content, tags included.
	{"moonshotai-Kimi-K2.jinja", "<|im_assistant|>assistant<|im_middle|>", "<think>x</think>y", "", "<think>x</think>y"},
}

// TestSplit: the whole reply, and the same reply pushed in every split
// into two pieces and byte by byte, give the expected parts.
func TestSplit(t *testing.T) {
	templates := templateFiles(t)
	for _, c := range splitCases {
		tmpl, err := Parse(c.template, templates[c.template], "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		if r, co := tmpl.Split(c.prompt, c.reply); r != c.reasoning || co != c.content {
			t.Errorf("%s %q: got (%q, %q), want (%q, %q)", c.template, c.reply, r, co, c.reasoning, c.content)
		}
		for cut := range len(c.reply) + 1 {
			if r, co := pushPieces(tmpl, c.prompt, c.reply[:cut], c.reply[cut:]); r != c.reasoning || co != c.content {
				t.Errorf("%s %q cut at %d: got (%q, %q), want (%q, %q)", c.template, c.reply, cut, r, co, c.reasoning, c.content)
			}
		}
		bytes := make([]string, len(c.reply))
		for i := range c.reply {
			bytes[i] = c.reply[i : i+1]
		}
		if r, co := pushPieces(tmpl, c.prompt, bytes...); r != c.reasoning || co != c.content {
			t.Errorf("%s %q byte by byte: got (%q, %q)", c.template, c.reply, r, co)
		}
	}
}

func pushPieces(tmpl *Template, prompt string, pieces ...string) (string, string) {
	s := tmpl.NewSplitter(prompt)
	var r, c string
	for _, p := range pieces {
		dr, dc := s.Push(p)
		r, c = r+dr, c+dc
	}
	dr, dc := s.Flush()
	return r + dr, c + dc
}

// TestFormats: the five templates' reasoning formats.
func TestFormats(t *testing.T) {
	want := map[string]Format{
		"Qwen-Qwen3-0.6B.jinja": FormatThink, "deepseek-ai-DeepSeek-V3.1.jinja": FormatThink, "GLM-4.6.jinja": FormatThink,
		"openai-gpt-oss-120b.jinja": FormatHarmony, "moonshotai-Kimi-K2.jinja": FormatNone,
	}
	for name, src := range templateFiles(t) {
		if got := detectFormat(src); got != want[name] {
			t.Errorf("%s: %s, want %s", name, got, want[name])
		}
	}
}
