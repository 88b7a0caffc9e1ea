package tiers

import (
	"io/fs"
	"syscall"
)

// ctimeOf is the inode change time, when the file system reports one
// (Darwin's stat names it st_ctimespec).
func ctimeOf(st fs.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ctimespec.Sec*1e9 + sys.Ctimespec.Nsec
	}
	return 0
}
