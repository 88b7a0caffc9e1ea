package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/synth"
)

// TestGPUBudgetMidRun: a KV cache that outgrows the VRAM budget fails the
// step that needs the room with the budget's error, both sizes in it, and
// leaves the session at its last complete position, where a session with
// room continues bit for bit.
func TestGPUBudgetMidRun(t *testing.T) {
	dev := testGPU(t)
	src, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m := open(t, src, Options{GPU: dev})
	ref, _ := m.NewSession(4096)
	defer ref.Close()
	prompt := randomPrompt(5, 9)
	if _, err := ref.Eval(context.Background(), prompt, false); err != nil {
		t.Fatal(err)
	}
	want, err := ref.Eval(context.Background(), []int{3}, false)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)

	s, _ := m.NewSession(4096)
	defer s.Close()
	if _, err := s.Eval(context.Background(), prompt, false); err != nil {
		t.Fatal(err)
	}
	// Fill the device to its budget: the next cache growth cannot fit.
	var hog []*gpu.Buffer
	for dev.Budget()-dev.Used() > 1<<16 {
		b, err := dev.Alloc(min(max((dev.Budget()-dev.Used())/2, 1<<16), 64<<20), "hog")
		if err != nil {
			break
		}
		hog = append(hog, b)
	}
	_, err = s.Eval(context.Background(), make([]int, 300), false)
	var be *gpu.BudgetError
	if !errors.As(err, &be) || be.Need == 0 || be.Budget == 0 {
		t.Fatalf("a step past the budget: %v, want the budget's error", err)
	}
	if s.Pos() != len(prompt) {
		t.Fatalf("after the failed step the session is at %d, want %d", s.Pos(), len(prompt))
	}
	for _, b := range hog {
		b.Free()
	}
	got, err := s.Eval(context.Background(), []int{3}, false)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "after the failed step", got, want)
}

// TestGPUExpertsPlacement: the routed experts go to VRAM when the budget
// holds them with its headroom to spare, stay on the CPU (saying why,
// with the sizes) when it does not, and --gpu-experts vram then fails
// with both sizes; on the CPU or in VRAM, the model answers.
func TestGPUExpertsPlacement(t *testing.T) {
	// gpt-oss: biases on every expert matrix; experts many times the
	// activations' scratch, so a budget can hold the one and not the other.
	src, _ := testModel(t, "gpt-oss", gguf.TypeF32, func(c *synth.Config) { c.Experts, c.ExpertFF = 32, 256 })
	probe := open(t, src, Options{GPU: testGPU(t), GPUExperts: ExpertsVRAM})
	p := probe.Placement()
	if p.Experts != "vram" || p.DeviceExpertBytes == 0 {
		t.Fatalf("GPUExperts vram: %+v", p)
	}
	weights, experts := p.DeviceWeightBytes, p.DeviceExpertBytes
	want := transcript(t, probe, 2)

	roomy := int64(float64(weights+experts)/(1-expertHeadroom)) + 8<<20
	m := open(t, src, Options{GPU: testGPUBudget(t, roomy)})
	if got := m.Placement(); got.Experts != "vram" || got.DeviceExpertBytes != experts {
		t.Fatalf("a budget of %d for %d + %d bytes: %+v", roomy, weights, experts, got)
	}
	sameBits(t, "experts in VRAM under a budget", transcript(t, m, 2), want)

	tight := weights + experts*9/10
	m = open(t, src, Options{GPU: testGPUBudget(t, tight)})
	if got := m.Placement(); got.Experts != "ram" || got.DeviceExpertBytes != 0 {
		t.Fatalf("a budget of %d for %d + %d bytes: %+v", tight, weights, experts, got)
	}
	if !slices.ContainsFunc(m.Notes, func(n string) bool {
		return strings.Contains(n, "routed experts") && strings.Contains(n, "run on the CPU:")
	}) {
		t.Errorf("experts left on the CPU by the budget, and no note says why: %q", m.Notes)
	}
	closeLogits(t, "experts on the CPU", transcript(t, m, 2), want, m.Hparams.Vocab, gpuLogitTolerance)

	_, err := Open(context.Background(), src, Options{GPU: testGPUBudget(t, tight), GPUExperts: ExpertsVRAM})
	var be *gpu.BudgetError
	if !errors.As(err, &be) || be.Need != experts || be.Budget != tight || !strings.Contains(err.Error(), "routed experts") {
		t.Fatalf("GPUExperts vram past the budget: %v, want the budget's error for %d bytes of experts", err, experts)
	}
}
