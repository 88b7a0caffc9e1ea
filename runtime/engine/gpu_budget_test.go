package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu"
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
