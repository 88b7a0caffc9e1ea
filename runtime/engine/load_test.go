package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestOpenReportsProgress: Open reports the bytes it has read, never
// going back and never past the total, and its last report says it is
// complete; the total is what it reads: every tensor of a GGUF, a pack's
// resident tensors with or without its experts.
func TestOpenReportsProgress(t *testing.T) {
	for _, arch := range Archs {
		src, pack := testModel(t, arch, gguf.TypeQ8_0, nil)
		for _, c := range []struct {
			name, path string
			o          Options
		}{
			{"gguf", src, Options{}},
			{"pack, streamed", pack, Options{}},
			{"pack, resident", pack, Options{ResidentExperts: true}},
		} {
			var reports [][2]int64
			c.o.Progress = func(done, total int64) { reports = append(reports, [2]int64{done, total}) }
			m := open(t, c.path, c.o)
			if len(reports) == 0 {
				t.Fatalf("%s %s: no progress reported", arch, c.name)
			}
			for i, r := range reports {
				if r[0] > r[1] || (i > 0 && (r[0] < reports[i-1][0] || r[1] < reports[i-1][1])) {
					t.Fatalf("%s %s: report %d is %d of %d after %v", arch, c.name, i, r[0], r[1], reports[max(0, i-1)])
				}
			}
			last := reports[len(reports)-1]
			if last[0] != last[1] {
				t.Errorf("%s %s: the last report is %d of %d bytes", arch, c.name, last[0], last[1])
			}
			if c.name == "pack, streamed" && last[0] != m.ResidentBytes {
				t.Errorf("%s %s: read %d bytes, the resident weights are %d", arch, c.name, last[0], m.ResidentBytes)
			}
			if c.name != "pack, streamed" && last[0] <= m.ResidentBytes {
				t.Errorf("%s %s: read %d bytes, no more than the %d resident ones: the experts were not counted", arch, c.name, last[0], m.ResidentBytes)
			}
		}
	}
}

// TestOpenStopsWhenCancelled: a load cancelled as it reads stops at the
// next look at its context, with the context's error, reads nothing more,
// and leaves nothing open; one cancelled before it starts reads nothing.
func TestOpenStopsWhenCancelled(t *testing.T) {
	src, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	for _, path := range []string{src, pack} {
		for _, o := range []Options{{}, {ResidentExperts: true}} {
			ctx, cancel := context.WithCancel(context.Background())
			reports := 0
			o.Progress = func(done, total int64) {
				reports++
				cancel()
			}
			m, err := Open(ctx, path, o)
			if !errors.Is(err, context.Canceled) || m != nil {
				t.Fatalf("%s: a cancelled load returned %v, %v; want context.Canceled", path, m, err)
			}
			if reports != 1 {
				t.Errorf("%s: %d progress reports after the cancel, want it to stop at the first", path, reports-1)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		reports := 0
		_, err := Open(ctx, path, Options{Progress: func(int64, int64) { reports++ }})
		if !errors.Is(err, context.Canceled) || reports != 0 {
			t.Errorf("%s: opened with a done context: %v after %d reports", path, err, reports)
		}
	}
}
