package server

import (
	"strings"
)

// Chat templates. GGUF files carry a Jinja template (tokenizer.chat_template)
// that gguftool does not evaluate; instead it recognises the ChatML family
// in it (the <|im_start|> markers Qwen, OLMoE-Instruct and synth use) and
// renders that natively, and otherwise uses the architecture's documented
// built-in template. Which one a response used is in its
// X-Gguftool-Chat-Template header and the request's log line.

// chatTemplate renders messages into a prompt that ends where the
// assistant's reply begins.
type chatTemplate struct {
	Name   string // "gguf:chatml", "builtin:chatml", "builtin:mistral-inst", "builtin:tulu"
	render func(msgs []message) string
}

type message struct{ role, content string }

// pickTemplate chooses the template for a model.
func pickTemplate(arch, ggufTemplate string) chatTemplate {
	if strings.Contains(ggufTemplate, "<|im_start|>") && strings.Contains(ggufTemplate, "<|im_end|>") {
		return chatTemplate{Name: "gguf:chatml", render: renderChatML}
	}
	switch arch {
	case "llama":
		return chatTemplate{Name: "builtin:mistral-inst", render: renderMistral}
	case "olmoe":
		return chatTemplate{Name: "builtin:tulu", render: renderTulu}
	}
	return chatTemplate{Name: "builtin:chatml", render: renderChatML}
}

// renderChatML: <|im_start|>role\ncontent<|im_end|>\n per message, then
// <|im_start|>assistant\n.
func renderChatML(msgs []message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}

// renderMistral: [INST] user [/INST] assistant</s> turns; a system
// message is prepended to the first user turn.
func renderMistral(msgs []message) string {
	var b strings.Builder
	system := ""
	for _, m := range msgs {
		switch m.role {
		case "system":
			system += m.content + "\n\n"
		case "user":
			b.WriteString("[INST] " + system + m.content + " [/INST]")
			system = ""
		default:
			b.WriteString(" " + m.content + "</s>")
		}
	}
	return b.String()
}

// renderTulu: <|system|>, <|user|>, <|assistant|> blocks (OLMoE-Instruct's
// Tulu format), then <|assistant|>.
func renderTulu(msgs []message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|" + m.role + "|>\n" + m.content + "\n")
	}
	b.WriteString("<|assistant|>\n")
	return b.String()
}
