package trace

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/internal/fixturetest"
)

var update = flag.Bool("update", false, "rewrite the format fixtures in testdata/")

// traceStep is one step of a fixture.
type traceStep struct {
	step int
	recs []Record
}

// traceFixtures are the checked-in traces: one recorded by a run (a
// prefill of two positions, a decode step served from every level, a
// step where no layer routed anything, a gap in the steps) and one
// imported (no digest, every record from level 0).
var traceFixtures = []struct {
	file   string
	header Header
	steps  []traceStep
}{
	{"testdata/v1-recorded.trace", Header{Layers: 2, Experts: 8, TopK: 2, ModelName: "synth-qwen3moe-seed7",
		ModelDigest: [16]byte{0: 0x01, 1: 0x23, 7: 0x45, 8: 0x67, 15: 0x89}}, []traceStep{
		{0, []Record{{Layer: 0, Expert: 3, Rank: 0, Prefill: true, From: LevelSSD}, {Layer: 0, Expert: 7, Rank: 1, Prefill: true, From: LevelSSD},
			{Layer: 1, Expert: 0, Rank: 0, Prefill: true, From: LevelSSD}, {Layer: 1, Expert: 5, Rank: 1, Prefill: true, From: LevelSSD}}},
		{1, []Record{{Layer: 0, Expert: 3, Rank: 0, Prefill: true, From: LevelRAM}, {Layer: 1, Expert: 6, Rank: 0, Prefill: true, From: LevelSSD}}},
		{2, []Record{{Layer: 0, Expert: 1, Rank: 0, From: LevelResident}, {Layer: 0, Expert: 2, Rank: 1, From: LevelRAM},
			{Layer: 1, Expert: 4, Rank: 0, From: LevelSSD}, {Layer: 1, Expert: 7, Rank: 1, From: LevelVRAM}}},
		{3, nil},
		{9, []Record{{Layer: 1, Expert: 2, Rank: 0, From: LevelRAM}}},
	}},
	{"testdata/v1-imported.trace", Header{Layers: 1, Experts: 4, TopK: 1, ModelName: "hash12", Imported: true}, []traceStep{
		{0, []Record{{Layer: 0, Expert: 2}}},
		{1, []Record{{Layer: 0, Expert: 0}}},
	}},
}

// TestTraceFixtures: the writer still writes, byte for byte, the traces
// checked in, and the reader still decodes them to the steps written.
func TestTraceFixtures(t *testing.T) {
	for _, fx := range traceFixtures {
		t.Run(fx.file, func(t *testing.T) {
			var b bytes.Buffer
			w, err := NewWriter(&b, fx.header)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range fx.steps {
				if err := w.Step(s.step, s.recs); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			fixturetest.Check(t, fx.file, b.Bytes(), *update)

			r, closer, err := Open(fx.file)
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			if r.Header != fx.header {
				t.Errorf("header %+v, want %+v", r.Header, fx.header)
			}
			for _, want := range fx.steps {
				step, recs, err := r.Next(nil)
				if err != nil {
					t.Fatalf("step %d: %v", want.step, err)
				}
				for i := range want.recs {
					want.recs[i].Step = uint32(want.step)
				}
				if step != want.step || !slices.Equal(recs, want.recs) {
					t.Errorf("step %d %v, want step %d %v", step, recs, want.step, want.recs)
				}
			}
			if _, _, err := r.Next(nil); !errors.Is(err, io.EOF) {
				t.Errorf("after the last step: %v, want io.EOF", err)
			}
		})
	}
}
