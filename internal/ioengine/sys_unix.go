//go:build unix

package ioengine

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// handle is an open file as the backends read it: a descriptor, which
// io_uring's SQEs name.
type handle = int

const noHandle handle = -1

// openRead opens path read-only and buffered.
func openRead(path string) (handle, error) {
	return openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC)
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			if err != nil {
				return -1, &os.PathError{Op: "open", Path: path, Err: err}
			}
			return fd, nil
		}
	}
}

// sizeOf is the file's size by seeking to its end, which is also right for
// block devices, where st_size is 0.
func sizeOf(h handle) (int64, error) { return unix.Seek(h, 0, io.SeekEnd) }

func closeHandle(h handle) error { return unix.Close(h) }

// preadAt is one pread: the bytes read, or -errno as io_uring reports it,
// so that both backends go through advance alike.
func preadAt(h handle, dst []byte, off int64) int32 {
	n, err := unix.Pread(h, dst, off)
	if errno, ok := err.(unix.Errno); ok {
		return -int32(errno)
	}
	return int32(n)
}

// mapPool maps n zero bytes for a pool, MAP_PRIVATE|MAP_ANONYMOUS: zero
// pages on demand, freed by munmap. mmap returns page-aligned memory, so
// every buffer starts on a page, as O_DIRECT needs.
func mapPool(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

func unmapPool(b []byte) error { return unix.Munmap(b) }
