package tiers

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// listingRoot is where a listingFS puts the bucket prefix.
const listingRoot = "/"

// listingFS shows an object listing as a read-only directory tree (keys
// split at "/"), so that an object tier's artifacts are found by the
// same Scan as a directory's. Only ReadDir and Lstat answer; the rest
// refuse.
type listingFS struct {
	dirs  map[string][]fs.DirEntry // "/" and "/a/b", sorted by name
	files map[string]listingInfo
}

type listingInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i listingInfo) Name() string { return i.name }
func (i listingInfo) Size() int64  { return i.size }
func (i listingInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i listingInfo) ModTime() time.Time         { return i.mod }
func (i listingInfo) IsDir() bool                { return i.dir }
func (i listingInfo) Sys() any                   { return nil }
func (i listingInfo) Type() fs.FileMode          { return i.Mode().Type() }
func (i listingInfo) Info() (fs.FileInfo, error) { return i, nil }

func newListingFS(objs []objectInfo) *listingFS {
	l := &listingFS{dirs: map[string][]fs.DirEntry{listingRoot: nil}, files: map[string]listingInfo{}}
	for _, o := range objs {
		p := listingRoot + o.rel
		if _, clash := l.dirs[p]; clash {
			continue // "a" and "a/b" both objects: the directory wins
		}
		l.files[p] = listingInfo{name: path.Base(p), size: o.size, mod: o.mod}
		l.addDirs(p)
	}
	for d, es := range l.dirs {
		slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		es = slices.CompactFunc(es, func(a, b fs.DirEntry) bool { return a.Name() == b.Name() })
		l.dirs[d] = es
	}
	return l
}

// addDirs enters p in its parent and each missing ancestor in its own.
func (l *listingFS) addDirs(p string) {
	for {
		parent := path.Dir(p)
		info, isFile := l.files[p]
		if !isFile {
			info = listingInfo{name: path.Base(p), dir: true}
		}
		_, known := l.dirs[parent]
		l.dirs[parent] = append(l.dirs[parent], info)
		if known || parent == listingRoot {
			return
		}
		p = parent
	}
}

func (l *listingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	es, ok := l.dirs[path.Clean(name)]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return es, nil
}

func (l *listingFS) Lstat(name string) (fs.FileInfo, error) {
	name = path.Clean(name)
	if f, ok := l.files[name]; ok {
		return f, nil
	}
	if _, ok := l.dirs[name]; ok {
		return listingInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

func (l *listingFS) Stat(name string) (fs.FileInfo, error) { return l.Lstat(name) }
func (l *listingFS) Open(name string) (File, error)        { return nil, errNoObjectTier }
func (l *listingFS) OpenFile(string, int, fs.FileMode) (File, error) {
	return nil, errNoObjectTier
}
func (l *listingFS) Remove(string) error                { return errNoObjectTier }
func (l *listingFS) Rename(string, string) error        { return errNoObjectTier }
func (l *listingFS) MkdirAll(string, fs.FileMode) error { return errNoObjectTier }
func (l *listingFS) SyncDir(string) error               { return errNoObjectTier }
