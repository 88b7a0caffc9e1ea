package diskfree

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestAvailable(t *testing.T) {
	n, err := Available(t.TempDir())
	if err != nil || n <= 0 {
		t.Fatalf("Available(a temporary directory) = %d, %v; want some bytes", n, err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	if _, err := Available(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Available(%s): %v, want fs.ErrNotExist naming it", missing, err)
	}
}
