package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gguftool/gguftool/chattmpl"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/tokenizer"
)

// Chat templates. A chat request is rendered with a Jinja template
// evaluated by package chattmpl: Config.ChatTemplate when set (serve's
// --chat-template FILE), else the GGUF's own tokenizer.chat_template,
// else ChatML (the format Qwen, OLMoE-Instruct and synth use). A template
// that cannot be evaluated stops the server at start-up. Which one a
// response used is in its X-Gguftool-Chat-Template header ("file:NAME",
// "gguf", "builtin:chatml") and the request's log line.

// chatMLTemplate is the fallback for a model without a template.
const chatMLTemplate = `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}`

// chatTemplate is the template chat requests are rendered with, and what
// its header calls it.
type chatTemplate struct {
	Name string // "file:NAME", "gguf", "builtin:chatml"
	*chattmpl.Template
}

// pickTemplate parses the template for a model: override (named
// overrideName) when set, else the GGUF's, else ChatML.
func pickTemplate(meta *gguf.File, tok *tokenizer.Tokenizer, override, overrideName string) (chatTemplate, error) {
	bos, eos := specialText(meta, tok, "bos"), specialText(meta, tok, "eos")
	name, what, src := "builtin:chatml", "the built-in ChatML template", chatMLTemplate
	if v, ok := meta.Lookup("tokenizer.chat_template"); ok {
		if s, ok := v.Str(); ok && s != "" {
			name, what, src = "gguf", "tokenizer.chat_template (the GGUF's)", s
		}
	}
	if override != "" {
		name, what, src = "file:"+overrideName, overrideName, override
	}
	t, err := chattmpl.Parse(what, src, bos, eos)
	if err != nil {
		return chatTemplate{}, fmt.Errorf("server: %w", err)
	}
	return chatTemplate{Name: name, Template: t}, nil
}

// specialText is the text of the token tokenizer.ggml.ROLE_token_id names
// (the template's bos_token or eos_token); "" when there is none.
func specialText(meta *gguf.File, tok *tokenizer.Tokenizer, role string) string {
	v, ok := meta.Lookup("tokenizer.ggml." + role + "_token_id")
	if !ok {
		return ""
	}
	id, ok := v.Uint()
	if !ok || id >= uint64(tok.Len()) {
		return ""
	}
	return tok.Piece(int(id), true)
}

// chatGen is what a chat generation needs beyond the sampling
// parameters.
type chatGen struct {
	split   *chattmpl.Splitter // splits the reply into reasoning and content
	special bool               // decode control tokens, which may be reasoning markers
}

// reasoningEfforts are the values reasoning_effort may take.
var reasoningEfforts = map[string]bool{"minimal": true, "low": true, "medium": true, "high": true}

// templateOptions reads the template variables of a chat request:
// chat_template_kwargs, then reasoning_effort over them.
func templateOptions(req *ChatRequest) (chattmpl.Options, *APIError) {
	o := chattmpl.Options{AddGenerationPrompt: true, Vars: map[string]any{}}
	if raw := bytes.TrimSpace(req.ChatTemplateKwargs); len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '{' || json.Unmarshal(raw, &o.Vars) != nil {
			return o, badRequest("chat_template_kwargs", "chat_template_kwargs must be a JSON object")
		}
	}
	if req.ReasoningEffort != nil {
		if !reasoningEfforts[*req.ReasoningEffort] {
			return o, badRequest("reasoning_effort", "reasoning_effort %q is not one of minimal, low, medium, high", *req.ReasoningEffort)
		}
		o.Vars["reasoning_effort"] = *req.ReasoningEffort
	}
	return o, nil
}
