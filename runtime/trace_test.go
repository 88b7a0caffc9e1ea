package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestTraceRoundTrip: a streamed run's trace reads back with one step per
// position, top-k records per layer in rank order, prefill flagged, and
// the served-from tiers adding up to the source's hits and misses.
func TestTraceRoundTrip(t *testing.T) {
	for _, name := range []string{"run.trace", "run.trace.zst"} {
		t.Run(name, func(t *testing.T) {
			_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
			m := open(t, pack, Options{Cache: CacheOptions{Slots: 6}})
			path := filepath.Join(t.TempDir(), name)
			tf, err := CreateTraceFile(path, m.TraceHeader())
			if err != nil {
				t.Fatal(err)
			}
			g, err := m.Generate(context.Background(), testPrompt, GenerateOptions{MaxTokens: 5, Trace: func(pos int, ev []RouteEvent) error {
				recs := make([]TraceRecord, len(ev))
				for i, e := range ev {
					recs[i] = TraceRecord{Layer: uint16(e.Layer), Expert: uint16(e.Expert), Rank: uint8(e.Rank), Prefill: e.Prefill, From: e.From}
				}
				return tf.Step(pos, recs)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tf.Close(); err != nil {
				t.Fatal(err)
			}
			tr, c, err := OpenTrace(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tr.Header != m.TraceHeader() {
				t.Fatalf("header %+v, want %+v", tr.Header, m.TraceHeader())
			}
			h := m.Hparams
			var steps int
			var recs []TraceRecord
			for {
				step, rs, err := tr.Next(recs)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				recs = rs
				if step != steps || len(rs) != h.Layers*h.ExpertsUsed {
					t.Fatalf("step %d (want %d) with %d records", step, steps, len(rs))
				}
				for i, r := range rs {
					if int(r.Layer) != i/h.ExpertsUsed || int(r.Rank) != i%h.ExpertsUsed || r.Prefill != (step < len(testPrompt)) {
						t.Fatalf("step %d record %d: %+v", step, i, r)
					}
					if r.From != TierRAM && r.From != TierSSD {
						t.Fatalf("step %d: served from %v", step, r.From)
					}
				}
				steps++
			}
			// The last generated token is never fed back.
			if want := len(testPrompt) + len(g.Tokens) - 1; steps != want {
				t.Errorf("%d steps, want %d", steps, want)
			}
		})
	}
}

// TestTraceRejects: truncation, a wrong layer or expert, a missing end
// record and bad magic are errors with an offset, never a panic.
func TestTraceRejects(t *testing.T) {
	var buf bytes.Buffer
	h := TraceHeader{Layers: 2, Experts: 8, TopK: 2, ModelName: "m"}
	tw, err := NewTraceWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Step(0, []TraceRecord{{Layer: 0, Expert: 3}, {Layer: 0, Expert: 5, Rank: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	hdr := len(good) - 3*TraceRecordSize
	cases := map[string][]byte{
		"truncated":  good[:len(good)-5],
		"bad magic":  append([]byte("GGUFTRCX"), good[8:]...),
		"bad layer":  patch(good, hdr+4, 9),
		"bad expert": patch(good, hdr+6, 8),
		"no end":     good[:len(good)-TraceRecordSize],
		"flags":      patch(good, hdr+9, 0x80),
	}
	for name, data := range cases {
		tr, err := NewTraceReader(bytes.NewReader(data), name)
		if err == nil {
			_, _, err = tr.Next(nil)
		}
		var te *TraceError
		if !errors.As(err, &te) || !errors.Is(err, gguf.ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}

}

func patch(b []byte, off int, v byte) []byte {
	c := bytes.Clone(b)
	c[off] = v
	return c
}
