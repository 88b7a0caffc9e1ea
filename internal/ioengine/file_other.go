//go:build !linux

package ioengine

// openDirect leaves the file buffered: O_DIRECT and the statx alignment
// query it relies on are Linux's, and the engine streams with direct I/O
// only there (docs/ioengine.md).
func (f *File) openDirect() error {
	f.buffered = "direct I/O is implemented on Linux only"
	return nil
}
