package tiers

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"
)

// Windows builds and runs the tiers with what it has: LockFileEx for the
// locks (released, like flock's, when a crashed holder's handle closes),
// and no inode or change time in a stat. Stamps then rest on size and
// modification time alone, so a file is rehashed rather than trusted more
// often than on Unix, and a hard link is not told from a copy by inode.

// sysFileID has nothing to give: Windows' stat carries no file index.
func sysFileID(fs.FileInfo) (fileID, bool) { return fileID{}, false }

// ctimeOf is 0: Windows' stat has no inode change time.
func ctimeOf(fs.FileInfo) int64 { return 0 }

// lockFile takes LockFileEx on f's first byte without waiting: busy when
// another holds it.
func lockFile(f *os.File, exclusive bool) (busy bool, err error) {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	err = windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}

func unlockFile(f *os.File) {
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, new(windows.Overlapped))
}

// processGone cannot tell here, so a lock is taken over only when its
// lease ends.
func processGone(int) bool { return false }
