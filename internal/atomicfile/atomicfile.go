// Package atomicfile publishes files so that a reader never sees a
// half-written one: data goes to a hidden temporary file in the target
// directory, which is fsynced, renamed over the target, and the directory
// fsynced. An interrupted write leaves only a temporary file whose name
// starts with ".gguftool-tmp-", never a file under the final name.
//
// Publish and SyncedRename take the file system as an FS, so the storage
// tiers run the same publication over a file system that forgets unsynced
// writes in their crash tests; OS is the real one.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
		// Name the file asked for, not the temporary's pattern.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, &fs.PathError{Op: "create", Path: path, Err: pe.Err}
		}
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
	if err := Publish(OS{}, f.File, tmp, f.Path); err != nil {
		os.Remove(tmp)
		return f.named(err)
	}
	return nil
}

// Write writes to the temporary file; an error names Path, not it.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.named(err)
}

// WriteString is Write for a string.
func (f *File) WriteString(str string) (int, error) {
	n, err := f.File.WriteString(str)
	return n, f.named(err)
}

// WriteAt writes to the temporary file at off; an error names Path.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.named(err)
}

// ReadFrom copies r into the temporary file (io.Copy uses it); an error
// names Path.
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	n, err := f.File.ReadFrom(r)
	return n, f.named(err)
}

// named makes an error about the temporary file name Path instead: the
// hidden temporary name means nothing to the user, who asked for Path
// (a full disk reads "write model.gguf: no space left on device"). The
// original error stays underneath for errors.Is and errors.As.
func (f *File) named(err error) error {
	if err == nil || !strings.Contains(err.Error(), f.File.Name()) {
		return err
	}
	return &namedError{err: err, tmp: f.File.Name(), path: f.Path}
}

type namedError struct {
	err       error
	tmp, path string
}

func (e *namedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.tmp, e.path) }
func (e *namedError) Unwrap() error { return e.err }

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

// FS is what a publication does to a file system.
type FS interface {
	Rename(oldpath, newpath string) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// OS is the real file system.
type OS struct{}

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// SyncDir implements FS.
func (OS) SyncDir(dir string) error { return SyncDir(dir) }

// SyncCloser is a written temporary file a publication makes durable.
type SyncCloser interface {
	Sync() error
	Close() error
}

// Publish makes tmp, written through f, the file at path: it fsyncs and
// closes f, renames tmp over path and fsyncs path's directory. f is
// closed whatever happens; tmp is left for the caller to remove or
// recover on failure.
func Publish(fsys FS, f SyncCloser, tmp, path string) error {
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SyncedRename(fsys, tmp, path)
}

// SyncedRename renames oldpath to newpath and fsyncs newpath's directory,
// so the rename survives a crash.
func SyncedRename(fsys FS, oldpath, newpath string) error {
	if err := fsys.Rename(oldpath, newpath); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(newpath))
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
