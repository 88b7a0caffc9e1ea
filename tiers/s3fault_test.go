package tiers

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// s3World is a server, a configuration whose cold tier reaches the
// server at endpoint (the server itself, or a fault proxy in front of
// it), and the fixture on the hot tier.
type s3World struct {
	srv       *s3Server
	cfg       *Config
	hot, cold *Tier
	files     map[string][]byte
}

func newS3World(t *testing.T, seed uint64, proxy func(target string) string) *s3World {
	srv := startS3(t)
	endpoint := srv.Addr
	if proxy != nil {
		endpoint = proxy(srv.Addr)
	}
	cfg := s3Config(t, t.TempDir(), endpoint)
	w := &s3World{srv: srv, cfg: cfg, hot: cfg.Tiers[0], cold: cfg.Tiers[1]}
	w.files = s3Fixture(t, w.hot.Root, seed)
	return w
}

// migrated moves name onto the bucket with a fresh manager.
func (w *s3World) migrated(t *testing.T, name string) {
	t.Helper()
	if _, err := s3Manager(t, w.cfg).Migrate(context.Background(), name, "", w.cold, false); err != nil {
		t.Fatal(err)
	}
}

// TestS3Faults: a server that goes away mid-upload, 500s on parts, a
// server too slow to answer, and objects flipped, truncated or deleted
// behind gguftool's back. Each leaves the hot copy in place (or brings
// back only verified bytes) and says what happened.
func TestS3Faults(t *testing.T) {
	ctx := context.Background()

	t.Run("server gone mid-upload, then back: recover finishes", func(t *testing.T) {
		w := newS3World(t, 11, nil)
		m := s3Manager(t, w.cfg)
		const lease = 4 * time.Second
		m.S3.LeaseTTL = lease // the lock object the cut left behind expires
		var cut time.Time
		stopped := false
		m.Hook = func(point string) {
			if point == "upload:begun" && !stopped {
				stopped = true
				w.srv.stop()
				cut = time.Now()
			}
		}
		_, err := m.Migrate(ctx, "m.pack", "", w.cold, false)
		if err == nil || !stopped {
			t.Fatalf("migrate with the server gone: %v (stopped %v)", err, stopped)
		}
		checkHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
		w.srv.start(t)
		m2 := s3Manager(t, w.cfg)
		m2.S3.LeaseTTL = lease
		recs, _ := m2.Recover(ctx, RecoverFinish)
		if time.Since(cut) < lease/2 && (len(recs) != 1 || recs[0].Outcome != "busy") {
			t.Fatalf("recover while the cut-off holder's lease lasts: %+v, want busy", recs)
		}
		time.Sleep(time.Until(cut.Add(lease + 100*time.Millisecond)))
		recs, err = m2.Recover(ctx, RecoverFinish)
		if err != nil || len(recs) != 1 || recs[0].Outcome != "completed" {
			t.Fatalf("recover: %+v, %v", recs, err)
		}
		checkNotHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
		checkObjectsHold(t, w.srv, artifactFiles(w.files, "m.pack"))
		noLeftovers(t, w.srv, w.hot.Root)
	})

	t.Run("500 on some parts: retried", func(t *testing.T) {
		var p *faultProxy
		var mu sync.Mutex
		failed := map[string]bool{}
		w := newS3World(t, 12, func(target string) string {
			p = newFaultProxy(t, target, func(r *http.Request, n int64) (int, time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				part := r.URL.Query().Get("uploadId") + "/" + r.URL.Query().Get("partNumber")
				if isPartUpload(r) && !failed[part] {
					failed[part] = true // the first try of every part
					return http.StatusInternalServerError, 0
				}
				return 0, 0
			})
			return p.addr()
		})
		res, err := s3Manager(t, w.cfg).Migrate(ctx, "m.pack", "", w.cold, false)
		if err != nil || res.Action != ActionMoved {
			t.Fatalf("migrate through 500s: %+v, %v", res, err)
		}
		if p.faults.Load() == 0 {
			t.Fatal("the proxy injected no 500: the test tests nothing")
		}
		checkObjectsHold(t, w.srv, artifactFiles(w.files, "m.pack"))
	})

	t.Run("500 on every part: fails, rolls back", func(t *testing.T) {
		w := newS3World(t, 13, func(target string) string {
			return newFaultProxy(t, target, func(r *http.Request, n int64) (int, time.Duration) {
				if isPartUpload(r) {
					return http.StatusInternalServerError, 0
				}
				return 0, 0
			}).addr()
		})
		m := s3Manager(t, w.cfg)
		_, err := m.Migrate(ctx, "m.pack", "", w.cold, false)
		if err == nil || !strings.Contains(err.Error(), "part") {
			t.Fatalf("migrate with every part refused: %v, want an error naming the part", err)
		}
		checkHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
		if _, err := m.Recover(ctx, RecoverRollback); err != nil {
			t.Fatal(err)
		}
		noLeftovers(t, w.srv, w.hot.Root)
		for o := range w.srv.client(t).ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: s3Prefix + "m.pack/", Recursive: true}) {
			t.Fatalf("object %s left after the rollback (%v)", o.Key, o.Err)
		}
		checkHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
	})

	t.Run("slow server: times out", func(t *testing.T) {
		w := newS3World(t, 14, func(target string) string {
			return newFaultProxy(t, target, func(r *http.Request, n int64) (int, time.Duration) {
				if isPartUpload(r) {
					return 0, 3 * time.Second
				}
				return 0, 0
			}).addr()
		})
		m := s3Manager(t, w.cfg)
		m.S3.Timeout, m.S3.MaxRetries = 300*time.Millisecond, 1
		start := time.Now()
		_, err := m.Migrate(ctx, "m.pack", "", w.cold, false)
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("migrate against a slow server: %v, want a timeout", err)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Fatalf("took %v: the timeout did not cut the wait", d)
		}
		checkHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
	})

	t.Run("object deleted while verifying: uploaded again", func(t *testing.T) {
		w := newS3World(t, 15, nil)
		m := s3Manager(t, w.cfg)
		deleted, done := false, 0
		m.Hook = func(point string) {
			if point == "upload:done" {
				if done++; done == 3 { // every object whole, none yet read back
					deleted = true
					os.Remove(w.srv.objectPath("m.pack/layers/blk.0.bin"))
				}
			}
		}
		var notes []string
		m.Notef = func(f string, a ...any) { notes = append(notes, f) }
		res, err := m.Migrate(ctx, "m.pack", "", w.cold, false)
		if err != nil || res.Action != ActionMoved || !deleted {
			t.Fatalf("migrate: %+v, %v", res, err)
		}
		if len(notes) == 0 {
			t.Fatal("the missing object went unremarked")
		}
		checkObjectsHold(t, w.srv, artifactFiles(w.files, "m.pack"))
	})

	t.Run("flipped byte: scrub and ensure-hot refuse it", func(t *testing.T) {
		w := newS3World(t, 16, nil)
		w.migrated(t, "set/big")
		flip(t, w.srv.objectPath("set/big-00001-of-00002.gguf"), 4<<20+17)
		m := s3Manager(t, w.cfg)
		sr, err := m.Scrub(ctx, []string{"s3"}, 0)
		if !errors.Is(err, ErrNotTwin) || sr.Mismatch != 1 {
			t.Fatalf("scrub of a flipped object: %+v, %v", sr, err)
		}
		_, _, err = m.EnsureHot(ctx, "set/big", w.hot, false)
		if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("ensure-hot from a flipped object: %v, want a refusal naming the damage", err)
		}
		checkNotHot(t, w.hot.Root, artifactFiles(w.files, "set/big"))
		if _, err := m.Recover(ctx, RecoverRollback); err != nil {
			t.Fatal(err)
		}
		noLeftovers(t, w.srv, w.hot.Root)
	})

	t.Run("truncated object: not a twin, not brought back", func(t *testing.T) {
		w := newS3World(t, 17, nil)
		if _, err := s3Manager(t, w.cfg).Copy(ctx, "tiny.gguf", "", w.cold, false); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(w.srv.objectPath("tiny.gguf"), 1000); err != nil {
			t.Fatal(err)
		}
		m := s3Manager(t, w.cfg)
		_, err := m.Migrate(ctx, "tiny.gguf", "nvme", w.cold, false)
		if !errors.Is(err, ErrNotTwin) || !strings.Contains(err.Error(), "1000 bytes") {
			t.Fatalf("migrate onto a truncated twin: %v", err)
		}
		checkHot(t, w.hot.Root, artifactFiles(w.files, "tiny.gguf"))
		os.Remove(w.hot.Root + "/tiny.gguf")
		_, _, err = m.EnsureHot(ctx, "tiny.gguf", w.hot, false)
		if !errors.Is(err, ErrNotTwin) {
			t.Fatalf("ensure-hot from a truncated object: %v", err)
		}
	})

	t.Run("object deleted behind our back: scrub and ensure-hot say so", func(t *testing.T) {
		w := newS3World(t, 18, nil)
		w.migrated(t, "tiny.gguf")
		os.Remove(w.srv.objectPath("tiny.gguf"))
		m := s3Manager(t, w.cfg)
		_, _, err := m.EnsureHot(ctx, "tiny.gguf", w.hot, false)
		if !errors.Is(err, ErrNoArtifact) {
			t.Fatalf("ensure-hot of a deleted object: %v", err)
		}
	})
}

// flip inverts one byte of a file in place.
func flip(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
