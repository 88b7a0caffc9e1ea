package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/synth"
)

// TestGPURouting: the device's routing kernel against the host's
// pickExperts on the same random router logits, for every architecture's
// gating (softmax, sigmoid with a selection bias, group-limited,
// softmax over the chosen, renormalised and scaled): the same experts in
// the same order wherever the host's top-k margin is not a near-tie the
// device's exponential could flip (2e-6), the weights within 2e-6
// relative, the margins within 2e-6.
func TestGPURouting(t *testing.T) {
	dev := testGPU(t)
	layouts := map[string]func(*synth.Config){}
	for _, arch := range Archs {
		layouts[arch] = nil
	}
	layouts["deepseek2-groups"] = func(c *synth.Config) { c.Arch, c.ExpertGroups, c.GroupsUsed = "deepseek2", 4, 2 }
	for name, mutate := range layouts {
		t.Run(name, func(t *testing.T) {
			arch := name
			if mutate != nil {
				arch = "deepseek2"
			}
			src, _ := testModel(t, arch, gguf.TypeF32, mutate)
			host, device := open(t, src, Options{}), open(t, src, Options{GPU: dev})
			hs, _ := host.NewSession(8)
			defer hs.Close()
			ds, _ := device.NewSession(8)
			defer ds.Close()
			b := device.be.(*gpuBackend)
			ds.beginArena(ds.ownArena())
			h := host.Hparams
			E, K, T := h.Experts, h.ExpertsUsed, 37
			hs.scratch.order = make([]int, E)
			rng := rand.New(rand.NewPCG(uint64(E), uint64(len(name))))
			checked := 0
			for il := range h.Layers {
				if !h.isMoE(il) {
					continue
				}
				j, ok := ds.deviceRouteJob(il, T)
				if !ok {
					t.Fatalf("layer %d: the device cannot route %+v", il, j)
				}
				logits := make([]float32, T*E)
				for i := range logits {
					logits[i] = float32(3 * rng.NormFloat64())
				}
				logits[5], logits[6] = logits[7], logits[7] // ties, broken by the lower id
				lt, sel, scratch := ds.step.Tensor(T*E), ds.step.Tensor(T*(2*K+1)), ds.step.Tensor(2*T*E)
				b.Write(lt, logits)
				b.do(func(bt *gpu.Batch) error { return bt.Route(span(sel), span(lt), span(scratch), j) })
				got := slices.Clone(b.Read(sel))
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				ids, weights := make([]int, K), make([]float32, K)
				for tok := range T {
					margin := hs.pickExperts(&host.layers[il], slices.Clone(logits[tok*E:(tok+1)*E]), ids, weights)
					if margin <= 2e-6 {
						continue
					}
					checked++
					for r := range K {
						if gid := int(math.Float32bits(got[tok*K+r])); gid != ids[r] {
							t.Fatalf("layer %d token %d: expert %d of the top %d is %d on the device, %d on the host (margin %.3g)", il, tok, r, K, gid, ids[r], margin)
						}
						if gw := got[T*K+tok*K+r]; math.Abs(float64(gw-weights[r])) > 2e-6*math.Abs(float64(weights[r]))+1e-12 {
							t.Errorf("layer %d token %d: weight %d is %v on the device, %v on the host", il, tok, r, gw, weights[r])
						}
					}
					if gm := got[2*T*K+tok]; math.Abs(float64(gm-margin)) > 2e-6 {
						t.Errorf("layer %d token %d: margin %v on the device, %v on the host", il, tok, gm, margin)
					}
				}
				ds.step.Reset()
			}
			t.Logf("%d tokens of %d MoE layers compared", checked, h.MoELayers())
			if checked < T {
				t.Fatalf("%d tokens compared: the test tested too little", checked)
			}
		})
	}
}
