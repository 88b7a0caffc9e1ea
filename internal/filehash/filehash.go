// Package filehash computes the XXH3-128 of a file or of a reader's bytes,
// the digest every gguftool record stores (pack.json, a tier's state and
// journal), and formats it in canonical hex. It reads ahead on its own
// goroutine so reading overlaps hashing; a copy that hashes the bytes it
// writes uses the same read-ahead (ReadAhead).
package filehash

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/zeebo/xxh3"
)

// DefaultChunk is the read size: big enough for full-speed sequential
// reads.
const DefaultChunk = 8 << 20

// minChunk keeps a tiny file's buffers at a page.
const minChunk = 4096

// Hex is a digest's canonical form: 32 lowercase hex digits, high 64
// bits first.
func Hex(u xxh3.Uint128) string {
	b := u.Bytes()
	return hex.EncodeToString(b[:])
}

// ChunkFor is the read size for a file of size bytes: DefaultChunk, or
// less for a smaller file, which needs no 8 MiB buffers.
func ChunkFor(size int64) int {
	return int(max(min(DefaultChunk, size), minChunk))
}

// Chunk is one read of ReadAhead: Bytes, or the Err that ended the read.
type Chunk struct {
	Bytes   []byte
	Err     error
	release func()
}

// Release hands the chunk's buffer back for the next read; Bytes must not
// be used afterwards.
func (c Chunk) Release() {
	if c.release != nil {
		c.release()
	}
}

// ReadAhead reads [off, end) of r, or from off to r's end when end < 0,
// on its own goroutine in reads of chunk bytes, two buffers in flight, so
// reading overlaps whatever the caller does with the previous chunk. The
// channel closes after the last chunk or after a chunk with Err set (a
// read error, cancellation, or io.ErrUnexpectedEOF when r ends before
// end). Each chunk must be released before a third one can be read. stop
// ends the reading early and waits for the goroutine; call it once done.
// name labels read errors.
func ReadAhead(ctx context.Context, r io.ReaderAt, name string, off, end int64, chunk int) (<-chan Chunk, func()) {
	out := make(chan Chunk)
	free := make(chan []byte, 2)
	free <- make([]byte, chunk)
	free <- make([]byte, chunk)
	quit := make(chan struct{})
	finished := make(chan struct{})
	send := func(c Chunk) bool {
		select {
		case out <- c:
			return true
		case <-quit:
			return false
		}
	}
	go func() {
		defer close(finished)
		defer close(out)
		for end < 0 || off < end {
			var b []byte
			select {
			case b = <-free:
			case <-quit:
				return
			}
			if err := ctx.Err(); err != nil {
				send(Chunk{Err: err})
				return
			}
			want := len(b)
			if end >= 0 {
				want = int(min(int64(want), end-off))
			}
			got, err := r.ReadAt(b[:want], off)
			// Reading to the end, any short read is the end; reading a
			// range, only the range's end is.
			last := end < 0 && (err == io.EOF || err == nil && got < want)
			if last || err == io.EOF && got == want {
				err = nil
			}
			if end >= 0 && (err == io.EOF || err == nil && got < want) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				send(Chunk{Err: fmt.Errorf("reading %s at offset %d: %w", name, off+int64(got), err)})
				return
			}
			if got > 0 && !send(Chunk{Bytes: b[:got], release: func() { free <- b }}) {
				return
			}
			off += int64(got)
			if last {
				return
			}
		}
	}()
	return out, func() { close(quit); <-finished }
}

// Feed writes r's bytes, from offset 0 to its end, into w (a hash) and
// returns how many there were. size is the expected length; it only
// sizes the buffers. progress, if set, gets the bytes as they are
// written.
func Feed(ctx context.Context, w io.Writer, r io.ReaderAt, name string, size int64, progress func(int64)) (int64, error) {
	chunks, stop := ReadAhead(ctx, r, name, 0, -1, ChunkFor(size))
	defer stop()
	var n int64
	for c := range chunks {
		if c.Err != nil {
			return n, c.Err
		}
		w.Write(c.Bytes) // a hash's Write never fails
		n += int64(len(c.Bytes))
		if progress != nil {
			progress(int64(len(c.Bytes)))
		}
		c.Release()
	}
	return n, nil
}

// Sum returns the length and XXH3-128 of r's bytes from offset 0 to its
// end; size and progress are as for Feed.
func Sum(ctx context.Context, r io.ReaderAt, name string, size int64, progress func(int64)) (int64, xxh3.Uint128, error) {
	h := xxh3.New128()
	n, err := Feed(ctx, h, r, name, size, progress)
	if err != nil {
		return n, xxh3.Uint128{}, err
	}
	return n, h.Sum128(), nil
}

// File returns the size and XXH3-128 of the file at path, read front to
// back; progress is as for Feed.
func File(ctx context.Context, path string, progress func(int64)) (int64, xxh3.Uint128, error) {
	// A named pipe inside an artifact would block the open forever.
	f, err := filekind.Open(path)
	if err != nil {
		return 0, xxh3.Uint128{}, err
	}
	defer f.Close()
	size := int64(DefaultChunk)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	return Sum(ctx, f, path, size, progress)
}
