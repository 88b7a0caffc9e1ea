package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// localityText is the prompt of TestRoutingLocality: English prose, as
// byte tokens.
const localityText = "The history of the city begins with a small settlement on the banks of the river, " +
	"where farmers and traders gathered to exchange grain, wool and salt. Over the centuries the village " +
	"grew into a market town, and the market town into a city with walls, churches and a university."

// nextTokenReuse runs the prompt and a few generated tokens through a
// synthesized model and returns the fraction of each position's routed
// experts that the next position routes again, over every MoE layer.
func nextTokenReuse(t *testing.T, locality float32) float64 {
	t.Helper()
	path, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, func(c *synth.Config) {
		c.Layers = 4
		c.Experts = 32
		c.RoutingLocality = locality
	})
	m := open(t, path, Options{})
	prompt := make([]int, len(localityText))
	for i := range localityText {
		prompt[i] = int(localityText[i])
	}
	// steps[pos][layer] are the experts position pos routed in layer.
	var steps [][][]int
	_, err := m.Generate(context.Background(), prompt, GenerateOptions{MaxTokens: 16, Trace: func(pos int, ev []RouteEvent) error {
		s := make([][]int, m.Hparams.Layers)
		for _, e := range ev {
			s[e.Layer] = append(s[e.Layer], e.Expert)
		}
		steps = append(steps, s)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var reused, routed int
	for p := 1; p < len(steps); p++ {
		for l, experts := range steps[p-1] {
			for _, e := range experts {
				routed++
				if slices.Contains(steps[p][l], e) {
					reused++
				}
			}
		}
	}
	if routed == 0 {
		t.Fatal("no routing recorded")
	}
	return float64(reused) / float64(routed)
}

// TestRoutingLocality: synth's routing locality makes a token route
// largely to the experts of the token before it, where the plain random
// model reuses few more than chance (top-4 of 32 experts: 12.5 %).
func TestRoutingLocality(t *testing.T) {
	const bound = 0.35
	plain := nextTokenReuse(t, 0)
	local := nextTokenReuse(t, synth.DefaultRoutingLocality)
	t.Logf("next-token expert reuse: %.1f%% at locality 0, %.1f%% at %g", 100*plain, 100*local, synth.DefaultRoutingLocality)
	if plain >= bound {
		t.Errorf("locality 0 reuses %.1f%% of experts, want under %.0f%%", 100*plain, 100*bound)
	}
	if local <= bound {
		t.Errorf("locality %g reuses %.1f%% of experts, want over %.0f%%", synth.DefaultRoutingLocality, 100*local, 100*bound)
	}
}
