package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// The OpenAI wire format, as far as gguftool serves it. Unknown fields are
// ignored (clients send many); known fields of the wrong type, out of
// range or unsupported values are a 400 with an OpenAI-style error body.

// CompletionRequest is POST /v1/completions.
type CompletionRequest struct {
	Model       string          `json:"model"`
	Prompt      json.RawMessage `json:"prompt"` // a string, or an array of token ids
	MaxTokens   *int            `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	TopK        *int            `json:"top_k"`
	Seed        *uint64         `json:"seed"`
	Stop        json.RawMessage `json:"stop"` // a string or an array of up to 4 strings
	Stream      bool            `json:"stream"`
	Logprobs    *int            `json:"logprobs"` // top log-probabilities per token, 0–20
	N           *int            `json:"n"`
	Echo        bool            `json:"echo"`
}

// ChatMessage is one message of a chat.
type ChatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string, or an array of {"type":"text","text":…} parts
	// ReasoningContent is an assistant turn's reasoning, as this server's
	// responses (and llama.cpp's) return it; templates that show past
	// reasoning (Qwen3, GLM, gpt-oss) render it.
	ReasoningContent *string `json:"reasoning_content"`
}

// ChatRequest is POST /v1/chat/completions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *uint64         `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	N                   *int            `json:"n"`
	// ReasoningEffort is the template variable reasoning_effort (gpt-oss:
	// low, medium, high).
	ReasoningEffort *string `json:"reasoning_effort"`
	// ChatTemplateKwargs are further template variables, as llama.cpp's
	// server takes them: {"enable_thinking": false} for Qwen3 and GLM,
	// {"thinking": true} for DeepSeek-V3.1.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

// APIError is the OpenAI error body: {"error": {...}}.
type APIError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

func (e *APIError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *APIError {
	return &APIError{Status: 400, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// decodeJSON decodes one JSON object from body into v; trailing data, a
// non-object and type mismatches are 400s naming the field.
func decodeJSON(body []byte, v any) *APIError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return badRequest("", "the request body must be a JSON object")
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest(te.Field, "field %q: expected %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return badRequest("", "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "invalid JSON: data after the request object")
	}
	return nil
}

// params are the validated generation parameters of a request.
type params struct {
	maxTokens   int
	temperature float64
	topP        float64
	topK        int
	seed        uint64
	stop        []string
	stream      bool
	logprobs    int // −1: none; otherwise the number of top alternatives
	chat        *chatGen
}

// limits bound what a request may ask for.
type limits struct {
	maxTokens    int // ceiling of max_tokens
	defaultMax   int // max_tokens when the request does not say
	maxStop      int
	maxStopBytes int
}

func (l limits) params(maxTokens *int, temperature, topP *float64, topK *int, seed *uint64, stop json.RawMessage, n *int, stream bool) (params, *APIError) {
	p := params{maxTokens: l.defaultMax, temperature: 1, topP: 1, stream: stream, logprobs: -1}
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > l.maxTokens {
			return p, badRequest("max_tokens", "max_tokens must be in 1..%d, got %d", l.maxTokens, *maxTokens)
		}
		p.maxTokens = *maxTokens
	}
	if temperature != nil {
		if *temperature < 0 || *temperature > 2 || math.IsNaN(*temperature) {
			return p, badRequest("temperature", "temperature must be in [0, 2]")
		}
		p.temperature = *temperature
	}
	if topP != nil {
		if !(*topP > 0 && *topP <= 1) {
			return p, badRequest("top_p", "top_p must be in (0, 1]")
		}
		p.topP = *topP
	}
	if topK != nil {
		if *topK < 0 {
			return p, badRequest("top_k", "top_k must be ≥ 0")
		}
		p.topK = *topK
	}
	if seed != nil {
		p.seed = *seed
	}
	if n != nil && *n != 1 {
		return p, badRequest("n", "only n = 1 is supported")
	}
	if len(stop) > 0 && string(stop) != "null" {
		var one string
		if err := json.Unmarshal(stop, &one); err == nil {
			p.stop = []string{one}
		} else if err := json.Unmarshal(stop, &p.stop); err != nil {
			return p, badRequest("stop", "stop must be a string or an array of strings")
		}
		if len(p.stop) > l.maxStop {
			return p, badRequest("stop", "at most %d stop sequences", l.maxStop)
		}
		for _, s := range p.stop {
			if s == "" || len(s) > l.maxStopBytes {
				return p, badRequest("stop", "stop sequences must be 1..%d bytes", l.maxStopBytes)
			}
		}
	}
	return p, nil
}

// chatContent flattens a message's content: a string, or text parts.
func chatContent(raw json.RawMessage, i int) (string, *APIError) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(fmt.Sprintf("messages[%d].content", i), "content must be a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest(fmt.Sprintf("messages[%d].content", i), "content part type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// Usage is the token accounting of every response.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails says how many prompt tokens came from the prefix
// cache instead of being evaluated.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionChoice is one choice of a completion.
type CompletionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionLogprobs is the legacy completions logprobs object.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// Completion is a /v1/completions response or stream chunk.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ChatChoice is one choice of a chat completion (Message) or chunk (Delta).
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      *ChatOut      `json:"message,omitempty"`
	Delta        *ChatOut      `json:"delta,omitempty"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ChatOut is an assistant message or delta.
type ChatOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the reply's reasoning, split from its content
	// by the template's markers (<think>…</think>, gpt-oss's analysis
	// channel); absent when there is none.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ChatLogprobs is the chat logprobs object.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one token's log-probability and alternatives.
type TokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float64        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []TopAlternate `json:"top_logprobs"`
}

// TopAlternate is one alternative token.
type TopAlternate struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatCompletion is a /v1/chat/completions response or stream chunk.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
}
