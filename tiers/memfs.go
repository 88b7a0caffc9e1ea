package tiers

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemFS is an in-memory FS that models durability strictly: a file's
// bytes survive a crash only as of its last Sync, and a directory entry
// (a creation, rename or removal) only as of the directory's last
// SyncDir. Crash forgets everything else, as a power cut would; the page
// cache a SIGKILL leaves intact cannot show a missing fsync, this can.
// Paths are slash-separated and absolute.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	now  time.Time
}

type memNode struct {
	ino            uint64 // its identity, as an inode number is
	dir            bool
	data, synced   []byte
	children       map[string]*memNode
	syncedChildren map[string]*memNode
	mtime          time.Time
}

// NewMemFS returns an empty file system whose root directory exists.
func NewMemFS() *MemFS {
	return &MemFS{root: newDir(time.Unix(0, 0)), now: time.Unix(1_700_000_000, 0)}
}

func newDir(t time.Time) *memNode {
	return &memNode{ino: memInodes.Add(1), dir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}, mtime: t}
}

// memInodes numbers the nodes of every MemFS, so a file keeps its
// identity across renames and writes in place, as on a disk.
var memInodes atomic.Uint64

func (m *MemFS) tick() time.Time {
	m.now = m.now.Add(time.Second)
	return m.now
}

// Crash drops every write that was not synced: each directory goes back
// to its synced entries and each file to its synced bytes.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var reset func(n *memNode)
	reset = func(n *memNode) {
		if !n.dir {
			n.data = slices.Clone(n.synced)
			return
		}
		n.children = map[string]*memNode{}
		for k, c := range n.syncedChildren {
			n.children[k] = c
			reset(c)
		}
	}
	reset(m.root)
}

// SyncAll makes everything durable (test setup).
func (m *MemFS) SyncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sync func(n *memNode)
	sync = func(n *memNode) {
		if !n.dir {
			n.synced = slices.Clone(n.data)
			return
		}
		n.syncedChildren = map[string]*memNode{}
		for k, c := range n.children {
			n.syncedChildren[k] = c
			sync(c)
		}
	}
	sync(m.root)
}

func split(p string) []string {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// lookup walks to the node at p; parent returns its directory too.
func (m *MemFS) lookup(p string) (*memNode, error) {
	n := m.root
	for _, part := range split(p) {
		if !n.dir {
			return nil, &fs.PathError{Op: "open", Path: p, Err: errNotDir}
		}
		c, ok := n.children[part]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		}
		n = c
	}
	return n, nil
}

func (m *MemFS) parent(p string) (*memNode, string, error) {
	parts := split(p)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: "open", Path: p, Err: fs.ErrInvalid}
	}
	dir, err := m.lookup("/" + strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", &fs.PathError{Op: "open", Path: p, Err: errNotDir}
	}
	return dir, parts[len(parts)-1], nil
}

var errNotDir = errors.New("not a directory")

func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{ino: memInodes.Add(1), mtime: m.tick()}
		dir.children[base] = n
	case n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	if flag&os.O_TRUNC != 0 {
		n.data = nil
	}
	f := &memFile{fs: m, n: n, name: path.Clean("/" + name), write: flag&(os.O_WRONLY|os.O_RDWR) != 0}
	if flag&os.O_APPEND != 0 {
		f.pos = int64(len(n.data))
	}
	return f, nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.children, base)
	return nil
}

func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob, err := m.parent(oldpath)
	if err != nil {
		return err
	}
	n, ok := od.children[ob]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	nd, nb, err := m.parent(newpath)
	if err != nil {
		return err
	}
	if old, ok := nd.children[nb]; ok && old.dir && len(old.children) > 0 {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: errors.New("directory not empty")}
	}
	delete(od.children, ob)
	nd.children[nb] = n
	return nil
}

func (m *MemFS) MkdirAll(p string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, part := range split(p) {
		c, ok := n.children[part]
		if !ok {
			c = newDir(m.tick())
			n.children[part] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: p, Err: errNotDir}
		}
		n = c
	}
	return nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) { return m.Lstat(name) }

func (m *MemFS) Lstat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(path.Clean("/" + name)), n: n, size: int64(len(n.data))}, nil
}

func (m *MemFS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	var out []fs.DirEntry
	for k, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(memInfo{name: k, n: c, size: int64(len(c.data))}))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return err
	}
	n.syncedChildren = map[string]*memNode{}
	for k, c := range n.children {
		n.syncedChildren[k] = c
	}
	return nil
}

type memInfo struct {
	name string
	n    *memNode
	size int64
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.n.mtime }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) fileID() fileID     { return fileID{dev: 1, ino: i.n.ino, nlink: 1} }

type memFile struct {
	fs    *MemFS
	n     *memNode
	name  string
	pos   int64
	write bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.write {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.mtime = f.fs.tick()
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size < int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Close() error { return nil }

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: path.Base(f.name), n: f.n, size: int64(len(f.n.data))}, nil
}
