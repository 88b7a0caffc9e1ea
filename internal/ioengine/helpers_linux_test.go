package ioengine

import (
	"testing"

	"golang.org/x/sys/unix"
)

// requireDiskBacked fails the test when dir is on tmpfs or ramfs, where
// O_DIRECT is not exercised for real.
func requireDiskBacked(tb testing.TB, dir string) {
	tb.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		tb.Fatal(err)
	}
	if sfs.Type == tmpfsMagic || sfs.Type == ramfsMagic {
		tb.Fatalf("%s is on tmpfs/ramfs: the O_DIRECT tests need a disk-backed file system", dir)
	}
}
