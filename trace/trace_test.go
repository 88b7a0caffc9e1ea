package trace

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestTraceRejects: truncation, a wrong layer or expert, a missing end
// record and bad magic are errors with an offset, never a panic.
func TestTraceRejects(t *testing.T) {
	var buf bytes.Buffer
	h := Header{Layers: 2, Experts: 8, TopK: 2, ModelName: "m"}
	tw, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Step(0, []Record{{Layer: 0, Expert: 3}, {Layer: 0, Expert: 5, Rank: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	hdr := len(good) - 3*RecordSize
	cases := map[string][]byte{
		"truncated":  good[:len(good)-5],
		"bad magic":  append([]byte("GGUFTRCX"), good[8:]...),
		"bad layer":  patch(good, hdr+4, 9),
		"bad expert": patch(good, hdr+6, 8),
		"no end":     good[:len(good)-RecordSize],
		"flags":      patch(good, hdr+9, 0x80),
	}
	for name, data := range cases {
		tr, err := NewReader(bytes.NewReader(data), name)
		if err == nil {
			_, _, err = tr.Next(nil)
		}
		var te *FormatError
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
