// Package filekind refuses a path that names the wrong kind of file
// before anything opens it. Opening a named pipe for reading blocks in
// open(2) until a writer appears, out of reach of a cancelled context; a
// device may never end; a directory fails later with a message about
// offsets. Every reader of a file the user names (GGUF files, containers,
// manifests, traces, imatrix and configuration files) checks it here
// first, so all of them refuse the same way, with an error that says
// what the path is.
package filekind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrWrongKind is what every *Error wraps: the path exists but is not
// the kind of file the caller reads (gguftool exits 2, a usage error).
var ErrWrongKind = errors.New("wrong kind of file")

// Error says what a path is and what was wanted in its place.
type Error struct {
	Path string
	Is   string // "a named pipe", "a directory without pack.json"
	Want string // "a regular file", "a pack"
}

func (e *Error) Error() string { return fmt.Sprintf("%s: is %s, not %s", e.Path, e.Is, e.Want) }
func (e *Error) Unwrap() error { return ErrWrongKind }

// Describe names the kind of file a mode says: "a directory", "a named
// pipe", "a character device", and so on.
func Describe(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

// CheckRegular returns nil when path, after symbolic links, is a regular
// file; the *fs.PathError of os.Stat when it cannot be looked at (a
// missing file stays fs.ErrNotExist); and an *Error otherwise.
func CheckRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &Error{Path: path, Is: Describe(st.Mode()), Want: "a regular file"}
	}
	return nil
}

// Open opens path for reading once CheckRegular accepts it.
func Open(path string) (*os.File, error) {
	if err := CheckRegular(path); err != nil {
		return nil, err
	}
	return os.Open(path)
}

// ReadFile reads the whole file at path once CheckRegular accepts it.
func ReadFile(path string) ([]byte, error) {
	if err := CheckRegular(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
