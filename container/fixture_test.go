package container

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/fixturetest"
)

var update = flag.Bool("update", false, "rewrite the format fixtures in testdata/")

// The container fixture: layer 3, two experts, a Q8_0 and an F16
// component, each expert's bytes a pattern of its own.
const containerFixture = "testdata/v1-layer3.experts"

func fixtureComponents() []Component {
	return []Component{
		{Name: "blk.3.ffn_gate_exps.weight", Type: gguf.TypeQ8_0, Shape: []int64{32, 2, 2}, BytesPerExpert: gguf.TypeQ8_0.RowBytes(32) * 2},
		{Name: "blk.3.ffn_down_exps.weight", Type: gguf.TypeF16, Shape: []int64{8, 2, 2}, BytesPerExpert: gguf.TypeF16.RowBytes(8) * 2},
	}
}

// fixtureData is component c of expert e's bytes.
func fixtureData(e, c int, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + e*64 + c*16 + i*7)
	}
	return b
}

// TestContainerFixture: the writer still writes, byte for byte, the
// container checked in (header, component table, checksum index, records
// at their offsets), and the reader still decodes it to what was written.
func TestContainerFixture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.experts")
	comps := fixtureComponents()
	w, err := Create(path, 3, comps, 2, DefaultComponentAlign)
	if err != nil {
		t.Fatal(err)
	}
	for c, comp := range comps {
		// A component's bytes arrive as the source tensor's: expert 0's
		// slice, then expert 1's.
		if err := w.Write(c, append(fixtureData(0, c, comp.BytesPerExpert), fixtureData(1, c, comp.BytesPerExpert)...)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fixturetest.Check(t, containerFixture, got, *update)

	r, err := Open(containerFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.Header
	if h.Version != 1 || h.Layer != 3 || h.Experts != 2 || h.Align != 256 || h.HeaderSize != 4096 || h.Stride != 4096 || h.FileSize != 3*4096 {
		t.Errorf("header %+v", h)
	}
	want := fixtureComponents()
	want[0].Offset, want[1].Offset = 0, 256
	for c := range want {
		g := h.Components[c]
		if len(h.Components) != 2 || g.Name != want[c].Name || g.Type != want[c].Type || !slices.Equal(g.Shape, want[c].Shape) ||
			g.Offset != want[c].Offset || g.BytesPerExpert != want[c].BytesPerExpert {
			t.Errorf("component %d: %+v, want %+v", c, g, want[c])
		}
		for e := range 2 {
			data, err := r.ReadComponent(e, c, nil)
			if err != nil || !bytes.Equal(data, fixtureData(e, c, want[c].BytesPerExpert)) {
				t.Errorf("expert %d component %d: %v, % x", e, c, err, data)
			}
		}
	}
	var findings []error
	if err := r.Verify(context.Background(), func(err error) { findings = append(findings, err) }, nil); err != nil || len(findings) > 0 {
		t.Errorf("verify: %v %v", err, findings)
	}
}
