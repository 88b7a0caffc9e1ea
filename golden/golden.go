// Package golden holds gguftool's golden fixtures: small models that
// synth makes from a seed, with the outputs llama.cpp (the independent
// oracle, see internal/llamacpp) gives for them, recorded once and checked
// in under golden/testdata. The runtime must reproduce them.
//
// A fixture file records how to make the model (the synth spec, the
// equivalent command line and the file's sha256), how the oracle ran
// (package, llama.cpp version, CPU backend, F32 KV cache, flash attention
// off, threads), the prompt as token ids, the greedy continuation with
// each token's log-probability, and, for the whole sequence under teacher
// forcing, every position's top log-probabilities and the log-probability
// of the token that follows. Refresh them with
//
//	scripts/llamacpp/record-goldens.sh
package golden

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/synth"
)

// Schema identifies the fixture file format.
const Schema = "gguftool.golden/v1"

// Spec says how synth makes a fixture's model: the architecture's
// defaults with these fields changed.
type Spec struct {
	Arch       string `json:"arch"`
	Type       string `json:"type"`
	ExpertType string `json:"expert_type,omitempty"`
	Seed       uint64 `json:"seed"`
}

// Config is the synth configuration of the spec.
func (s Spec) Config() (synth.Config, error) {
	c := synth.Defaults(s.Arch)
	t, err := gguf.ParseType(s.Type)
	if err != nil {
		return c, err
	}
	c.Type = t
	if s.ExpertType != "" {
		if c.ExpertType, err = gguf.ParseType(s.ExpertType); err != nil {
			return c, err
		}
	}
	c.Seed = s.Seed
	return c, c.Validate()
}

// Command is the equivalent gguftool command line.
func (s Spec) Command(out string) string {
	cmd := fmt.Sprintf("gguftool synth --arch %s --type %s --seed %d", s.Arch, s.Type, s.Seed)
	if s.ExpertType != "" {
		cmd += " --expert-type " + s.ExpertType
	}
	return cmd + " -o " + out
}

// Oracle records how the oracle ran.
type Oracle struct {
	Package        string `json:"package"`
	LlamaCpp       string `json:"llama_cpp"`
	CPUBackend     string `json:"cpu_backend"`
	KVCache        string `json:"kv_cache"`
	FlashAttention bool   `json:"flash_attention"`
	Threads        int    `json:"threads"`
}

// CurrentOracle describes the oracle internal/llamacpp runs.
func CurrentOracle() Oracle {
	return Oracle{Package: llamacpp.Package, LlamaCpp: llamacpp.LlamaCpp, CPUBackend: llamacpp.CPUBackend,
		KVCache: llamacpp.KVCache, Threads: llamacpp.Threads}
}

// Tolerance states how a reproduction is compared with the fixture.
type Tolerance struct {
	// Greedy ids must match exactly.
	// LogprobAbs bounds |Δ log p| of every recorded log-probability.
	LogprobAbs float64 `json:"logprob_abs"`
	Note       string  `json:"note"`
}

// Fixture is one golden file.
type Fixture struct {
	Schema         string              `json:"schema"`
	Name           string              `json:"name"`
	Spec           Spec                `json:"synth"`
	Command        string              `json:"command"`
	SHA256         string              `json:"sha256"`
	Oracle         Oracle              `json:"oracle"`
	Tolerance      Tolerance           `json:"tolerance"`
	Prompt         []int               `json:"prompt"`
	Greedy         []int               `json:"greedy"`
	GreedyLogprobs []float64           `json:"greedy_logprobs"`
	TeacherForced  []llamacpp.Position `json:"teacher_forced"`
}

// Fixtures are the recorded models: the three runtime architectures in
// F32 (the correctness gate), and quantized and extra-layout variants.
var Fixtures = []Spec{
	{Arch: "qwen3moe", Type: "f32", Seed: 1},
	{Arch: "llama", Type: "f32", Seed: 1},
	{Arch: "olmoe", Type: "f32", Seed: 1},
	{Arch: "qwen3moe", Type: "q8_0", Seed: 2},
	{Arch: "olmoe", Type: "f16", Seed: 3},
	{Arch: "deepseek2", Type: "f32", Seed: 1},
	{Arch: "gpt-oss", Type: "f32", ExpertType: "mxfp4", Seed: 1},
}

// Name is the fixture's file stem.
func (s Spec) Name() string {
	n := s.Arch + "-" + s.Type
	if s.ExpertType != "" {
		n += "-experts-" + s.ExpertType
	}
	return fmt.Sprintf("%s-seed%d", n, s.Seed)
}

// Prompt is the prompt every fixture is recorded with: the bytes of
// "Hello, world" as byte-token ids.
var Prompt = []int{72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100}

// GreedyTokens is how many tokens are generated.
const GreedyTokens = 16

// Build synthesizes the spec's model into dir and returns its path and
// sha256.
func Build(ctx context.Context, s Spec, dir string) (string, string, error) {
	c, err := s.Config()
	if err != nil {
		return "", "", err
	}
	kvs, tensors, err := c.Model()
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(dir, s.Name()+".gguf")
	if err := gguf.WriteFile(ctx, path, kvs, tensors, gguf.WriteOptions{}); err != nil {
		return "", "", err
	}
	sum, err := fileSHA256(path)
	return path, sum, err
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Record runs the oracle on a built model and returns the fixture.
func Record(ctx context.Context, o *llamacpp.Oracle, s Spec, model, sum string) (*Fixture, error) {
	gen, err := o.Generate(ctx, model, Prompt, GreedyTokens)
	if err != nil {
		return nil, err
	}
	seq := append(append([]int{}, Prompt...), gen.Greedy...)
	tf, err := o.Score(ctx, model, seq, 8, "")
	if err != nil {
		return nil, err
	}
	return &Fixture{
		Schema: Schema, Name: s.Name(), Spec: s, Command: s.Command(s.Name() + ".gguf"), SHA256: sum,
		Oracle: CurrentOracle(), Tolerance: s.Tolerance(),
		Prompt: Prompt, Greedy: gen.Greedy, GreedyLogprobs: gen.Logprobs, TeacherForced: tf,
	}, nil
}

// Tolerance is how closely a runtime must reproduce the fixture, by
// weight type (llamacpp-oracle.md §5).
func (s Spec) Tolerance() Tolerance {
	switch {
	case s.Type == "f16" || s.Type == "bf16":
		return Tolerance{LogprobAbs: 2e-2, Note: "16-bit weights: ggml rounds activations to 16 bits before every product, " +
			"and one-ulp differences flip those roundings; expect a 1e-3 to 1e-2 noise floor"}
	case s.Type != "f32" || (s.ExpertType != "" && s.ExpertType != "f32"):
		return Tolerance{LogprobAbs: 1e-3, Note: "quantized weights: emulate ggml's activation quantization (Q8_0/Q8_K) " +
			"to get within ~1e-5; isolated jumps where the router's top-k margin is tiny are possible"}
	}
	return Tolerance{LogprobAbs: 1e-4, Note: "F32 weights and F32 KV cache: a faithful f32 forward pass agrees to ~1e-5"}
}

// Path is where a spec's fixture file lives, relative to the package.
func Path(s Spec) string { return filepath.Join("testdata", s.Name()+".json") }

// Read loads a fixture file.
func Read(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", path, err)
	}
	if f.Schema != Schema {
		return nil, fmt.Errorf("golden: %s: schema %q, want %q", path, f.Schema, Schema)
	}
	return &f, nil
}

// Write stores a fixture file.
func Write(path string, f *Fixture) error {
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	// Keep each [id, logprob] pair on one line: the files stay short.
	s := compactPairs(string(data))
	return os.WriteFile(path, []byte(s+"\n"), 0o644)
}

// compactPairs rewrites "[\n   12,\n   -0.5\n  ]" as "[12, -0.5]" and
// joins plain number lists onto one line.
func compactPairs(s string) string {
	var out strings.Builder
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasSuffix(l, "[") {
			j := i + 1
			var items []string
			for j < len(lines) {
				t := strings.TrimSpace(lines[j])
				if t == "]" || t == "]," {
					break
				}
				if strings.ContainsAny(t, "[]{}\"") {
					items = nil
					break
				}
				items = append(items, strings.TrimSuffix(t, ","))
				j++
			}
			if items != nil && j < len(lines) {
				out.WriteString(l + strings.Join(items, ", ") + strings.TrimSpace(lines[j]) + "\n")
				i = j
				continue
			}
		}
		out.WriteString(l + "\n")
	}
	return strings.TrimSuffix(out.String(), "\n")
}
