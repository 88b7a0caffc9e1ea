package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// seqPlan is one sequence of a batching test: its prompt, fed in chunks,
// the step it joins at, and how many tokens it then decodes greedily.
type seqPlan struct {
	prompt []int
	chunk  int
	join   int
	decode int
}

// aloneLogits evaluates a sequence alone, chunk by chunk, and returns the
// logits after each chunk's last token and after each decoded token.
func aloneLogits(t *testing.T, m *Model, p seqPlan) [][]float32 {
	t.Helper()
	ctx := context.Background()
	s, err := m.NewSession(len(p.prompt) + p.decode)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for lo := 0; lo < len(p.prompt); lo += p.chunk {
		l, err := s.Eval(ctx, p.prompt[lo:min(lo+p.chunk, len(p.prompt))], false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(l)) // the session's buffer: the next Eval reuses it
	}
	for range p.decode {
		l, err := s.Eval(ctx, []int{Argmax(out[len(out)-1])}, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(l))
	}
	return out
}

// batchedLogits runs every sequence together through EvalBatch, each
// joining at its step with its prompt in chunks, then decoding, and
// leaving when done, and returns each sequence's logits as aloneLogits
// does.
func batchedLogits(t *testing.T, m *Model, plans []seqPlan) [][][]float32 {
	t.Helper()
	ctx := context.Background()
	type live struct {
		s        *Session
		fed, dec int
	}
	out := make([][][]float32, len(plans))
	lives := make([]*live, len(plans))
	for step := 0; ; step++ {
		var items []BatchItem
		var who []int
		for i, p := range plans {
			if step < p.join {
				continue
			}
			if lives[i] == nil {
				s, err := m.NewSession(len(p.prompt) + p.decode)
				if err != nil {
					t.Fatal(err)
				}
				lives[i] = &live{s: s}
			}
			l := lives[i]
			switch {
			case l.fed < len(p.prompt):
				hi := min(l.fed+p.chunk, len(p.prompt))
				items = append(items, BatchItem{l.s, p.prompt[l.fed:hi]})
				l.fed = hi
			case l.dec < p.decode:
				items = append(items, BatchItem{l.s, []int{Argmax(out[i][len(out[i])-1])}})
				l.dec++
			default:
				continue
			}
			who = append(who, i)
		}
		if len(items) == 0 {
			if step > 100 {
				return out
			}
			continue
		}
		logits, err := m.EvalBatch(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for j, i := range who {
			out[i] = append(out[i], slices.Clone(logits[j]))
		}
	}
}

// TestBatchedEqualsAlone: sequences evaluated together, joining and
// leaving at different steps, with prompts in chunks of different sizes,
// give each the logits it gives alone, bit for bit, in every architecture,
// with every expert in RAM and streamed through a small cache.
func TestBatchedEqualsAlone(t *testing.T) { batchedEqualsAlone(t, Options{}) }

// batchedEqualsAlone is the test on the backend o asks for: its options
// are added to each run's.
func batchedEqualsAlone(t *testing.T, o Options) {
	r := rand.New(rand.NewPCG(1, 2))
	prompt := func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = 1 + r.IntN(200)
		}
		return p
	}
	plans := []seqPlan{
		{prompt: prompt(9), chunk: 9, join: 0, decode: 6},
		{prompt: prompt(5), chunk: 2, join: 0, decode: 3},
		{prompt: prompt(12), chunk: 5, join: 2, decode: 5},
		{prompt: prompt(1), chunk: 1, join: 4, decode: 4},
		{prompt: prompt(7), chunk: 7, join: 9, decode: 2}, // joins as others leave
	}
	type layout struct {
		name, arch string
		mutate     func(*synth.Config)
	}
	var layouts []layout
	for _, arch := range Archs {
		layouts = append(layouts, layout{arch, arch, nil})
	}
	layouts = append(layouts,
		// Latent attention with one attn_kv_b (the legacy path).
		layout{"deepseek2-v2lite", "deepseek2", func(c *synth.Config) {
			c.QLoraRank, c.KVB, c.HeadsKV, c.Gating, c.YaRN = 0, true, c.Heads, synth.GatingSoftmax, 0
		}},
		// Without residual attention, kimi-k3's latent layers (gated
		// output) batch too.
		layout{"kimi-k3-no-residual", "kimi-k3", func(c *synth.Config) { c.AttnResBlock = 0 }},
	)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			src, pack := testModel(t, l.arch, gguf.TypeQ8_0, l.mutate)
			switch h := open(t, src, o).Hparams; {
			case l.name == "deepseek2-v2lite" && h.MLA.Absorbed:
				t.Fatal("the layout is not the legacy latent attention")
			case l.name == "kimi-k3-no-residual" && h.ResBlockSize != 0:
				t.Fatal("the layout still has residual attention")
			}
			for _, c := range []struct {
				name string
				path string
				o    Options
			}{
				{"resident", src, Options{}},
				{"streamed, 3 slots, prefetch", pack, Options{Cache: CacheOptions{Slots: 3, Prefetch: true}}},
			} {
				c.o.GPU = o.GPU
				m := open(t, c.path, c.o)
				got := batchedLogits(t, m, plans)
				for i, p := range plans {
					want := aloneLogits(t, m, p)
					if len(got[i]) != len(want) {
						t.Fatalf("%s: sequence %d: %d steps batched, %d alone", c.name, i, len(got[i]), len(want))
					}
					for k := range want {
						sameBits(t, fmt.Sprintf("%s: sequence %d, step %d", c.name, i, k), got[i][k], want[k])
					}
				}
			}
		})
	}
}

// TestBatchedReadsOnce: a step of several sequences fetches each routed
// expert once, however many of its rows chose it.
func TestBatchedReadsOnce(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m := open(t, pack, Options{Cache: CacheOptions{Slots: 0}})
	ctx := context.Background()
	var items []BatchItem
	for i := range 8 {
		s, err := m.NewSession(4)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, BatchItem{s, []int{10 + i}})
	}
	before := m.Experts().Stats()
	if _, err := m.EvalBatch(ctx, items); err != nil {
		t.Fatal(err)
	}
	d := m.Experts().Stats().Sub(before)
	rows, pairs := 8*m.Hparams.ExpertsUsed, m.Hparams.Experts
	if d.Fetches > uint64(m.Hparams.Layers*pairs) || d.Fetches >= uint64(m.Hparams.Layers*rows) {
		t.Errorf("%d fetches for 8 rows × %d experts × %d layers: each expert is not fetched once per step", d.Fetches, m.Hparams.ExpertsUsed, m.Hparams.Layers)
	}
}

func TestEvalBatchRefuses(t *testing.T) {
	src, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m, other := open(t, src, Options{}), open(t, src, Options{})
	s, _ := m.NewSession(4)
	o, _ := other.NewSession(4)
	long := make([]int, DefaultBatchSize+1)
	big, _ := m.NewSession(0)
	for _, c := range []struct {
		items []BatchItem
		want  string
	}{
		{nil, "an empty batch"},
		{[]BatchItem{{s, []int{1}}, {o, []int{1}}}, "another model"},
		{[]BatchItem{{s, []int{1}}, {s, []int{2}}}, "already in the batch"},
		{[]BatchItem{{s, nil}}, "nothing to evaluate"},
		{[]BatchItem{{s, []int{1, 2, 3, 4, 5}}}, "do not fit the context"},
		{[]BatchItem{{s, []int{-1}}}, "outside the vocabulary"},
		{[]BatchItem{{big, long}}, "at most 512"},
	} {
		if _, err := m.EvalBatch(context.Background(), c.items); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.items, err, c.want)
		}
	}
}

// TestConcurrentSessionsTakeTurns: sessions of one model evaluated from
// several goroutines at once (streamed, so they share the expert cache
// too) get the logits each gets alone. Run under -race it also proves the
// model's working memory is never touched by two passes at once.
func TestConcurrentSessionsTakeTurns(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m := open(t, pack, Options{Threads: 2, Cache: CacheOptions{Slots: 3}})
	ctx := context.Background()
	decode := func(seed uint64) ([]float32, error) {
		s, err := m.NewSession(64)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		logits, err := s.Eval(ctx, randomPrompt(seed, 12), false)
		for i := 0; err == nil && i < 8; i++ {
			logits, err = s.Eval(ctx, []int{Argmax(logits)}, false)
		}
		return slices.Clone(logits), err
	}
	const n = 4
	alone := make([][]float32, n)
	for i := range alone {
		var err error
		if alone[i], err = decode(uint64(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	together := make([][]float32, n)
	errs := make(chan error, n)
	for i := range together {
		go func() {
			var err error
			together[i], err = decode(uint64(i + 1))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if !slices.Equal(alone[i], together[i]) {
			t.Errorf("session %d: logits evaluated alongside others differ from alone", i)
		}
	}
}
