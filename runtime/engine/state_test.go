package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/synth"
)

// stateLayouts are the architectures, and the attention layouts within
// them, whose state the tests below hold to: every architecture, plus
// latent attention with one attn_kv_b and kimi-k3 without residual
// attention (which batches).
func stateLayouts() []struct {
	name, arch string
	mutate     func(*synth.Config)
} {
	var out []struct {
		name, arch string
		mutate     func(*synth.Config)
	}
	for _, arch := range Archs {
		out = append(out, struct {
			name, arch string
			mutate     func(*synth.Config)
		}{arch, arch, nil})
	}
	return append(out,
		struct {
			name, arch string
			mutate     func(*synth.Config)
		}{"deepseek2-v2lite", "deepseek2", func(c *synth.Config) {
			c.QLoraRank, c.KVB, c.HeadsKV, c.Gating, c.YaRN = 0, true, c.Heads, synth.GatingSoftmax, 0
		}},
		struct {
			name, arch string
			mutate     func(*synth.Config)
		}{"kimi-k3-no-residual", "kimi-k3", func(c *synth.Config) { c.AttnResBlock = 0 }})
}

func randomPrompt(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 3))
	p := make([]int, n)
	for i := range p {
		p[i] = 1 + r.IntN(200)
	}
	return p
}

// TestKVCacheHoldsWhatItUses: a prompt of T tokens costs T positions of
// cache per layer, at the cache's type, whether it is evaluated in one
// call or in batches; decoding grows the cache by a quarter at a time,
// and a session that reserved its generation never grows. (It reserved
// 64·T positions for a T-token prefill.)
func TestKVCacheHoldsWhatItUses(t *testing.T) {
	src, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) { c.HeadDim = 32 })
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		t.Run(kv.String(), func(t *testing.T) {
			m := open(t, src, Options{CacheTypeK: kv, CacheTypeV: kv, BatchSize: 64})
			per := m.KVBytesPerPosition()
			h := m.Hparams
			if want := int64(h.Layers) * 2 * kv.GGUF().RowBytes(int64(h.HeadsKV*h.HeadDim)); per != want {
				t.Fatalf("KVBytesPerPosition %d, want %d", per, want)
			}
			ctx := context.Background()
			const T = 300
			s, _ := m.NewSession(1000)
			if _, err := s.Eval(ctx, randomPrompt(1, T), false); err != nil {
				t.Fatal(err)
			}
			if got := s.StateBytes(); got != T*per {
				t.Fatalf("after a %d-token prompt in batches of 64: %d bytes, want exactly %d", T, got, T*per)
			}
			for i := range 100 {
				if _, err := s.Eval(ctx, []int{1 + i}, false); err != nil {
					t.Fatal(err)
				}
				if got, most := s.StateBytes(), int64(s.Pos()+s.Pos()/4+16)*per; got > most {
					t.Fatalf("at position %d: %d bytes, more than a quarter over (%d)", s.Pos(), got, most)
				}
			}
			r, _ := m.NewSession(1000)
			if err := r.Reserve(T + 50); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Eval(ctx, randomPrompt(1, T), false); err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				if _, err := r.Eval(ctx, []int{1 + i}, false); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.StateBytes(); got != (T+50)*per {
				t.Fatalf("a reserved generation holds %d bytes, want exactly %d", got, (T+50)*per)
			}
			r.Close()
			if r.StateBytes() != 0 {
				t.Fatal("Close kept the state")
			}
		})
	}
}

// TestBatchSizeGivesTheSameBits: a prompt evaluated in batches of 1, 7,
// 64 or all at once gives the same logits at every position, bit for bit,
// in every architecture and with each cache type: attention reads each
// row's cached keys and values, the recurrences walk the tokens in order,
// and every matrix product computes each row alone.
func TestBatchSizeGivesTheSameBits(t *testing.T) { batchSizeGivesTheSameBits(t, Options{}) }

// batchSizeGivesTheSameBits is the test on the backend o asks for.
func batchSizeGivesTheSameBits(t *testing.T, o Options) {
	prompt := randomPrompt(2, 70)
	for _, l := range stateLayouts() {
		t.Run(l.name, func(t *testing.T) {
			src, _ := testModel(t, l.arch, gguf.TypeQ8_0, l.mutate)
			for _, kv := range []KVType{KVF32, KVF16} {
				var want []float32
				for _, b := range []int{len(prompt), 64, 7, 1} {
					o.BatchSize, o.CacheTypeK, o.CacheTypeV = b, kv, kv
					m := open(t, src, o)
					s, _ := m.NewSession(len(prompt))
					defer s.Close()
					got, err := s.Eval(context.Background(), prompt, true)
					if err != nil {
						t.Fatal(err)
					}
					got = slices.Clone(got)
					if want == nil {
						want = got
						continue
					}
					sameBits(t, fmt.Sprintf("%s cache, batches of %d", kv, b), got, want)
				}
			}
		})
	}
}

// cancelAt is an expert source that cancels the step when layer `layer`
// asks for its experts, after the layer's attention has written its keys
// and values or advanced its recurrent state.
type cancelAt struct {
	ExpertSource
	layer  int
	cancel context.CancelFunc
	hit    bool
}

func (c *cancelAt) Fetch(ctx context.Context, layer int, experts []int, use func(int, Expert) error) error {
	if layer == c.layer {
		c.hit = true
		c.cancel()
		return ctx.Err()
	}
	return c.ExpertSource.Fetch(ctx, layer, experts, use)
}

// TestCancelledStepLeavesNoTrace cancels a step at every MoE layer of
// every architecture — with its attention's keys and values written or its
// recurrent state advanced — and then evaluates the same tokens again:
// the logits, and those of the steps after, are the bits of a session
// that was never interrupted, alone and in a batch. So does a step
// cancelled as any layer begins, dense layers included. The step reports
// the cancellation and leaves the position where it was.
func TestCancelledStepLeavesNoTrace(t *testing.T) { cancelledStepLeavesNoTrace(t, Options{}) }

// cancelledStepLeavesNoTrace is the test on the backend o asks for.
func cancelledStepLeavesNoTrace(t *testing.T, o Options) {
	prompt, next := randomPrompt(3, 9), []int{17, 4, 99}
	for _, l := range stateLayouts() {
		t.Run(l.name, func(t *testing.T) {
			src, _ := testModel(t, l.arch, gguf.TypeQ8_0, l.mutate)
			m := open(t, src, o)
			run := func(s *Session, tokens []int) []float32 {
				t.Helper()
				out, err := s.Eval(context.Background(), tokens, false)
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(out) // the session's buffer: the next Eval reuses it
			}
			ref, _ := m.NewSession(32)
			want := [][]float32{run(ref, prompt), run(ref, next[:1]), run(ref, next[1:])}
			hits := 0
			for il := range m.Hparams.Layers {
				for _, batched := range []bool{false, true} {
					s, _ := m.NewSession(32)
					run(s, prompt)
					ctx, cancel := context.WithCancel(context.Background())
					saved := m.experts
					c := &cancelAt{ExpertSource: saved, layer: il, cancel: cancel}
					m.experts = c
					var err error
					if batched {
						other, _ := m.NewSession(32)
						_, err = m.EvalBatch(ctx, []BatchItem{{s, next[:1]}, {other, next[:2]}})
					} else {
						_, err = s.Eval(ctx, next[:1], false)
					}
					m.experts = saved
					cancel()
					if !c.hit {
						continue // a dense layer: no experts to ask for
					}
					hits++
					what := fmt.Sprintf("cancelled at layer %d (batched %v)", il, batched)
					if !errors.Is(err, context.Canceled) || s.Pos() != len(prompt) {
						t.Fatalf("%s: %v at position %d; want the cancellation, at %d", what, err, s.Pos(), len(prompt))
					}
					sameBits(t, what+", then again", run(s, next[:1]), want[1])
					sameBits(t, what+", the step after", run(s, next[1:]), want[2])
				}
			}
			// Experts in VRAM are not fetched: only the cancellations
			// as each layer begins reach their steps.
			if hits == 0 && m.Placement().Experts != "vram" {
				t.Fatal("no layer was cancelled: the test tested nothing")
			}
			// Cancelled as each layer begins, dense layers included.
			for n := 1; ; n++ {
				s, _ := m.NewSession(32)
				run(s, prompt)
				ctx := &countdown{Context: context.Background(), left: n}
				if _, err := s.Eval(ctx, next[:1], false); err == nil {
					if n <= m.Hparams.Layers {
						t.Fatalf("a step asked for its context's error %d times and was not cancelled", n)
					}
					break
				} else if !errors.Is(err, context.Canceled) || s.Pos() != len(prompt) {
					t.Fatalf("cancelled at check %d: %v at position %d", n, err, s.Pos())
				}
				sameBits(t, fmt.Sprintf("cancelled at check %d, then again", n), run(s, next[:1]), want[1])
			}
		})
	}
}

// countdown is a context that reports itself cancelled from the n-th
// time its Err is asked: the forward pass asks at each layer's start.
type countdown struct {
	context.Context
	left int
}

func (c *countdown) Err() error {
	if c.left--; c.left <= 0 {
		return context.Canceled
	}
	return nil
}

// TestKVCacheTypesAgree: an F16 cache stays close to F32's (its rounding,
// not another computation: F32 weights, so that no activation
// quantization amplifies it) and picks the same next token where F32's
// choice is not a near-tie; a Q8_0 cache, whose rounding this random
// model amplifies to about a logit, stays within a few; a Q8_0 cache is
// refused, naming the size, for heads that are not whole blocks of 32.
// (TestAttendOverQ8_0 checks the Q8_0 arithmetic itself.)
func TestKVCacheTypesAgree(t *testing.T) {
	src, _ := testModel(t, "qwen3moe", gguf.TypeF32, func(c *synth.Config) { c.HeadDim = 64 })
	prompt := randomPrompt(4, 40)
	logits := func(kv KVType) []float32 {
		m := open(t, src, Options{CacheTypeK: kv, CacheTypeV: kv})
		s, _ := m.NewSession(len(prompt))
		out, err := s.Eval(context.Background(), prompt, true)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := logits(KVF32)
	V := len(want) / len(prompt)
	for kv, tol := range map[KVType]float64{KVF16: 2e-2, KVQ8_0: 3} {
		got := logits(kv)
		var worst float64
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if worst > tol || worst == 0 {
			t.Errorf("%s cache: logits differ from F32's by up to %g; want above 0 and at most %g", kv, worst, tol)
		}
		for p := range prompt {
			w, g := want[p*V:(p+1)*V], got[p*V:(p+1)*V]
			best := Argmax(w)
			second := float32(math.Inf(-1))
			for i, v := range w {
				if i != best {
					second = max(second, v)
				}
			}
			if float64(w[best]-second) > 2*tol && Argmax(g) != best {
				t.Errorf("%s cache, position %d: token %d, F32 picks %d by a margin of %g", kv, p, Argmax(g), best, w[best]-second)
			}
		}
	}
	odd, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) { c.HeadDim = 48 })
	if _, err := Open(context.Background(), odd, Options{CacheTypeK: KVQ8_0}); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Errorf("a Q8_0 cache for heads of 48: %v, want a refusal naming the block", err)
	}
	if _, err := ParseKVType("q4_0"); err == nil {
		t.Error("ParseKVType accepted q4_0")
	}
}

// TestAttendOverQ8_0: attention over Q8_0 values is attention over the
// values those blocks decode to, bit for bit: the cache's only change is
// its rounding. Keys in Q8_0 are dotted with the query in Q8_0, as ggml
// does, and stay within the two roundings of the float dot product.
func TestAttendOverQ8_0(t *testing.T) {
	be := newCPUBackend(&workers{n: 1})
	ar := be.NewArena()
	const T, H, HD = 7, 2, 64
	width := H * HD
	q, k, v := make([]float32, T*width), make([]float32, T*width), make([]float32, T*width)
	for i := range q {
		q[i], k[i], v[i] = float32(math.Sin(float64(i)*0.37)), float32(math.Cos(float64(i)*0.11)), float32(math.Sin(float64(i)*0.23+1))
	}
	g := AttnGeom{Heads: H, Group: 1, KDim: HD, VDim: HD, QStride: width, Scale: 0.125}
	rows := func(typ KVType, x []float32) KVStore {
		c := be.NewKV(typ, width, T)
		if err := be.KVAppend(c, hostTensor(x), T); err != nil {
			t.Fatal(err)
		}
		return c
	}
	decoded := func(c KVStore) []float32 {
		out, err := quant.Dequantize(nil, gguf.TypeQ8_0, c.(*kvRows).raw())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	kq, vq := rows(KVQ8_0, k), rows(KVQ8_0, v)
	got, want := make([]float32, T*width), make([]float32, T*width)
	attend := func(out []float32, k, v KVStore) { be.Attend(ar, hostTensor(out), hostTensor(q), k, v, g, 0, T) }
	attend(got, rows(KVF32, k), vq)
	attend(want, rows(KVF32, k), rows(KVF32, decoded(vq)))
	sameBits(t, "Q8_0 values", got, want)
	attend(got, kq, rows(KVF32, v))
	attend(want, rows(KVF32, decoded(kq)), rows(KVF32, v))
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 2e-2 {
			t.Fatalf("Q8_0 keys: output %d is %g, over the decoded keys %g", i, got[i], want[i])
		}
	}
}
