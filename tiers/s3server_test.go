package tiers

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/gguftool/gguftool/internal/s3test"
)

// The S3 tests run against a real S3 server (package s3test: versitygw
// serving a directory, so a test can reach behind it to the bytes).
const (
	s3Bucket = s3test.Bucket
	s3Prefix = "archive/"
)

type s3Server struct{ *s3test.Server }

func startS3(t testing.TB) *s3Server { return &s3Server{s3test.Start(t)} }

func (s *s3Server) start(t testing.TB)                { s.Restart(t) }
func (s *s3Server) stop()                             { s.Stop() }
func (s *s3Server) client(t testing.TB) *minio.Client { return s.Client(t) }
func (s *s3Server) objectPath(rel string) string      { return s.ObjectPath(s3Prefix + rel) }

// s3Config is a hot directory tier under dir and a cold tier on the
// server at endpoint.
func s3Config(t testing.TB, dir, endpoint string) *Config {
	t.Helper()
	hot := filepath.Join(dir, "nvme")
	if err := os.MkdirAll(hot, 0o755); err != nil {
		t.Fatal(err)
	}
	js := fmt.Sprintf(`{"schema": %q, "version": 2, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"},
	 {"name": "s3", "role": "cold", "s3": {"endpoint": %q, "bucket": %q, "prefix": %q, "region": "us-east-1"}}]}`,
		ConfigSchema, hot, "http://"+endpoint, s3Bucket, s3Prefix)
	c, err := ParseConfig([]byte(js), filepath.Join(dir, "storage-tiers.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// s3Manager is a manager on the real file system with small parts, so a
// few MiB make a multipart upload of several parts.
func s3Manager(t testing.TB, c *Config) *Manager {
	t.Helper()
	m, err := NewManager(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	m.S3 = S3Options{PartSize: 5 << 20, Parallel: 3, MaxRetries: 2, Timeout: 10 * time.Second, LeaseTTL: 3 * time.Second}
	return m
}

// s3Fixture writes, on the hot tier, a pack of three files (one of 12
// MiB: three parts), a GGUF of 3 KiB (one PUT) and a split set of two
// shards, from seed, and returns each file's bytes by relative path.
func s3Fixture(t testing.TB, root string, seed uint64) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := map[string][]byte{
		"m.pack/pack.json":            []byte(`{"schema":"test"}`),
		"m.pack/layers/blk.0.bin":     bytesOf(12<<20 + 333),
		"m.pack/layers/blk.1.bin":     bytesOf(70_000),
		"tiny.gguf":                   bytesOf(3 << 10),
		"set/big-00001-of-00002.gguf": bytesOf(6<<20 + 5),
		"set/big-00002-of-00002.gguf": bytesOf(9_999),
	}
	for rel, b := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// artifactFiles are the fixture's files that belong to name.
func artifactFiles(files map[string][]byte, name string) map[string][]byte {
	out := map[string][]byte{}
	for rel, b := range files {
		if rel == name || strings.HasPrefix(rel, name+"/") || strings.HasPrefix(rel, name+"-") {
			out[rel] = b
		}
	}
	return out
}

// faultProxy stands between the client and the real server and, for the
// requests fault picks, answers 500 or waits before passing them on.
type faultProxy struct {
	srv    *httptest.Server
	faults atomic.Int64
}

func newFaultProxy(t testing.TB, target string, fault func(r *http.Request, n int64) (status int, delay time.Duration)) *faultProxy {
	u, _ := url.Parse("http://" + target)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.Host = pr.In.Host // the signature covers the Host the client used
	}}
	p := &faultProxy{}
	var seen atomic.Int64
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, delay := fault(r, seen.Add(1))
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		if status != 0 {
			p.faults.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>injected by the test</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// isPartUpload reports whether r sends a part of a multipart upload.
func isPartUpload(r *http.Request) bool {
	return r.Method == http.MethodPut && r.URL.Query().Has("partNumber")
}
