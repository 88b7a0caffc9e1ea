package ioengine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// File is a file opened for reading by an Engine, with O_DIRECT where the
// file system supports it. Its size is taken at Open: the files this package
// reads are immutable artifacts, and requests are checked against it.
type File struct {
	path     string
	fd       int
	size     int64
	direct   bool
	align    int    // O_DIRECT alignment of offsets, lengths and addresses; 1 when buffered
	buffered string // why reads are buffered; "" when direct

	mu       sync.Mutex
	inflight int
	closed   bool
}

// Page-cache-only file systems: they accept O_DIRECT (tmpfs since Linux 6.6)
// but only copy through the page cache, and report no DIO alignment.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// openFile opens path read-only, with O_DIRECT when direct is set and the
// file system supports it. The decision, in order:
//
//  1. open with O_DIRECT; EINVAL means the file system refuses it: reopen
//     buffered;
//  2. statx STATX_DIOALIGN: a reported alignment of 0 means no direct I/O for
//     this file; a reported alignment is used as is;
//  3. no alignment reported (a kernel before 6.1, or a file system that does
//     not say): tmpfs and ramfs are buffered, anything else keeps O_DIRECT
//     with PageSize alignment, the largest logical block size in use.
//
// When O_DIRECT is dropped after step 1 it is cleared with fcntl on the same
// descriptor, so the file cannot change between the check and the reads.
func openFile(path string, direct bool) (*File, error) {
	f := &File{path: path, fd: -1, align: 1}
	const flags = unix.O_RDONLY | unix.O_CLOEXEC
	if direct {
		fd, err := openRetry(path, flags|unix.O_DIRECT)
		switch {
		case err == nil:
			f.fd = fd
		case errors.Is(err, unix.EINVAL):
			f.buffered = "the file system refuses O_DIRECT (open: EINVAL)"
		default:
			return nil, &Error{Op: "open", Path: path, Err: err}
		}
	} else {
		f.buffered = "direct I/O not requested"
	}
	if f.fd < 0 {
		fd, err := openRetry(path, flags)
		if err != nil {
			return nil, &Error{Op: "open", Path: path, Err: err}
		}
		f.fd = fd
	} else if err := f.settleDirect(); err != nil {
		unix.Close(f.fd)
		return nil, err
	}
	size, err := unix.Seek(f.fd, 0, io.SeekEnd) // also right for block devices, where st_size is 0
	if err != nil {
		unix.Close(f.fd)
		return nil, &Error{Op: "open", Path: path, Err: fmt.Errorf("size: %w", err)}
	}
	f.size = size
	return f, nil
}

// settleDirect decides, for a descriptor opened with O_DIRECT, whether to
// keep it and with which alignment (steps 2 and 3 of openFile).
func (f *File) settleDirect() error {
	var st unix.Statx_t
	err := unix.Statx(f.fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st)
	switch {
	case err == nil && st.Mask&unix.STATX_DIOALIGN != 0:
		mem, off := int(st.Dio_mem_align), int(st.Dio_offset_align)
		switch {
		case mem == 0 || off == 0:
			f.buffered = "the file system reports no direct I/O support for this file (statx dio_mem_align=0)"
		case max(mem, off) > PageSize:
			f.buffered = fmt.Sprintf("O_DIRECT needs %d-byte alignment, more than the buffers' %d", max(mem, off), PageSize)
		default:
			f.direct, f.align = true, max(off, mem)
		}
	default:
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(f.fd, &sfs); err != nil {
			return &Error{Op: "open", Path: f.path, Err: fmt.Errorf("statfs: %w", err)}
		}
		if sfs.Type == tmpfsMagic || sfs.Type == ramfsMagic {
			f.buffered = "tmpfs/ramfs has no direct I/O path (O_DIRECT would only copy through the page cache)"
		} else {
			f.direct, f.align = true, PageSize
		}
	}
	if f.direct {
		return nil
	}
	fl, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(f.fd), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	if err != nil {
		return &Error{Op: "open", Path: f.path, Err: fmt.Errorf("clearing O_DIRECT: %w", err)}
	}
	return nil
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

// Path is the name the file was opened with.
func (f *File) Path() string { return f.path }

// Size is the file's size at Open.
func (f *File) Size() int64 { return f.size }

// Direct reports whether reads bypass the page cache (O_DIRECT).
func (f *File) Direct() bool { return f.direct }

// Align is the alignment that every request's offset, length and buffer
// position must have: the file system's O_DIRECT alignment (at most
// PageSize), or 1 for a buffered file.
func (f *File) Align() int { return f.align }

// BufferedReason says why the file is read through the page cache, or is ""
// when it is read with O_DIRECT.
func (f *File) BufferedReason() string { return f.buffered }

// Close closes the file. Reads already submitted finish first: the
// descriptor is closed when the last of them completes. New requests on a
// closed file fail with ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	busy := f.inflight > 0
	f.mu.Unlock()
	if busy {
		return nil
	}
	return f.closeFD()
}

func (f *File) closeFD() error {
	if err := unix.Close(f.fd); err != nil {
		return &Error{Op: "close", Path: f.path, Err: err}
	}
	return nil
}

func (f *File) startIO() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.inflight++
	return nil
}

func (f *File) endIO() {
	f.mu.Lock()
	f.inflight--
	last := f.closed && f.inflight == 0
	f.mu.Unlock()
	if last {
		f.closeFD() // nothing to report it to: Close already returned
	}
}

// AlignRange returns the smallest range [aoff, aoff+alen) whose ends are
// multiples of align and that covers [off, off+n), and skip = off-aoff: read
// alen bytes at aoff and the wanted bytes are buf[skip : skip+n]. Pass
// File.Align as align. alen may reach past the end of the file; a request
// that ends there reads up to the end (see Request).
func AlignRange(off int64, n, align int) (aoff int64, alen, skip int) {
	a := int64(align)
	aoff = off - off%a
	end := roundUp(off+int64(n), a)
	return aoff, int(end - aoff), int(off - aoff)
}
