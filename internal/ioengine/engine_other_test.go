//go:build !linux

package ioengine

import (
	"errors"
	"strings"
	"testing"
)

// TestPortableFallback: off Linux, Uring is unavailable, Auto reads with
// pread and says why, a file asked for with O_DIRECT is read buffered with
// the reason, and the bytes are right.
func TestPortableFallback(t *testing.T) {
	if _, err := New(Options{Backend: Uring}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("uring backend: err = %v, want ErrUnavailable", err)
	}
	e := newEngine(t, Options{Backend: Auto, Direct: true})
	if e.Backend() != Pread || !strings.Contains(e.FallbackReason(), "Linux") {
		t.Fatalf("auto: backend %v, reason %q; want pread, because io_uring is Linux's", e.Backend(), e.FallbackReason())
	}
	path, data := writeFile(t, diskDir(t), "data", 1<<20+1234, 1)
	f := open(t, e, path)
	if f.Direct() || f.Align() != 1 || !strings.Contains(f.BufferedReason(), "Linux") {
		t.Fatalf("file: Direct %v, Align %d, reason %q; want buffered", f.Direct(), f.Align(), f.BufferedReason())
	}
	if requests, _ := readRandom(t, e, f, data, 200, 4, 2); requests < 200 {
		t.Errorf("%d requests checked, want at least 200", requests)
	}
}
