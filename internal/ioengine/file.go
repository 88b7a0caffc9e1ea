package ioengine

import (
	"fmt"
	"sync"
)

// File is a file opened for reading by an Engine, with O_DIRECT where the
// file system supports it. Its size is taken at Open: the files this package
// reads are immutable artifacts, and requests are checked against it.
type File struct {
	path     string
	fd       handle
	size     int64
	direct   bool
	align    int    // O_DIRECT alignment of offsets, lengths and addresses; 1 when buffered
	buffered string // why reads are buffered; "" when direct

	mu       sync.Mutex
	inflight int
	closed   bool
}

// openFile opens path read-only, with O_DIRECT when direct is set and the
// file system supports it (openDirect decides, per OS), else buffered.
func openFile(path string, direct bool) (*File, error) {
	f := &File{path: path, fd: noHandle, align: 1}
	if direct {
		if err := f.openDirect(); err != nil {
			return nil, err
		}
	} else {
		f.buffered = "direct I/O not requested"
	}
	if f.fd == noHandle {
		fd, err := openRead(path)
		if err != nil {
			return nil, &Error{Op: "open", Path: path, Err: err}
		}
		f.fd = fd
	}
	size, err := sizeOf(f.fd)
	if err != nil {
		closeHandle(f.fd)
		return nil, &Error{Op: "open", Path: path, Err: fmt.Errorf("size: %w", err)}
	}
	f.size = size
	return f, nil
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
	if err := closeHandle(f.fd); err != nil {
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
