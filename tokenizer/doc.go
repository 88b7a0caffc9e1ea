// Package tokenizer turns text into token ids and back exactly as
// llama.cpp v0.4.0's llama_tokenize and llama_detokenize do
// (src/llama-vocab.cpp), from the vocabulary a GGUF file carries.
//
// It handles the two vocabulary kinds Mixture-of-Experts models ship with:
// GPT-2 byte-level BPE (tokenizer.ggml.model "gpt2", with llama.cpp's
// pre-tokenizers, several of them as hand-written splitters) and
// SentencePiece (model "llama": score-ordered merges over UTF-8
// characters with byte fallback). The metadata is read the way llama.cpp's
// vocabulary loader reads it, including its defaults, its type checks and
// its text-based detection of control and end-of-generation tokens.
//
// # Promise
//
// For every vocabulary the tests synthesize, Encode and Decode return what
// llama.cpp returns on a corpus of hand-written and generated strings
// (TestTokenizerMatchesLlamaCpp, against the llama.cpp oracle). Code
// points are classified with tables generated from llama.cpp's own
// (unicode_tables.go), not Go's unicode package, so that lenient UTF-8
// decoding and category edge cases agree.
//
// # Security
//
// New refuses malformed metadata (missing keys, wrong types, lengths that
// disagree, duplicate or undecodable pieces) with an error naming the
// file and key (TestNewTokenizerErrors); Encode
// and Decode accept any bytes without panicking (FuzzTokenizer). A
// Tokenizer is immutable and safe for concurrent use.
package tokenizer
