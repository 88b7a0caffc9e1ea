package ioengine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Page-cache-only file systems: they accept O_DIRECT (tmpfs since Linux 6.6)
// but only copy through the page cache, and report no DIO alignment.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// openDirect opens f.path with O_DIRECT when the file system supports it.
// The decision, in order:
//
//  1. open with O_DIRECT; EINVAL means the file system refuses it: f.fd
//     stays -1 and openFile opens the file buffered;
//  2. statx STATX_DIOALIGN: a reported alignment of 0 means no direct I/O for
//     this file; a reported alignment is used as is;
//  3. no alignment reported (a kernel before 6.1, or a file system that does
//     not say): tmpfs and ramfs are buffered, anything else keeps O_DIRECT
//     with PageSize alignment, the largest logical block size in use.
//
// When O_DIRECT is dropped after step 1 it is cleared with fcntl on the same
// descriptor, so the file cannot change between the check and the reads.
func (f *File) openDirect() error {
	fd, err := openRetry(f.path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECT)
	switch {
	case err == nil:
	case errors.Is(err, unix.EINVAL):
		f.buffered = "the file system refuses O_DIRECT (open: EINVAL)"
		return nil
	default:
		return &Error{Op: "open", Path: f.path, Err: err}
	}
	f.fd = fd
	if err := f.settleDirect(); err != nil {
		unix.Close(f.fd)
		return err
	}
	return nil
}

// settleDirect decides, for a descriptor opened with O_DIRECT, whether to
// keep it and with which alignment (steps 2 and 3 of openDirect).
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
