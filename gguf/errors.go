package gguf

import (
	"errors"
	"fmt"
)

// ErrFormat marks every error caused by malformed input, so callers can
// tell corruption from I/O failure with errors.Is(err, gguf.ErrFormat).
var ErrFormat = errors.New("gguf: malformed file")

// FormatError reports malformed input: which file, at which byte offset,
// and what was wrong there.
type FormatError struct {
	File   string // path or name of the file, if known
	Offset int64  // absolute byte offset of the offending field
	Msg    string
}

func (e *FormatError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("gguf: %s: offset %d: %s", e.File, e.Offset, e.Msg)
	}
	return fmt.Sprintf("gguf: offset %d: %s", e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrFormat) true for every FormatError.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// SetError reports a split set whose shards are missing, duplicated or
// inconsistent. It also matches ErrFormat.
type SetError struct {
	Prefix string
	Shards []string // the shards concerned
	Msg    string
}

func (e *SetError) Error() string {
	if len(e.Shards) == 0 {
		return fmt.Sprintf("gguf: split set %s: %s", e.Prefix, e.Msg)
	}
	return fmt.Sprintf("gguf: split set %s: %s: %v", e.Prefix, e.Msg, e.Shards)
}

// Is makes errors.Is(err, ErrFormat) true for every SetError.
func (e *SetError) Is(target error) bool { return target == ErrFormat }
