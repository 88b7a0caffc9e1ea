//go:build !linux

package container

import "os"

// allocate makes the file size bytes long, sparse: fallocate is Linux's,
// so elsewhere a full disk shows when the data is written, not up front.
func allocate(f *os.File, size int64) error { return f.Truncate(size) }
