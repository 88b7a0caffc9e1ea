package filekind

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheckRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(file, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckRegular(file); err != nil {
		t.Errorf("regular file refused: %v", err)
	}
	for path, is := range map[string]string{
		fifo:        "is a named pipe, not a regular file",
		link:        "is a named pipe, not a regular file", // the check follows links
		dir:         "is a directory, not a regular file",
		"/dev/null": "is a character device, not a regular file",
	} {
		err := CheckRegular(path)
		if !errors.Is(err, ErrWrongKind) || err.Error() != path+": "+is {
			t.Errorf("CheckRegular(%s) = %v; want %q", path, err, is)
		}
	}
	if err := CheckRegular(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrWrongKind) {
		t.Errorf("missing file: %v", err)
	}
}

// TestOpenRefusesFIFOWithoutBlocking: open(2) of a FIFO with no writer
// blocks forever; Open and ReadFile must refuse it before that.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(fifo)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, ErrWrongKind) {
		t.Errorf("Open: %v", err)
	}
	if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("ReadFile: %v", err)
	}
}
