package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// continueFrom evaluates rest on s, then decodes n tokens greedily, and
// returns every logit it saw.
func continueFrom(t *testing.T, s *Session, rest []int, n int) []float32 {
	t.Helper()
	out, err := s.Eval(context.Background(), rest, false)
	if err != nil {
		t.Fatal(err)
	}
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
