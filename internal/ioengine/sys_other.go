//go:build !unix

package ioengine

import (
	"errors"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// Outside Unix (Windows) files are read with the pread fallback only,
// through os.File: there is no io_uring and no O_DIRECT, so nothing needs
// a descriptor or page-aligned memory the kernel writes into while Go is
// not looking. This keeps the tool building and working there, not fast.

// handle is an open file as the pread backend reads it.
type handle = *os.File

var noHandle handle

// openRead opens path read-only.
func openRead(path string) (handle, error) { return os.Open(path) }

func sizeOf(h handle) (int64, error) { return h.Seek(0, io.SeekEnd) }

func closeHandle(h handle) error { return h.Close() }

// preadAt is one positioned read: the bytes read, 0 at the end of the
// file, or -errno, as advance takes them. Bytes read before an error
// count; the error comes back on the next read.
func preadAt(h handle, dst []byte, off int64) int32 {
	n, err := h.ReadAt(dst, off)
	if n > 0 || err == nil || errors.Is(err, io.EOF) {
		return int32(n)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && int32(errno) > 0 {
		return -int32(errno)
	}
	return -int32(syscall.EIO)
}

// mapPool allocates a pool's memory on the Go heap, aligned to PageSize
// as a mapping is (every Buffer is PageSize-aligned): only synchronous
// reads land in it here, and the Go heap does not move.
func mapPool(n int) ([]byte, error) {
	b := make([]byte, n+PageSize)
	skip := (PageSize - int(uintptr(unsafe.Pointer(&b[0]))%PageSize)) % PageSize
	return b[skip : skip+n : skip+n], nil
}

// unmapPool leaves the memory to the collector.
func unmapPool([]byte) error { return nil }
