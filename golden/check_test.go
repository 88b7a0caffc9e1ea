package golden

import (
	"context"
	"testing"

	"github.com/gguftool/gguftool/engine"
)

// TestRuntimeGoldens runs the engine on every fixture of an architecture
// it supports and requires llama.cpp's greedy ids and log-probabilities.
func TestRuntimeGoldens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, s := range Fixtures {
		if !Supported(s) {
			continue
		}
		t.Run(s.Name(), func(t *testing.T) {
			f, err := Read(Path(s))
			if err != nil {
				t.Fatal(err)
			}
			model, _, err := Build(ctx, s, dir)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Check(ctx, f, model, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("greedy %d/%d, max |Δ log p| %.3g at %s, median %.3g (tolerance %g, median %g)", r.GreedyMatch, len(f.Greedy),
				r.MaxLogprobDiff, r.Worst, r.MedianLogprobDiff, r.Tolerance.LogprobAbs, r.Tolerance.MedianAbs)
			if !r.OK {
				t.Errorf("got greedy %v, want %v", r.Greedy, f.Greedy)
			}
		})
	}
}
