package golden

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/runtime/engine"
)

// TestRuntimeGoldens runs the engine on every fixture and requires
// llama.cpp's greedy ids and log-probabilities. Every fixture is of an
// architecture the engine runs, and every architecture it runs has one:
// a test that skipped them all, or checked none of an architecture, would
// pass having compared nothing.
func TestRuntimeGoldens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var ran []string
	checked := map[string]int{} // fixtures compared, by architecture
	for _, s := range Fixtures {
		if !Supported(s) {
			t.Errorf("fixture %s: the engine does not run %s", s.Name(), s.Arch)
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
			ran = append(ran, s.Name())
			checked[s.Arch]++
			t.Logf("greedy %d/%d, max |Δ log p| %.3g at %s, median %.3g (tolerance %g, median %g)", r.GreedyMatch, len(f.Greedy),
				r.MaxLogprobDiff, r.Worst, r.MedianLogprobDiff, r.Tolerance.LogprobAbs, r.Tolerance.MedianAbs)
			if !r.OK {
				t.Errorf("got greedy %v, want %v", r.Greedy, f.Greedy)
			}
		})
	}
	t.Logf("%d fixtures compared: %v", len(ran), ran)
	if len(ran) == 0 {
		t.Fatal("no fixture was compared with its golden")
	}
	if subtestsSelected() {
		return
	}
	for _, a := range engine.Archs {
		if checked[a] == 0 {
			t.Errorf("no fixture of %s was compared with its golden", a)
		}
	}
	if len(ran) != len(Fixtures) {
		t.Errorf("%d of %d fixtures compared", len(ran), len(Fixtures))
	}
}

// subtestsSelected reports whether -run or -skip picks subtests, so that
// not every fixture is meant to run.
func subtestsSelected() bool {
	run, skip := flag.Lookup("test.run"), flag.Lookup("test.skip")
	return (run != nil && strings.Contains(run.Value.String(), "/")) || (skip != nil && skip.Value.String() != "")
}
