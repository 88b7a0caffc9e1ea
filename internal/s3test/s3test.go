// Package s3test starts a real S3 server for tests: Versity's gateway
// (versitygw) serving a directory with its posix backend, so that a test
// can also reach behind the server and flip, truncate or delete the bytes
// of an object. `.ci/run` installs the server
// (scripts/s3/install-versitygw.sh, into .cache/bin); GGUFTOOL_VERSITYGW
// names another binary. A test without a server is skipped, unless
// GGUFTOOL_REQUIRE_S3=1 (as scripts/test.sh sets), when it fails. Only
// tests import this package.
package s3test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The server's keys and the bucket every test server starts with.
const (
	AccessKey = "gguftool-test"
	SecretKey = "gguftool-test-secret-key"
	Bucket    = "models"
)

// Binary finds versitygw: $GGUFTOOL_VERSITYGW, else on PATH, else in the
// repository's .cache/bin (looked for from the test's directory up).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("GGUFTOOL_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, ".cache", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if os.Getenv("GGUFTOOL_REQUIRE_S3") == "1" {
		t.Fatal("versitygw is required (GGUFTOOL_REQUIRE_S3=1) but not found: run scripts/s3/install-versitygw.sh")
	}
	t.Skip("versitygw not found: run scripts/s3/install-versitygw.sh, or set GGUFTOOL_VERSITYGW")
	return ""
}

// Server is a versitygw process serving Dir on Addr (host:port).
type Server struct {
	Bin, Dir, Addr string
	cmd            *exec.Cmd
}

// Start starts a server on a free loopback port with an empty Bucket,
// points the AWS credential chain of this process (and its children) at
// the server's keys, and stops the server when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{Bin: Binary(t), Dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	l.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(s.Dir, "no-credentials-file"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s.Restart(t)
	t.Cleanup(s.Stop)
	if err := s.Client(t).MakeBucket(context.Background(), Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// Restart starts the server (again, after Stop) on the same address and
// directory, and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.cmd = exec.Command(s.Bin, "--access", AccessKey, "--secret", SecretKey, "--port", s.Addr, "--quiet", "posix", s.Dir)
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.Addr + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw on %s did not answer in 30 s: %v", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server, as a crash or a cut network would end it.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Client is a client of the server with its keys.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ObjectPath is the file in which the posix backend keeps the bytes of
// the object key of Bucket.
func (s *Server) ObjectPath(key string) string {
	return filepath.Join(s.Dir, Bucket, filepath.FromSlash(key))
}
