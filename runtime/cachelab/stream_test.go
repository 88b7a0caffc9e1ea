package cachelab

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/trace"
)

// randomTraceBytes writes a trace of steps positions over layers ×
// experts, top-k: prompts of random lengths (some longer than
// PrefillBatch, so batches split) between runs of decoded positions,
// experts skewed towards a few hot ones.
func randomTraceBytes(t testing.TB, r *rand.Rand, layers, experts, topK, steps int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := trace.NewWriter(&b, trace.Header{Layers: layers, Experts: experts, TopK: topK})
	if err != nil {
		t.Fatal(err)
	}
	prefill := 0
	for step := range steps {
		if prefill == 0 && r.IntN(400) == 0 {
			prefill = 1 + r.IntN(2*PrefillBatch)
		}
		var recs []trace.Record
		for l := range layers {
			if r.IntN(8) == 0 {
				continue // a layer that routed nothing at this position
			}
			used := map[int]bool{}
			for rank := range topK {
				e := r.IntN(experts)
				if r.IntN(3) > 0 {
					e = r.IntN(max(1, experts/5))
				}
				if used[e] {
					continue
				}
				used[e] = true
				recs = append(recs, trace.Record{Layer: uint16(l), Expert: uint16(e), Rank: uint8(rank), Prefill: prefill > 0, From: trace.LevelSSD})
			}
		}
		if err := w.Step(step, recs); err != nil {
			t.Fatal(err)
		}
		prefill = max(0, prefill-1)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReplayStreamEqualsLoad: streaming a trace through every policy at
// once, Belady through its scratch file, gives exactly the counts of
// loading the whole trace and replaying each policy alone, with one
// cache or one per layer, at capacities from none to more than every
// pair. The trace has more lookups than a scratch chunk holds.
func TestReplayStreamEqualsLoad(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, shape := range [][4]int{{4, 48, 3, 3000}, {1, 9, 2, 500}, {7, 64, 4, 400}} {
		data := randomTraceBytes(t, r, shape[0], shape[1], shape[2], shape[3])
		read := func() *trace.Reader {
			tr, err := trace.NewReader(bytes.NewReader(data), "random.trace")
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		a, err := Load(context.Background(), read())
		if err != nil {
			t.Fatal(err)
		}
		prefill := 0
		for _, g := range a.Groups {
			if g.Prefill {
				prefill++
			}
		}
		if lookups := a.Lookups(); shape[3] == 3000 && (lookups <= chunkEntries || prefill == 0) {
			t.Fatalf("%d lookups (%d in prefill groups) do not cross a scratch chunk of %d or hold a prompt", lookups, prefill, chunkEntries)
		}
		pairs := a.Pairs()
		for _, perLayer := range []bool{false, true} {
			var runs []Run
			for _, c := range []int{0, 1, 2, pairs / 10, pairs / 3, pairs, 10 * pairs} {
				for _, p := range Policies {
					runs = append(runs, Run{Policy: p, Capacity: c})
				}
			}
			scratch, err := os.Create(filepath.Join(t.TempDir(), "next"))
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := ReplayStream(context.Background(), read(), runs, perLayer, DefaultOptions, scratch)
			scratch.Close()
			if err != nil {
				t.Fatal(err)
			}
			if st.Steps != a.Steps || st.Records != a.Records || st.Lookups != a.Lookups() {
				t.Errorf("%v: streamed %+v, loaded %d steps, %d records, %d lookups", shape, st, a.Steps, a.Records, a.Lookups())
			}
			for i, run := range runs {
				want, err := a.Replay(run.Policy, run.Capacity, perLayer, DefaultOptions)
				if err != nil {
					t.Fatal(err)
				}
				if got[i] != want {
					t.Errorf("%v per-layer %v: %s at %d: streamed %+v, loaded %+v", shape, perLayer, run.Policy, run.Capacity, got[i], want)
				}
			}
		}
	}
}

// TestReplayStreamRefuses: a bad policy or capacity is refused before the
// trace is read, and Belady without a scratch file is an error, not a
// replay without next uses.
func TestReplayStreamRefuses(t *testing.T) {
	data := randomTraceBytes(t, rand.New(rand.NewPCG(1, 1)), 2, 8, 2, 10)
	for _, runs := range [][]Run{{{Policy: "arc", Capacity: 1}}, {{Policy: "lru", Capacity: -1}}, {{Policy: "belady", Capacity: 2}}} {
		tr, err := trace.NewReader(bytes.NewReader(data), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReplayStream(context.Background(), tr, runs, false, DefaultOptions, nil); err == nil {
			t.Errorf("%+v: no error", runs)
		}
	}
}

// FuzzReplayStream: on any bytes, streaming and loading agree: both
// refuse a malformed trace with the same error, or give the same counts
// for every policy, with one cache or one per layer.
func FuzzReplayStream(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, shape := range [][4]int{{2, 8, 2, 40}, {1, 4, 1, 30}, {3, 16, 3, 60}} {
		f.Add(randomTraceBytes(f, r, shape[0], shape[1], shape[2], shape[3]), false, uint8(3))
	}
	f.Add(randomTraceBytes(f, r, 2, 8, 2, 40)[:100], true, uint8(1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, perLayer bool, capacity uint8) {
		if len(data) > 16<<10 {
			// Every policy scans its cache per eviction: a long trace at
			// hundreds of slots takes seconds and finds nothing a short
			// one does not.
			return
		}
		tr, err := trace.NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		a, loadErr := Load(context.Background(), tr)
		var runs []Run
		for _, c := range []int{0, int(capacity), 3 * int(capacity)} {
			for _, p := range Policies {
				runs = append(runs, Run{Policy: p, Capacity: c})
			}
		}
		scratch, err := os.CreateTemp(dir, "next")
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(scratch.Name())
		defer scratch.Close()
		tr, _ = trace.NewReader(bytes.NewReader(data), "fuzz")
		got, _, err := ReplayStream(context.Background(), tr, runs, perLayer, DefaultOptions, scratch)
		if (err == nil) != (loadErr == nil) || err != nil && err.Error() != loadErr.Error() {
			t.Fatalf("streamed: %v; loaded: %v", err, loadErr)
		}
		if err != nil {
			return
		}
		for i, run := range runs {
			want, err := a.Replay(run.Policy, run.Capacity, perLayer, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != want {
				t.Fatalf("%s at %d, per-layer %v: streamed %+v, loaded %+v", run.Policy, run.Capacity, perLayer, got[i], want)
			}
		}
	})
}
