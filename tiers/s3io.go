package tiers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/zeebo/xxh3"
)

// readRange reads length bytes at off of the object, pinned to etag so
// an object replaced meanwhile fails the read instead of mixing two
// versions. A short body is an error naming the offset.
func (s *objectStore) readRange(ctx context.Context, rel, etag string, off int64, buf []byte) error {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(off, off+int64(len(buf))-1); err != nil {
		return err
	}
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return err
		}
	}
	body, _, _, err := s.core.GetObject(ctx, s.loc.Bucket, s.loc.key(rel), opts)
	if err != nil {
		if isPrecondition(err) {
			return &TwinError{Path: s.where(rel), Reason: "was replaced while it was read"}
		}
		if isNotFound(err) {
			return &TwinError{Path: s.where(rel), Reason: "is missing (deleted while it was read?)"}
		}
		return fmt.Errorf("tiers: reading %s at offset %d: %w", s.where(rel), off, err)
	}
	defer body.Close()
	n, err := io.ReadFull(body, buf)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return &TwinError{Path: s.where(rel), Reason: fmt.Sprintf("ended at %d bytes while %d were read from offset %d (truncated?)", off+int64(n), len(buf), off)}
		}
		return fmt.Errorf("tiers: reading %s at offset %d: %w", s.where(rel), off, err)
	}
	return nil
}

// RawRead reads the file rel of the object tier t by one plain GET, to
// the end, doing nothing with the bytes: the reference `gguftool bench
// twins` measures a verification against, as EngineHasher.Read is for a
// disk.
func (m *Manager) RawRead(ctx context.Context, t *Tier, rel string) (int64, error) {
	s, err := m.objectsFor(t)
	if err != nil {
		return 0, err
	}
	body, _, _, err := s.core.GetObject(ctx, s.loc.Bucket, s.loc.key(rel), minio.GetObjectOptions{})
	if err != nil {
		return 0, fmt.Errorf("tiers: reading %s: %w", s.where(rel), err)
	}
	defer body.Close()
	n, err := io.Copy(io.Discard, body)
	if err != nil {
		return n, fmt.Errorf("tiers: reading %s at offset %d: %w", s.where(rel), n, err)
	}
	return n, nil
}

// chunkedRead reads size bytes of an object in chunks, Parallel ranged
// GETs in flight, and hands them to consume in order. Memory is
// Parallel+1 chunks whatever the size.
func (s *objectStore) chunkedRead(ctx context.Context, rel, etag string, size int64, consume func([]byte) error) error {
	chunk := s.opts.partSize(size)
	n := int((size + chunk - 1) / chunk)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		buf []byte
		err error
	}
	ahead := min(s.opts.parallel(), max(n, 1))
	pool := make(chan []byte, ahead)
	for range ahead {
		pool <- make([]byte, chunk)
	}
	results := make([]chan result, n)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	go func() {
		for i := range n {
			var buf []byte
			select {
			case buf = <-pool:
			case <-ctx.Done():
				return
			}
			off := int64(i) * chunk
			b := buf[:min(chunk, size-off)]
			go func() { results[i] <- result{b, s.readRange(ctx, rel, etag, off, b)} }()
		}
	}()
	for i := range n {
		var r result
		select {
		case r = <-results[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		if err := consume(r.buf); err != nil {
			return err
		}
		pool <- r.buf[:cap(r.buf)]
	}
	return nil
}

// hash reads an object back and returns its XXH3-128, refusing an object
// whose size is not want (when want ≥ 0) or whose content is not what its
// upload recorded: the store's own word (an ETag, our metadata) is never
// taken for the content.
func (s *objectStore) hash(ctx context.Context, rel string, want int64, add func(int64)) (Digest, objectStat, error) {
	st, err := s.stat(ctx, rel)
	if err != nil {
		if errors.Is(err, ErrNoArtifact) {
			return "", st, &TwinError{Path: s.where(rel), Reason: "is missing"}
		}
		return "", st, err
	}
	if want >= 0 && st.size != want {
		return "", st, &TwinError{Path: s.where(rel), Reason: fmt.Sprintf("is %d bytes, want %d (truncated or replaced?)", st.size, want)}
	}
	h := xxh3.New128()
	err = s.chunkedRead(ctx, rel, st.etag, st.size, func(b []byte) error {
		h.Write(b)
		if add != nil {
			add(int64(len(b)))
		}
		return nil
	})
	if err != nil {
		return "", st, err
	}
	d := digestOf(h.Sum128())
	// Every read-back, whatever it is for (a copy, a twin, a scrub),
	// refuses an object that contradicts the digest its upload put in its
	// metadata: no verification may take a damaged object for a copy, nor
	// record its digest as verified.
	return d, st, checkUpload(s.where(rel), st, d)
}

// objectReader reads an object at offsets, pinned to the version it
// was opened at: a source for a copy off an object tier.
type objectReader struct {
	s    *objectStore
	ctx  context.Context
	rel  string
	etag string
	size int64
}

func (r *objectReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-off))
	if err := r.s.readRange(r.ctx, r.rel, r.etag, off, p[:n]); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// uploadMeta is what every object gguftool writes carries: the digest
// the source had when it was hashed, and the operation that wrote it.
func uploadMeta(d Digest, journal string) map[string]string {
	return map[string]string{metaDigest: string(d), metaJournal: journal}
}

// upload writes size bytes of src to the object rel. An object smaller
// than a part is one PUT; a larger one is a multipart upload, its ID
// handed to record (made durable by the caller) before any part is sent,
// so a crash leaves nothing the journal cannot find. uploadID resumes an
// earlier upload: the parts the server lists with the right size are
// kept, the rest sent again. Parallel parts are in flight at once, each
// in its own buffer. Neither form ever overwrites an object already at
// the key (If-None-Match: *).
func (s *objectStore) upload(ctx context.Context, rel string, src io.ReaderAt, size int64, meta map[string]string, uploadID string, record func(string) error, paced func(context.Context, int64) error) error {
	key := s.loc.key(rel)
	part := s.opts.partSize(size)
	if size <= part {
		buf := make([]byte, size)
		if _, err := src.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
			return fmt.Errorf("tiers: reading the source of %s: %w", s.where(rel), err)
		}
		opts := minio.PutObjectOptions{UserMetadata: meta, DisableContentSha256: true}
		opts.SetMatchETagExcept("*")
		if _, err := s.core.PutObject(ctx, s.loc.Bucket, key, bytes.NewReader(buf), size, "", "", opts); err != nil {
			return s.putError(rel, err)
		}
		return paced(ctx, size)
	}
	done := map[int]minio.CompletePart{}
	if uploadID != "" {
		have, err := s.listParts(ctx, key, uploadID)
		switch {
		case isNotFound(err):
			uploadID = "" // aborted, or gone: start again
		case err != nil:
			return err
		}
		n := int((size + part - 1) / part)
		for num, p := range have {
			if num <= n && p.Size == min(part, size-int64(num-1)*part) {
				done[num] = minio.CompletePart{PartNumber: num, ETag: p.ETag}
				if err := paced(ctx, 0); err != nil {
					return err
				}
			}
		}
	}
	if uploadID == "" {
		clear(done)
		id, err := s.core.NewMultipartUpload(ctx, s.loc.Bucket, key, minio.PutObjectOptions{UserMetadata: meta})
		if err != nil {
			return fmt.Errorf("tiers: starting the upload of %s: %w", s.where(rel), err)
		}
		if err := record(id); err != nil {
			return err
		}
		uploadID = id
	}
	parts, err := s.sendParts(ctx, rel, uploadID, src, size, part, done, paced)
	if err != nil {
		return err
	}
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	if _, err := s.core.CompleteMultipartUpload(ctx, s.loc.Bucket, key, uploadID, parts, opts); err != nil {
		return s.putError(rel, err)
	}
	return nil
}

func (s *objectStore) putError(rel string, err error) error {
	if isPrecondition(err) {
		return fmt.Errorf("tiers: %s appeared on the server while it was uploaded: not overwriting it", s.where(rel))
	}
	return fmt.Errorf("tiers: uploading %s: %w", s.where(rel), err)
}

// listParts lists an upload's parts.
func (s *objectStore) listParts(ctx context.Context, key, uploadID string) (map[int]minio.ObjectPart, error) {
	have := map[int]minio.ObjectPart{}
	marker := 0
	for {
		r, err := s.core.ListObjectParts(ctx, s.loc.Bucket, key, uploadID, marker, 1000)
		if err != nil {
			return nil, err
		}
		for _, p := range r.ObjectParts {
			p.ETag = trimQuotes(p.ETag)
			have[p.PartNumber] = p
		}
		if !r.IsTruncated {
			return have, nil
		}
		marker = r.NextPartNumberMarker
	}
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// sendParts uploads the parts not in done, Parallel at once, and returns
// every part in order.
func (s *objectStore) sendParts(ctx context.Context, rel, uploadID string, src io.ReaderAt, size, part int64, done map[int]minio.CompletePart, paced func(context.Context, int64) error) ([]minio.CompletePart, error) {
	n := int((size + part - 1) / part)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	todo := make(chan int)
	var wg sync.WaitGroup
	for range min(s.opts.parallel(), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, part)
			for num := range todo {
				off := int64(num-1) * part
				b := buf[:min(part, size-off)]
				if _, err := src.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
					cancel(fmt.Errorf("tiers: reading the source of %s at offset %d: %w", s.where(rel), off, err))
					return
				}
				p, err := s.core.PutObjectPart(ctx, s.loc.Bucket, s.loc.key(rel), uploadID, num, bytes.NewReader(b), int64(len(b)), minio.PutObjectPartOptions{})
				if err != nil {
					cancel(fmt.Errorf("tiers: uploading part %d of %s (offset %d): %w", num, s.where(rel), off, err))
					return
				}
				mu.Lock()
				done[num] = minio.CompletePart{PartNumber: num, ETag: trimQuotes(p.ETag)}
				mu.Unlock()
				if err := paced(ctx, int64(len(b))); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
feed:
	for num := 1; num <= n; num++ {
		mu.Lock()
		_, ok := done[num]
		mu.Unlock()
		if ok {
			continue
		}
		select {
		case todo <- num:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	parts := make([]minio.CompletePart, 0, n)
	for _, p := range done {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].PartNumber < parts[j].PartNumber })
	if len(parts) != n {
		return nil, fmt.Errorf("tiers: upload of %s has %d of %d parts", s.where(rel), len(parts), n)
	}
	return parts, nil
}

// abortUploads aborts every unfinished upload to rel: an operation
// rolled back, or one that starts over, owns the key (it holds the
// artifact's lock object).
func (s *objectStore) abortUploads(ctx context.Context, rel string) error {
	key := s.loc.key(rel)
	for u := range s.core.Client.ListIncompleteUploads(ctx, s.loc.Bucket, key, false) {
		if u.Err != nil {
			return fmt.Errorf("tiers: listing unfinished uploads of %s: %w", s.where(rel), u.Err)
		}
		if u.Key != key {
			continue
		}
		if err := s.core.AbortMultipartUpload(ctx, s.loc.Bucket, key, u.UploadID); err != nil && !isNotFound(err) {
			return fmt.Errorf("tiers: aborting the upload of %s: %w", s.where(rel), err)
		}
	}
	return nil
}
