package filehash

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/zeebo/xxh3"
)

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// TestSum hashes readers of sizes around the chunk size, whose last read
// is full, short or empty.
func TestSum(t *testing.T) {
	for _, n := range []int{0, 1, minChunk - 1, minChunk, minChunk + 1, 3 * minChunk, 3*minChunk + 5} {
		data := pattern(n)
		var seen int64
		got, sum, err := Sum(context.Background(), bytes.NewReader(data), "mem", int64(n), func(k int64) { seen += k })
		if err != nil || got != int64(n) || seen != int64(n) || sum != xxh3.Hash128(data) {
			t.Fatalf("%d bytes: got %d (progress %d), %v, %v", n, got, seen, sum, err)
		}
	}
}

// TestSumMisjudgedSize reads to the end whatever size said.
func TestSumMisjudgedSize(t *testing.T) {
	data := pattern(5 * minChunk)
	got, sum, err := Sum(context.Background(), bytes.NewReader(data), "mem", 1, nil)
	if err != nil || got != int64(len(data)) || sum != xxh3.Hash128(data) {
		t.Fatalf("got %d, %v", got, err)
	}
}

func TestFile(t *testing.T) {
	data := pattern(2*minChunk + 17)
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, sum, err := File(context.Background(), p, nil)
	if err != nil || got != int64(len(data)) || sum != xxh3.Hash128(data) {
		t.Fatalf("got %d, %v", got, err)
	}
	if Hex(sum) != Hex(xxh3.Hash128(data)) || len(Hex(sum)) != 32 {
		t.Fatalf("hex %s", Hex(sum))
	}
}

// TestReadAheadRange reads exactly a range, and calls a reader that ends
// inside it an unexpected EOF.
func TestReadAheadRange(t *testing.T) {
	data := pattern(10000)
	var got []byte
	chunks, stop := ReadAhead(context.Background(), bytes.NewReader(data), "mem", 100, 9000, 1000)
	for c := range chunks {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
		got = append(got, c.Bytes...)
		c.Release()
	}
	stop()
	if !bytes.Equal(got, data[100:9000]) {
		t.Fatalf("read %d bytes, want the %d of the range", len(got), 8900)
	}
	chunks, stop = ReadAhead(context.Background(), bytes.NewReader(data), "mem", 0, 12000, 1000)
	defer stop()
	for c := range chunks {
		if c.Err != nil {
			if !errors.Is(c.Err, io.ErrUnexpectedEOF) {
				t.Fatalf("reading past the end: %v", c.Err)
			}
			return
		}
		c.Release()
	}
	t.Fatal("reading past the end: no error")
}

func TestSumCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Sum(ctx, bytes.NewReader(pattern(100)), "mem", 100, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestFileRefusesAPipe: a named pipe where a file is hashed is refused
// before it is opened, instead of blocking the open until a writer comes.
func TestFileRefusesAPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "shard.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := File(context.Background(), fifo, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, filekind.ErrWrongKind) {
			t.Fatalf("hashing a named pipe: %v, want filekind.ErrWrongKind", err)
		}
	case <-time.After(5 * time.Second):
		os.WriteFile(fifo, nil, 0) // unblock the open so the test can end
		t.Fatal("hashing a named pipe blocked")
	}
}
