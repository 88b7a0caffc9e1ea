package tiers

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"
)

// checkHot asserts the hot tier holds exactly these files' bytes.
func checkHot(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatalf("hot copy: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("hot copy of %s differs from the original", rel)
		}
	}
}

// checkNotHot asserts none of these files is on the hot tier.
func checkNotHot(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	for rel := range files {
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel))); err == nil {
			t.Fatalf("%s is still on the hot tier", rel)
		}
	}
}

// checkObjectsHold asserts the server holds these files' bytes, each with
// the digest of its bytes in its metadata.
func checkObjectsHold(t *testing.T, srv *s3Server, files map[string][]byte) {
	t.Helper()
	c := srv.client(t)
	for rel, want := range files {
		o, err := c.GetObject(context.Background(), s3Bucket, s3Prefix+rel, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAllObject(o)
		if err != nil {
			t.Fatalf("object %s: %v", rel, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("object %s differs from the original (%d bytes, want %d)", rel, len(got), len(want))
		}
		st, err := c.StatObject(context.Background(), s3Bucket, s3Prefix+rel, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := Digest(st.UserMetadata[metaDigest]); d != digestBytes(want) {
			t.Fatalf("object %s: metadata digest %q, want %s", rel, d, digestBytes(want))
		}
	}
}

func readAllObject(o *minio.Object) ([]byte, error) {
	defer o.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(o)
	return b.Bytes(), err
}

// noLeftovers asserts no journal, temporary file or unfinished upload
// remains.
func noLeftovers(t *testing.T, srv *s3Server, hot string) {
	t.Helper()
	js, err := readJournals(OSFS{}, hot)
	if err != nil || len(js) > 0 {
		t.Fatalf("journals left: %d (%v)", len(js), err)
	}
	filepath.WalkDir(hot, func(p string, d os.DirEntry, err error) error {
		if err == nil && len(d.Name()) > len(tmpPrefix) && d.Name()[:len(tmpPrefix)] == tmpPrefix {
			t.Fatalf("temporary %s left", p)
		}
		return nil
	})
	for u := range srv.client(t).ListIncompleteUploads(context.Background(), s3Bucket, s3Prefix, true) {
		if u.Err == nil {
			t.Fatalf("unfinished upload of %s left", u.Key)
		}
	}
}

// TestS3RoundTrip migrates a pack, a GGUF and a split set onto the
// bucket and back, byte for byte, then onto the bucket again where the
// twins already are (verified by reading both copies, then the hot one
// dropped), and scrubs and reports the bucket.
func TestS3RoundTrip(t *testing.T) {
	srv := startS3(t)
	dir := t.TempDir()
	cfg := s3Config(t, dir, srv.Addr)
	hot, cold := cfg.Tiers[0], cfg.Tiers[1]
	files := s3Fixture(t, hot.Root, 1)
	m := s3Manager(t, cfg)
	ctx := context.Background()

	for _, name := range []string{"m.pack", "tiny.gguf", "set/big"} {
		own := artifactFiles(files, name)
		res, err := m.Migrate(ctx, name, "", cold, false)
		if err != nil {
			t.Fatalf("migrate %s: %v", name, err)
		}
		if res.Action != ActionMoved || res.Verification != LevelContent {
			t.Fatalf("migrate %s: %+v", name, res)
		}
		checkNotHot(t, hot.Root, own)
		checkObjectsHold(t, srv, own)
	}
	noLeftovers(t, srv, hot.Root)

	st, err := m.Status()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Tiers[1].Artifacts); n != 3 {
		t.Fatalf("status lists %d artifacts on the bucket, want 3", n)
	}
	for _, a := range st.Tiers[1].Artifacts {
		if a.Verification != VerifiedState {
			t.Fatalf("status: %s on the bucket is %s, want verified", a.Name, a.Verification)
		}
	}

	for _, name := range []string{"m.pack", "tiny.gguf", "set/big"} {
		res, _, err := m.EnsureHot(ctx, name, hot, false)
		if err != nil {
			t.Fatalf("ensure-hot %s: %v", name, err)
		}
		if res.Action != ActionCopied {
			t.Fatalf("ensure-hot %s: %+v", name, res)
		}
		checkHot(t, hot.Root, artifactFiles(files, name))
	}
	noLeftovers(t, srv, hot.Root)

	res, err := m.Migrate(ctx, "m.pack", "", cold, false)
	if err != nil || res.Action != ActionDropped {
		t.Fatalf("migrate onto a twin: %+v, %v", res, err)
	}
	checkNotHot(t, hot.Root, artifactFiles(files, "m.pack"))

	sr, err := m.Scrub(ctx, []string{"s3"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sr.Checked != 6 || sr.Mismatch != 0 {
		t.Fatalf("scrub: %d checked, %d mismatched, want 6 and 0: %+v", sr.Checked, sr.Mismatch, sr.Findings)
	}
}

// TestS3RefusesOverwrite: an object already at a key the upload would
// take, not a copy of the artifact, stops the migration before anything
// is sent, and stays.
func TestS3RefusesOverwrite(t *testing.T) {
	srv := startS3(t)
	cfg := s3Config(t, t.TempDir(), srv.Addr)
	hot, cold := cfg.Tiers[0], cfg.Tiers[1]
	files := s3Fixture(t, hot.Root, 2)
	other := []byte("somebody else's object")
	if _, err := srv.client(t).PutObject(context.Background(), s3Bucket, s3Prefix+"tiny.gguf", bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	m := s3Manager(t, cfg)
	_, err := m.Migrate(context.Background(), "tiny.gguf", "nvme", cold, false)
	if !errors.Is(err, ErrNotTwin) {
		t.Fatalf("migrate over a different object: %v, want a not-a-twin refusal", err)
	}
	checkHot(t, hot.Root, artifactFiles(files, "tiny.gguf"))
	checkObjectsHoldRaw(t, srv, "tiny.gguf", other)
}

func checkObjectsHoldRaw(t *testing.T, srv *s3Server, rel string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(srv.objectPath(rel))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object %s changed: %v", rel, err)
	}
}
