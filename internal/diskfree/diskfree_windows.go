package diskfree

import (
	"os"

	"golang.org/x/sys/windows"
)

// Available is GetDiskFreeSpaceEx's bytes available to the calling user
// (quotas included) on the volume holding dir: what statfs's f_bavail
// gives on Unix.
func Available(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, &os.PathError{Op: "GetDiskFreeSpaceEx", Path: dir, Err: err}
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, &os.PathError{Op: "GetDiskFreeSpaceEx", Path: dir, Err: err}
	}
	return int64(min(avail, 1<<63-1)), nil
}
