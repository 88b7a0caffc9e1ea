// Package llamacpp runs llama.cpp, gguftool's independent oracle, through
// the small C driver in scripts/llamacpp/oracle.c, built against the
// prebuilt libllama of the pinned npm package node-llama-cpp by
// scripts/llamacpp/install.sh. Tests use it to prove that llama.cpp loads
// what gguftool writes, and to record and check goldens.
package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The pinned oracle.
const (
	Package    = "node-llama-cpp@3.21.1"
	LlamaCpp   = "v0.4.0"
	CPUBackend = "haswell" // one CPU variant everywhere, so AVX-512 hosts record the same numbers
	Threads    = 2
	// KVCache is the KV cache type an Oracle runs with unless its KV
	// says otherwise.
	KVCache = "f32"
)

// ErrNotInstalled means the oracle has not been built; run
// scripts/llamacpp/install.sh.
var ErrNotInstalled = errors.New("llamacpp: oracle not installed (run scripts/llamacpp/install.sh, or set $GGUFTOOL_LLAMACPP_DIR to where it installed it)")

// Oracle is an installed driver.
type Oracle struct {
	Bin  string // the oracle binary
	Bins string // directory of the llama.cpp shared libraries
	// KV is the KV cache type of the contexts it makes: "f32" (KVCache,
	// when empty) or "f16".
	KV string
	// Vulkan says this is the Vulkan build (oracle-vulkan), which offloads
	// every layer to the first Vulkan device: Mesa's lavapipe unless
	// VK_DRIVER_FILES names another driver.
	Vulkan bool
	// CPUMoE keeps the routed experts' tensors on the CPU (the Vulkan
	// build's --cpu-moe): the placement of gguftool's GPU path when its
	// experts are not in VRAM.
	CPUMoE bool
	// VKDevice is the Vulkan device the Vulkan build takes
	// (GGML_VK_VISIBLE_DEVICES; "0" when empty).
	VKDevice string
}

// lavapipeICD is Mesa's CPU Vulkan driver, which the Vulkan build runs on
// where no other driver is named.
const lavapipeICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"

// FindVulkan locates llama.cpp's Vulkan build beside the CPU one (Find).
func FindVulkan() (*Oracle, error) {
	o, err := Find()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(o.Bin)
	bins, err := os.ReadFile(filepath.Join(dir, "vkbins.path"))
	if err != nil {
		return nil, ErrNotInstalled
	}
	v := &Oracle{Bin: filepath.Join(dir, "oracle-vulkan"), Bins: strings.TrimSpace(string(bins)), Vulkan: true}
	if _, err := os.Stat(v.Bin); err != nil {
		return nil, ErrNotInstalled
	}
	return v, nil
}

// WithKV is the oracle running its contexts with KV cache type kv ("" for
// KVCache).
func (o *Oracle) WithKV(kv string) *Oracle {
	c := *o
	c.KV = kv
	return &c
}

// KVType is the KV cache type the oracle runs with.
func (o *Oracle) KVType() string {
	if o.KV == "" {
		return KVCache
	}
	return o.KV
}

// Find locates the oracle in $GGUFTOOL_LLAMACPP_DIR, else in .cache/llamacpp
// at the module root.
func Find() (*Oracle, error) {
	dir := os.Getenv("GGUFTOOL_LLAMACPP_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			// Outside the source tree only $GGUFTOOL_LLAMACPP_DIR can say
			// where the oracle is.
			return nil, ErrNotInstalled
		}
		dir = filepath.Join(root, ".cache", "llamacpp")
	}
	o := &Oracle{Bin: filepath.Join(dir, "oracle")}
	bins, err := os.ReadFile(filepath.Join(dir, "bins.path"))
	if err != nil {
		return nil, ErrNotInstalled
	}
	o.Bins = strings.TrimSpace(string(bins))
	if _, err := os.Stat(o.Bin); err != nil {
		return nil, ErrNotInstalled
	}
	return o, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("llamacpp: no go.mod above the working directory")
		}
		dir = parent
	}
}

func (o *Oracle) run(ctx context.Context, out any, model, mode string, args ...string) error {
	full := append([]string{"--bins", o.Bins, "--cpu", CPUBackend, "--threads", strconv.Itoa(Threads), "--kv", o.KVType(), model, mode}, args...)
	if o.Vulkan {
		full = append(full, "--gpu")
	}
	if o.Vulkan && o.CPUMoE {
		full = append(full, "--cpu-moe")
	}
	return o.exec(ctx, out, mode+" "+model, full)
}

// exec runs the driver with args and decodes the JSON it prints into out.
func (o *Oracle) exec(ctx context.Context, out any, what string, args []string) error {
	cmd := exec.CommandContext(ctx, o.Bin, args...)
	if o.Vulkan {
		// GGML_VK_VISIBLE_DEVICES makes ggml-vulkan take lavapipe, which
		// it otherwise passes over as a CPU device.
		dev := o.VKDevice
		if dev == "" {
			dev = "0"
		}
		cmd.Env = append(os.Environ(), "GGML_VK_VISIBLE_DEVICES="+dev)
		if os.Getenv("VK_DRIVER_FILES") == "" && os.Getenv("VK_ICD_FILENAMES") == "" {
			cmd.Env = append(cmd.Env, "VK_DRIVER_FILES="+lavapipeICD)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if jerr := json.Unmarshal(stdout.Bytes(), out); jerr != nil {
		if err != nil {
			return fmt.Errorf("llamacpp: %s: %v: %s", what, err, strings.TrimSpace(stderr.String()))
		}
		return fmt.Errorf("llamacpp: %s: bad output %q: %v", what, stdout.String(), jerr)
	}
	return nil
}

// LoadResult is what llama.cpp reports after loading a model.
type LoadResult struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	NVocab  int    `json:"n_vocab"`
	NLayer  int    `json:"n_layer"`
	NEmbd   int    `json:"n_embd"`
	NParams int64  `json:"n_params"`
	Desc    string `json:"desc"`
}

// Load loads a model (any shard of a split set works as the first one) and
// reports whether llama.cpp accepted it.
func (o *Oracle) Load(ctx context.Context, model string) (*LoadResult, error) {
	var r LoadResult
	if err := o.run(ctx, &r, model, "load"); err != nil {
		return nil, err
	}
	return &r, nil
}

// GenerateResult holds greedy ids and the log-probability of each.
type GenerateResult struct {
	OK       bool      `json:"ok"`
	Greedy   []int     `json:"greedy"`
	Logprobs []float64 `json:"logprobs"`
}

// Generate decodes greedily for n tokens after the prompt.
func (o *Oracle) Generate(ctx context.Context, model string, prompt []int, n int) (*GenerateResult, error) {
	var r GenerateResult
	if err := o.run(ctx, &r, model, "generate", "--prompt", joinIDs(prompt), "-n", strconv.Itoa(n)); err != nil {
		return nil, err
	}
	if !r.OK || len(r.Greedy) != n {
		return nil, fmt.Errorf("llamacpp: generate %s: got %d ids, want %d", model, len(r.Greedy), n)
	}
	return &r, nil
}

// Position is the next-token distribution after one position under
// teacher forcing.
type Position struct {
	Argmax      int          `json:"argmax"`
	Next        *int         `json:"next,omitempty"`
	NextLogprob *float64     `json:"next_logprob,omitempty"`
	Top         [][2]float64 `json:"top"` // (id, log-probability), best first
}

// Score evaluates ids in one batch and returns every position's
// distribution (top entries) and the log-probability of the id after it.
// If logitsOut is not empty, the raw float32 logits of every position are
// written there.
func (o *Oracle) Score(ctx context.Context, model string, ids []int, top int, logitsOut string) ([]Position, error) {
	return o.score(ctx, model, ids, top, logitsOut, false)
}

// ScoreSequential is Score with one id per llama_decode call, the path
// generation takes, instead of one batch, the path prompts take.
func (o *Oracle) ScoreSequential(ctx context.Context, model string, ids []int, top int) ([]Position, error) {
	return o.score(ctx, model, ids, top, "", true)
}

func (o *Oracle) score(ctx context.Context, model string, ids []int, top int, logitsOut string, sequential bool) ([]Position, error) {
	var r struct {
		OK        bool       `json:"ok"`
		Positions []Position `json:"positions"`
	}
	args := []string{"--ids", joinIDs(ids), "--top", strconv.Itoa(top)}
	if sequential {
		args = append(args, "--sequential")
	}
	if logitsOut != "" {
		args = append(args, "--logits-out", logitsOut)
	}
	if err := o.run(ctx, &r, model, "score", args...); err != nil {
		return nil, err
	}
	if !r.OK || len(r.Positions) != len(ids) {
		return nil, fmt.Errorf("llamacpp: score %s: %d positions, want %d", model, len(r.Positions), len(ids))
	}
	return r.Positions, nil
}

func joinIDs(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}
