package tiers

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/filekind"
)

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
}

// FS is every file-system operation the migration engine performs, so a
// test can run it over a file system that forgets unsynced writes at a
// crash (MemFS) and prove nothing durable was lost.
type FS interface {
	Open(name string) (File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm fs.FileMode) error
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// OSFS is the real file system.
type OSFS struct{}

// Open refuses what is not a regular file before opening it: a named
// pipe inside an artifact would block the open, and the operation's
// context with it, until some writer came.
func (OSFS) Open(name string) (File, error) { return filekind.Open(name) }
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}
func (OSFS) Remove(name string) error                     { return os.Remove(name) }
func (OSFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (OSFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (OSFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (OSFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (OSFS) SyncDir(dir string) error                     { return atomicfile.SyncDir(dir) }

// removeAll removes a tree through fsys, deepest first.
func removeAll(fsys FS, path string) error {
	st, err := fsys.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		entries, err := fsys.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeAll(fsys, filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	return fsys.Remove(path)
}

// fileID identifies a file's storage: two paths with the same device and
// inode are the same bytes.
type fileID struct {
	dev, ino uint64
	nlink    uint64
}

// idOf returns the device and inode behind a FileInfo, when the file
// system has them (the OS does, and MemFS numbers its nodes).
func idOf(st fs.FileInfo) (fileID, bool) {
	if id, ok := st.(interface{ fileID() fileID }); ok { // a MemFS file
		return id.fileID(), true
	}
	return sysFileID(st)
}
