// Package atomicfile publishes files so that a reader never sees a
// half-written one: data goes to a hidden temporary file in the target
// directory, which is fsynced, renamed over the target, and the directory
// fsynced. An interrupted write leaves only a temporary file whose name
// starts with ".gguftool-tmp-", never a file under the final name.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of every temporary file this package makes.
const TempPrefix = ".gguftool-tmp-"

// File is a temporary file that becomes Path on Commit.
type File struct {
	*os.File
	Path string
	done bool
}

// Create makes a temporary file beside path.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+".*")
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file private (0600); the published file gets
	// the ordinary mode a created file would have.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, Path: path}, nil
}

// Commit fsyncs the data, renames the temporary file to Path and fsyncs
// the directory.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: already committed or aborted")
	}
	f.done = true
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.File.Close()
		os.Remove(tmp)
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return Rename(tmp, f.Path)
}

// Abort closes and removes the temporary file; it is safe to call after
// Commit (it then does nothing), so it can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// Rename renames oldpath to newpath and fsyncs newpath's directory, so the
// rename survives a crash.
func Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		os.Remove(oldpath)
		return err
	}
	return SyncDir(filepath.Dir(newpath))
}

// SyncDir fsyncs a directory.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name is one of this package's temporary files.
func IsTemp(name string) bool {
	return strings.HasPrefix(filepath.Base(name), TempPrefix)
}
