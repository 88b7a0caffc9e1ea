//go:build !linux

package ioengine

import "errors"

// startUring fails: io_uring is Linux's, so Auto reads with pread and says
// why in Engine.FallbackReason.
func (e *Engine) startUring() error {
	return errors.New("io_uring is Linux-only")
}
