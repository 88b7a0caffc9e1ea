//go:build unix

package tiers

import (
	"os"

	"golang.org/x/sys/unix"
)

// diskFree is statfs's bytes available to unprivileged users. The block
// size is an int64 on Linux and a uint32 on Darwin.
func diskFree(root string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: root, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
