//go:build !linux

package ioengine

import "testing"

// requireDiskBacked has nothing to check: off Linux files are read
// buffered, whatever the file system.
func requireDiskBacked(testing.TB, string) {}
