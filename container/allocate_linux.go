package container

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves size bytes of zeros, falling back to a sparse
// truncate where fallocate is not supported.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}
