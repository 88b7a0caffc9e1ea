package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// continueFrom evaluates rest on s, then decodes n tokens greedily, and
// returns every logit it saw.
func continueFrom(t *testing.T, s *Session, rest []int, n int) []float32 {
	t.Helper()
	out, err := s.Eval(context.Background(), rest, false)
	if err != nil {
		t.Fatal(err)
	}
	out = slices.Clone(out) // the session's buffer: the next Eval reuses it
	return append(out, greedy(t, s, out, n)...)
}

// TestPrefixResumeEqualsFresh: a session resumed from a saved prefix and
// given the rest of its prompt produces the logits of a session that
// evaluated the whole prompt, bit for bit, in every architecture: from a
// common leading run of another prompt where the model keeps only keys and
// values, and from the whole prefix where it keeps a recurrent state too.
func TestPrefixResumeEqualsFresh(t *testing.T) {
	a := []int{5, 17, 29, 3, 88, 41, 7, 63, 12, 90}
	shared := append(slices.Clone(a[:6]), 101, 102, 103, 104, 105, 106)
	longer := append(slices.Clone(a), 111, 112, 113)
	for _, arch := range Archs {
		t.Run(arch, func(t *testing.T) {
			src, _ := testModel(t, arch, gguf.TypeQ8_0, nil)
			m := open(t, src, Options{})
			s, err := m.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Eval(context.Background(), a, false); err != nil {
				t.Fatal(err)
			}
			p, err := s.Prefix(a)
			if err != nil || p.Bytes() <= 0 {
				t.Fatalf("prefix: %v (%d bytes)", err, p.Bytes())
			}
			for _, prompt := range [][]int{shared, longer, a} {
				keep := p.Reusable(prompt)
				switch {
				case slices.Equal(prompt, a) && keep != len(a)-1 && keep != 0:
					t.Fatalf("the prefix's own prompt: reusable %d", keep)
				case slices.Equal(prompt, longer) && keep != len(a):
					t.Fatalf("a prompt the whole prefix begins: reusable %d, want %d", keep, len(a))
				case slices.Equal(prompt, shared) && keep != 6 && !(p.recurrent && keep == 0):
					t.Fatalf("a prompt sharing 6 tokens: reusable %d", keep)
				}
				fresh, _ := m.NewSession(32)
				want := continueFrom(t, fresh, prompt, 4)
				resumed, err := m.ResumeSession(p, keep, 32)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, fmt.Sprintf("%d tokens resumed of %v", keep, prompt), continueFrom(t, resumed, prompt[keep:], 4), want)
			}
			if _, err := m.ResumeSession(p, len(a)+1, 32); err == nil {
				t.Error("resumed more positions than the prefix holds")
			}
			if p.recurrent {
				if _, err := m.ResumeSession(p, 3, 32); err == nil || !strings.Contains(err.Error(), "only whole") {
					t.Errorf("a recurrent state resumed in part: %v", err)
				}
			}
		})
	}
}

// TestPrefixOfAnotherModel: a prefix resumes only in the model that made
// it. Another model of the same shape and the same metadata (synth with
// another seed under the same name: the same layer count, tensor table
// and GGUF header digest, other weights) refuses it, naming both, as do
// the same file opened again and a zero Prefix; the model that made it
// still resumes it.
func TestPrefixOfAnotherModel(t *testing.T) {
	prompt := []int{5, 17, 29, 3}
	named := func(seed uint64) func(*synth.Config) {
		return func(c *synth.Config) { c.Name, c.Seed = "same-name", seed }
	}
	srcA, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, named(7))
	srcB, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, named(8))
	a, b := open(t, srcA, Options{}), open(t, srcB, Options{})
	if a.digest != b.digest || a.Hparams.Layers != b.Hparams.Layers {
		t.Fatal("the two models do not share a shape and a metadata digest: the test would prove less than it says")
	}
	s, err := a.NewSession(16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval(context.Background(), prompt, false); err != nil {
		t.Fatal(err)
	}
	p, err := s.Prefix(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ResumeSession(p, 3, 16); err == nil || !strings.Contains(err.Error(), "another model, "+srcA) {
		t.Errorf("another model of the same shape resumed the prefix: %v", err)
	}
	again := open(t, srcA, Options{})
	if _, err := again.ResumeSession(p, 3, 16); err == nil || !strings.Contains(err.Error(), srcA+" opened separately") {
		t.Errorf("the same file opened again resumed the prefix: %v", err)
	}
	if _, err := a.ResumeSession(&Prefix{}, 0, 16); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("a zero prefix resumed: %v", err)
	}
	resumed, err := a.ResumeSession(p, 3, 16)
	if err != nil {
		t.Fatalf("the model that made the prefix refused it: %v", err)
	}
	resumed.Close()
}
