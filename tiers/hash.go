package tiers

import (
	"context"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/internal/filehash"
	"github.com/gguftool/gguftool/internal/ioengine"
)

// Hasher computes a file's size and XXH3-128, reading it front to back.
// progress, if set, gets the bytes read as they are hashed.
type Hasher interface {
	Hash(ctx context.Context, path string, progress func(int64)) (int64, Digest, error)
}

// FSHasher reads through an FS (a MemFS in tests).
type FSHasher struct{ FS FS }

// Hash implements Hasher.
func (h FSHasher) Hash(ctx context.Context, path string, progress func(int64)) (int64, Digest, error) {
	return HashFile(ctx, h.FS, path, progress)
}

// EngineHasher reads with the I/O engine: O_DIRECT where the file system
// allows it, so a verification reads the disk and not a page cache that
// still holds what was just written, several chunks in flight per file so
// the device stays busy while XXH3 runs.
type EngineHasher struct {
	Engine *ioengine.Engine
	// Chunk is the read size (default 8 MiB) and Ahead the reads in flight
	// per file (default 4).
	Chunk, Ahead int
}

// Hash implements Hasher.
func (h *EngineHasher) Hash(ctx context.Context, path string, progress func(int64)) (int64, Digest, error) {
	hasher := xxh3.New128()
	n, err := h.read(ctx, path, func(b []byte) {
		hasher.Write(b)
		if progress != nil {
			progress(int64(len(b)))
		}
	})
	if err != nil {
		return n, "", err
	}
	return n, digestOf(hasher.Sum128()), nil
}

// Read reads a file front to back exactly as Hash does, without hashing:
// the reference `gguftool bench twins` measures Hash against.
func (h *EngineHasher) Read(ctx context.Context, path string) (int64, error) {
	return h.read(ctx, path, func([]byte) {})
}

// read streams a file through consume in order, Ahead chunks in flight.
func (h *EngineHasher) read(ctx context.Context, path string, consume func([]byte)) (int64, error) {
	chunk, ahead := h.Chunk, h.Ahead
	if chunk <= 0 {
		chunk = filehash.DefaultChunk
	}
	if ahead <= 0 {
		ahead = 4
	}
	f, err := h.Engine.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk = (chunk + ioengine.PageSize - 1) / ioengine.PageSize * ioengine.PageSize
	size := f.Size()
	n := int((size + int64(chunk) - 1) / int64(chunk))
	pool, err := ioengine.NewPool(chunk, min(ahead, max(n, 1)))
	if err != nil {
		return 0, err
	}
	defer pool.Close()

	type inflight struct {
		req   *ioengine.Request
		batch *ioengine.Batch
	}
	var queue []inflight
	// On an early return, wait for reads in flight before the pool closes.
	defer func() {
		for _, q := range queue {
			q.batch.Wait()
		}
	}()
	next := 0
	submit := func() error {
		off := int64(next) * int64(chunk)
		want := int(min(int64(chunk), size-off))
		_, alen, _ := ioengine.AlignRange(off, want, f.Align())
		buf, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		r := &ioengine.Request{File: f, Off: off, Len: alen, Buf: buf}
		b, err := h.Engine.Submit(ctx, []*ioengine.Request{r})
		if err != nil {
			pool.Put(buf)
			return err
		}
		queue = append(queue, inflight{r, b})
		next++
		return nil
	}
	var done int64
	for range n {
		for next < n && len(queue) < pool.Count() {
			if err := submit(); err != nil {
				return done, err
			}
		}
		q := queue[0]
		queue = queue[1:]
		err := q.batch.Wait()
		want := int(min(int64(chunk), size-q.req.Off))
		if err == nil && q.req.N < want {
			err = fmt.Errorf("reading %s at offset %d: short read of %d bytes, want %d (file shrank?)", path, q.req.Off, q.req.N, want)
		}
		if err != nil {
			pool.Put(q.req.Buf)
			return done, err
		}
		consume(q.req.Buf.Bytes()[:want])
		pool.Put(q.req.Buf)
		done += int64(want)
	}
	return size, nil
}
