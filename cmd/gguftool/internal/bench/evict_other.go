//go:build !linux

package bench

import (
	"errors"
	"fmt"
)

// evict fails: posix_fadvise(DONTNEED) is Linux's, so the timings are taken
// with a warm cache and the result says so (cache_evicted false).
func evict(path string) error {
	return fmt.Errorf("evicting %s from the page cache: %w", path, errors.ErrUnsupported)
}
