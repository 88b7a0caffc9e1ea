package iostreams

import (
	"bytes"
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:       "0 bytes",
		1:       "1 byte",
		1023:    "1023 bytes",
		1024:    "1024 bytes (1.0 KiB)",
		1 << 30: "1073741824 bytes (1.0 GiB)",
		5e8:     "500000000 bytes (476.8 MiB)",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 files"}, {1, "1 file"}, {2, "2 files"}} {
		if got := Plural(c.n, "file"); got != c.want {
			t.Errorf("Plural(%d, file) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Plural(int64(1), "shard"); got != "1 shard" {
		t.Errorf("Plural(int64(1), shard) = %q", got)
	}
}

// TestProgressUsesBinaryUnits: the bar on a terminal counts in the units
// the summaries print (MiB), not in decimal megabytes.
func TestProgressUsesBinaryUnits(t *testing.T) {
	var errOut bytes.Buffer
	s := &IOStreams{ErrOut: &errOut, stderrTTY: true}
	p := s.NewProgress(64<<20, "copy")
	p.Add(48 << 20)
	p.Finish()
	out := errOut.String()
	if !strings.Contains(out, "MiB") || strings.Contains(out, " MB") {
		t.Errorf("progress bar does not count in MiB:\n%q", out)
	}
}
