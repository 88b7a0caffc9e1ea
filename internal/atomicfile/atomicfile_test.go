package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if !IsTemp(f.Name()) {
		t.Fatalf("temporary file %s lacks the prefix", f.Name())
	}
	if _, err := f.WriteString("hello"); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello" {
		t.Fatalf("published %q, %v", b, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left beside the file: %v", entries)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("a second Commit succeeded")
	}
}

// recordingFS logs what a publication asks of it, and fails renames when
// told to.
type recordingFS struct {
	calls      []string
	failRename error
}

func (r *recordingFS) Rename(oldpath, newpath string) error {
	r.calls = append(r.calls, "rename "+filepath.Base(oldpath)+" "+filepath.Base(newpath))
	if r.failRename != nil {
		return r.failRename
	}
	return os.Rename(oldpath, newpath)
}

func (r *recordingFS) SyncDir(dir string) error {
	r.calls = append(r.calls, "syncdir "+filepath.Base(dir))
	return SyncDir(dir)
}

// TestPublishOrder checks the file is fsynced and closed before the
// rename, and the directory fsynced after it; a failed rename leaves the
// temporary file for the caller.
func TestPublishOrder(t *testing.T) {
	dir := t.TempDir()
	tmp, path := filepath.Join(dir, "x.tmp"), filepath.Join(dir, "x")
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	fsys := &recordingFS{}
	if err := Publish(fsys, f, tmp, path); err != nil {
		t.Fatal(err)
	}
	want := []string{"rename x.tmp x", "syncdir " + filepath.Base(dir)}
	if !slices.Equal(fsys.calls, want) {
		t.Fatalf("calls %v, want %v", fsys.calls, want)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("the file is still open after Publish")
	}

	f, err = os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	fsys = &recordingFS{failRename: refused}
	if err := Publish(fsys, f, tmp, path); !errors.Is(err, refused) {
		t.Fatalf("failed rename: %v", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the temporary file is gone after a failed rename: %v", err)
	}
}

// TestErrorsNameTheFinalPath: a write or a publication that fails says so
// of the path the caller asked for, never of the hidden temporary name,
// and keeps the cause for errors.Is.
func TestErrorsNameTheFinalPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	missing := filepath.Join(filepath.Dir(path), "no-such-dir", "model.gguf")
	if _, err := Create(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create in a missing directory: %v; want an error naming %s that is fs.ErrNotExist", err, missing)
	}
	f.File.Close() // every later call fails, as a full or vanished disk would
	_, werr := f.Write([]byte("x"))
	_, serr := f.WriteString("x")
	_, aerr := f.WriteAt([]byte("x"), 1)
	_, rerr := f.ReadFrom(strings.NewReader("x"))
	cerr := f.Commit()
	for what, err := range map[string]error{"Write": werr, "WriteString": serr, "WriteAt": aerr, "ReadFrom": rerr, "Commit": cerr} {
		if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), TempPrefix) || !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: %v; want an error naming %s, not the temporary file, that is os.ErrClosed", what, err, path)
		}
	}
}

// TestWriteJSON: the document lands whole, indented by one space with no
// HTML escaping, and no temporary file is left; a value that does not
// encode leaves nothing at all.
func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	if err := WriteJSON(path, map[string]any{"a": []int{1}, "b": "<&>"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if want := "{\n \"a\": [\n  1\n ],\n \"b\": \"<&>\"\n}\n"; err != nil || string(got) != want {
		t.Fatalf("wrote %q, %v; want %q", got, err, want)
	}
	if err := WriteJSON(filepath.Join(dir, "bad.json"), map[string]any{"f": func() {}}); err == nil {
		t.Error("a function encoded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only m.json", len(entries))
	}
}
