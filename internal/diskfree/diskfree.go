//go:build unix

// Package diskfree says how many bytes a file system will still take from
// an unprivileged writer, so that a command can refuse work that would
// fill the disk before it writes anything.
package diskfree

import (
	"os"

	"golang.org/x/sys/unix"
)

// Available is statfs's bytes available to unprivileged users on the file
// system holding dir. The block size is an int64 on Linux and a uint32 on
// Darwin, hence the conversion.
func Available(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
