// Command mixes measures gguftool's prefill and decode against llama.cpp's,
// in the same run, on one synthesized qwen3moe model quantized by
// llama.cpp's own llama_model_quantize (the oracle's quantmodel driver) to
// each of the mixes real MoE downloads ship, and prints the table
// docs/benchmarks.md keeps:
//
//	go run ./scripts/bench/mixes -threads 2 -runs 3
//
// The mixes that llama.cpp refuses without an importance matrix (IQ2_XXS,
// and IQ3_XXS by its advice) get a seeded random one. Models are kept in
// -dir and reused on the next run. It needs the oracle
// (scripts/llamacpp/install.sh).
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/quantize"
)

type options struct {
	dir                                   string
	threads, runs, tokens, prompt         int
	layers, experts, used, embd, expertFF int
	mixes                                 string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "gguftool-mixes"), "where the models are made and kept")
	flag.IntVar(&o.threads, "threads", 2, "threads for both programs")
	flag.IntVar(&o.runs, "runs", 3, "runs of each measurement (medians are reported)")
	flag.IntVar(&o.tokens, "n", 64, "tokens decoded per run")
	flag.IntVar(&o.prompt, "prompt-tokens", 248, "prompt evaluated as one batch (prefill)")
	flag.IntVar(&o.layers, "layers", 12, "model layers")
	flag.IntVar(&o.experts, "experts", 48, "routed experts per layer")
	flag.IntVar(&o.used, "experts-used", 4, "experts per token")
	flag.IntVar(&o.embd, "embd", 1024, "model width")
	flag.IntVar(&o.expertFF, "expert-ff", 512, "expert FFN width")
	flag.StringVar(&o.mixes, "mixes", "Q4_K_M,Q5_K_M,Q6_K,Q3_K_M,Q2_K,IQ4_XS,IQ3_XXS,IQ2_XXS,MXFP4_MOE", "llama-quantize mixes, comma-separated")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mixes:", err)
		os.Exit(1)
	}
}

// result is the part of `gguftool bench decode --json` the table shows.
type result struct {
	Kernels string `json:"kernels"`
	Ours    struct {
		Prefill, Decode float64
	} `json:"gguftool"`
	LlamaCpp *struct {
		Prefill, Decode float64
	} `json:"llamacpp"`
}

func run(o options) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	quantmodel, err := llamacpp.Binary("quantmodel")
	if err != nil {
		return err
	}
	tool := filepath.Join(o.dir, "gguftool")
	if err := command("go", "build", "-o", tool, "./cmd/gguftool").Run(); err != nil {
		return fmt.Errorf("building gguftool: %w", err)
	}
	base := filepath.Join(o.dir, fmt.Sprintf("base-l%d-e%d-d%d-f%d.gguf", o.layers, o.experts, o.embd, o.expertFF))
	if _, err := os.Stat(base); err != nil {
		err := command(tool, "synth", "--arch", "qwen3moe", "--type", "f16", "--seed", "14", "--layers", fmt.Sprint(o.layers),
			"--experts", fmt.Sprint(o.experts), "--experts-used", fmt.Sprint(o.used), "--embd", fmt.Sprint(o.embd),
			"--heads", "16", "--heads-kv", "4", "--head-dim", "64", "--expert-ff", fmt.Sprint(o.expertFF), "--vocab", "32000", "-q", "-o", base).Run()
		if err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	imatrix := base + ".imatrix.dat"
	if _, err := os.Stat(imatrix); err != nil {
		if err := writeImatrix(base, imatrix); err != nil {
			return err
		}
	}
	fmt.Printf("| mix | size | prefill tok/s gguftool | llama.cpp | ratio | decode tok/s gguftool | llama.cpp | ratio |\n|---|---|---|---|---|---|---|---|\n")
	for _, mix := range strings.Split(o.mixes, ",") {
		model, err := quantizeMix(quantmodel, base, imatrix, mix)
		if err != nil {
			return err
		}
		st, err := os.Stat(model)
		if err != nil {
			return err
		}
		r, err := bench(tool, model, o)
		if err != nil {
			return fmt.Errorf("%s: %w", mix, err)
		}
		if r.LlamaCpp == nil {
			return fmt.Errorf("%s: the bench measured no llama.cpp (is the oracle installed?)", mix)
		}
		fmt.Printf("| %s | %.0f MB | %.1f | %.1f | **%.2f×** | %.1f | %.1f | **%.2f×** |\n", mix, float64(st.Size())/1e6,
			r.Ours.Prefill, r.LlamaCpp.Prefill, r.Ours.Prefill/r.LlamaCpp.Prefill, r.Ours.Decode, r.LlamaCpp.Decode, r.Ours.Decode/r.LlamaCpp.Decode)
	}
	return nil
}

// quantizeMix makes base's mix with llama.cpp's llama_model_quantize,
// once, with the importance matrix for the types that need one.
func quantizeMix(quantmodel, base, imatrix, mix string) (string, error) {
	ft, err := quantize.ParseFType(mix)
	if err != nil {
		return "", err
	}
	out := strings.TrimSuffix(base, ".gguf") + "-" + strings.ToLower(mix) + ".gguf"
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	args := []string{out + ".tmp", fmt.Sprint(int(ft))}
	if strings.HasPrefix(mix, "IQ2") || strings.HasPrefix(mix, "IQ3") || strings.HasPrefix(mix, "IQ1") {
		args = append([]string{"--imatrix", imatrix, base}, args...)
	} else {
		args = append([]string{base}, args...)
	}
	cmd := exec.Command(quantmodel, args...)
	if log, err := cmd.CombinedOutput(); err != nil { // its progress is long; show it only on failure
		os.Remove(out + ".tmp")
		return "", fmt.Errorf("quantmodel %s: %w\n%s", mix, err, log)
	}
	return out, os.Rename(out+".tmp", out)
}

func bench(tool, model string, o options) (*result, error) {
	cmd := command(tool, "bench", "decode", model, "--threads", fmt.Sprint(o.threads), "--runs", fmt.Sprint(o.runs),
		"-n", fmt.Sprint(o.tokens), "--prompt-tokens", fmt.Sprint(o.prompt), "--json", "-q")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	var r result
	return &r, json.Unmarshal(out.Bytes(), &r)
}

func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	return cmd
}

// writeImatrix writes a legacy (.dat) importance matrix for every matrix
// of the model: seeded log-normal importances, so the i-quants' searches
// see an uneven weighting, as they do with a real one.
func writeImatrix(model, out string) error {
	s, err := gguf.OpenSet(model)
	if err != nil {
		return err
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(14, 14))
	le := binary.LittleEndian
	var body bytes.Buffer
	n := 0
	for i := range s.Tensors {
		ti := &s.Tensors[i]
		if len(ti.Shape) < 2 || strings.Contains(ti.Name, "norm") || strings.Contains(ti.Name, "gate_inp") {
			continue
		}
		vals := make([]float32, ti.Dim(0)*ti.Dim(2))
		for k := range vals {
			vals[k] = float32(math.Exp(r.NormFloat64()))
		}
		binary.Write(&body, le, int32(len(ti.Name)))
		body.WriteString(ti.Name)
		binary.Write(&body, le, int32(1)) // ncall
		binary.Write(&body, le, int32(len(vals)))
		binary.Write(&body, le, vals)
		n++
	}
	var file bytes.Buffer
	binary.Write(&file, le, int32(n))
	file.Write(body.Bytes())
	// Written aside and renamed, so an interrupted run leaves no short
	// file that the next one would take for the matrix.
	if err := os.WriteFile(out+".tmp", file.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
