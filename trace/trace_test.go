package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
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

// TestImportAllocatesByInput: the geometry the flags give (here the
// largest a trace holds, 65534 layers × top-255) sizes nothing before the
// input holds it: a few bytes of input cost a small bound of memory,
// whether they convert or are refused as truncated.
func TestImportAllocatesByInput(t *testing.T) {
	h := Header{Layers: 0xFFFE, Experts: 0xFFFF, TopK: 255, Imported: true}
	hash := make([]byte, 12)
	binary.LittleEndian.PutUint64(hash, 77)
	for _, c := range []struct {
		format string
		data   []byte
	}{{"dense-u16", []byte{1, 0, 2, 0, 3, 0, 4, 0, 5}}, {"hash12", hash}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tw, err := NewWriter(io.Discard, h)
		if err != nil {
			t.Fatal(err)
		}
		err = Import(c.format, bytes.NewReader(c.data), c.format, tw)
		runtime.ReadMemStats(&after)
		n := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes allocated (%v)", c.format, n, err)
		if n > 512<<10 {
			t.Errorf("%s: %d bytes of input allocated %d bytes", c.format, len(c.data), n)
		}
		if c.format == "dense-u16" && !errors.Is(err, gguf.ErrFormat) || c.format == "hash12" && err != nil {
			t.Errorf("%s: %v", c.format, err)
		}
	}
}
