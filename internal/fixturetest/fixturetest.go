// Package fixturetest holds the formats gguftool owns to bytes checked in
// under each package's testdata/: a writer and a reader changed together
// still pass a round trip, but not a comparison with bytes written before
// the change. Each format's test writes its fixture deterministically and
// compares (Check), and reads the checked-in file back and checks what it
// decodes. Only tests import it.
package fixturetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got, what the writer produced, with the fixture at path
// and fails t at the first byte that differs. With update (the calling
// package's -update flag) it writes got to path instead: for a change of
// format made on purpose, which also bumps the format's version and keeps
// a fixture of the old one for its reader.
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(got))
		return
	}
	want := Read(t, path)
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Errorf("%s: the writer's %d bytes differ from the fixture's %d from offset %d:\n got  %s\n want %s\n"+
		"a change of format bumps its version and keeps a fixture of the old one; then rewrite this one with -update",
		path, len(got), len(want), i, window(got, i), window(want, i))
}

// Read returns the fixture at path, failing t when it cannot be read.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go test -run '%s' -update)", err, t.Name())
	}
	return b
}

// window shows the bytes from i on, a few of them, in hex.
func window(b []byte, i int) string {
	if i >= len(b) {
		return "(end)"
	}
	return fmt.Sprintf("% x", b[i:min(len(b), i+24)])
}
