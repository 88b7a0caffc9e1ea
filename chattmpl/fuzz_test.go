package chattmpl

import (
	"testing"
)

// FuzzTemplate: any template source either parses or is refused with an
// error, and a parsed one renders a conversation or errs, without a
// panic or a hang; splitting any reply gives back at most its bytes.
func FuzzTemplate(f *testing.F) {
	for _, src := range templateFiles(f) {
		f.Add(src, "<think>a</think>b")
	}
	for _, seed := range []string{
		"{{ messages[0].content.strip('\\n') }}", "{% for m in messages %}{{ m.role }}{% endfor %}",
		"{% raw %}{{ x.strip() }}{% endraw %}", "{{ x.strip(", "{%", "{{ '}}' }}", "{# {{ #}",
		"{% macro m(a) %}{{ a.lstrip() }}{% endmacro %}{{ m(' x') }}", "{{ strftime_now('%Y-%m-%d %B %%') }}",
	} {
		f.Add(seed, "<|channel|>analysis<|message|>x<|end|>")
	}
	f.Fuzz(func(t *testing.T, src, reply string) {
		tmpl, err := Parse("fuzz.jinja", src, "<s>", "</s>")
		if err != nil {
			return
		}
		thought := "t"
		out, err := tmpl.Render([]Message{{Role: "system", Content: " s "}, {Role: "user", Content: "u\n"},
			{Role: "assistant", Content: "a", Reasoning: &thought}, {Role: "user", Content: "v"}},
			Options{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": true, "reasoning_effort": "low"}})
		if err != nil {
			return
		}
		r, c := tmpl.Split(out, reply)
		if len(r)+len(c) > len(reply) {
			t.Fatalf("split %q into %q and %q: more than the reply", reply, r, c)
		}
	})
}
