package tiers

import (
	"io/fs"
	"syscall"
)

// ctimeOf is the inode change time, when the file system reports one.
func ctimeOf(st fs.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ctim.Sec*1e9 + sys.Ctim.Nsec
	}
	return 0
}
