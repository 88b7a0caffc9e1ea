package tiers

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// The S3 SIGKILL test runs `migrate m.pack --to s3` in a child process
// (this test binary again) against the real server and kills it.
const (
	s3ChildEnv = "GGUFTOOL_S3_CHILD"    // the hot root; set: run as the child
	s3Endpoint = "GGUFTOOL_S3_ENDPOINT" // the server
	s3KillAt   = "GGUFTOOL_S3_KILL_AT"  // kill at the n-th step; 0: never
	s3KillRate = 24 << 20               // the child's upload rate, bytes per second
	// s3KillLease outlasts the test: a killed child's lock objects are
	// taken over only because its process is gone (lockRecord.orphaned).
	s3KillLease = time.Hour
)

func s3ChildManager(hot, endpoint string) (*Manager, error) {
	js := fmt.Sprintf(`{"schema": %q, "version": 2, "tiers": [
	 {"name": "nvme", "root": %q, "role": "hot"},
	 {"name": "s3", "role": "cold", "s3": {"endpoint": %q, "bucket": %q, "prefix": %q}}]}`,
		ConfigSchema, hot, "http://"+endpoint, s3Bucket, s3Prefix)
	cfg, err := ParseConfig([]byte(js), filepath.Join(filepath.Dir(hot), "storage-tiers.json"))
	if err != nil {
		return nil, err
	}
	m, err := NewManager(cfg)
	if err != nil {
		return nil, err
	}
	m.S3 = S3Options{PartSize: 5 << 20, Parallel: 2, MaxRetries: 2, Timeout: 10 * time.Second, LeaseTTL: s3KillLease}
	return m, nil
}

// runS3Child migrates m.pack onto the bucket, printing each step, and
// with s3KillAt SIGKILLs itself at that step.
func runS3Child() int {
	m, err := s3ChildManager(os.Getenv(s3ChildEnv), os.Getenv(s3Endpoint))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m.BWLimit = s3KillRate
	killAt, _ := strconv.Atoi(os.Getenv(s3KillAt))
	steps := 0
	m.Hook = func(point string) {
		fmt.Println(point)
		if steps++; steps == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	cold, _ := m.Config.Tier("s3")
	if _, err := m.Migrate(context.Background(), "m.pack", "", cold, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// s3Child runs the child; after > 0 kills it that long after it starts.
func s3Child(t *testing.T, hot, endpoint string, killAt int, after time.Duration) ([]string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), s3ChildEnv+"="+hot, s3Endpoint+"="+endpoint, s3KillAt+"="+strconv.Itoa(killAt))
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if after > 0 {
		timer := time.AfterFunc(after, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	var steps []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		steps = append(steps, sc.Text())
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
		return steps, true
	}
	if err != nil {
		t.Fatalf("child: %v: %s", err, errb.String())
	}
	return steps, false
}

// TestS3SIGKILL kills an S3 migration at every step it records and at
// random moments of its upload, recovers (finishing and rolling back
// after each step; alternately after the random kills), and checks that the artifact still has a whole copy
// whose bytes are the original's, that recovery left no record,
// temporary file or unfinished upload, and that migrating again
// completes. GGUFTOOL_S3_KILLS sets the random kills (default 8).
func TestS3SIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := startS3(t)
	want := 8
	if s := os.Getenv("GGUFTOOL_S3_KILLS"); s != "" {
		want, _ = strconv.Atoi(s)
	}
	base := t.TempDir()
	world := func(n int) (string, map[string][]byte) {
		clearBucket(t, srv)
		hot := filepath.Join(base, strconv.Itoa(n), "nvme")
		return hot, artifactFiles(s3Fixture(t, hot, 31), "m.pack")
	}
	hot, files := world(0)
	start := time.Now()
	steps, _ := s3Child(t, hot, srv.Addr, 0, 0)
	full := time.Since(start)
	if len(steps) < 8 {
		t.Fatalf("the migration passed only %d steps: %v", len(steps), steps)
	}
	// Every recorded step is killed at twice, recovered once each way:
	// what finishing must cope with at a step differs from what rolling
	// back must.
	type trial struct {
		killAt int
		after  time.Duration
		mode   RecoverMode
	}
	var trials []trial
	for n := 1; n <= len(steps); n++ {
		trials = append(trials, trial{killAt: n, mode: RecoverFinish}, trial{killAt: n, mode: RecoverRollback})
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for i := range want {
		mode := RecoverFinish
		if i%2 == 1 {
			mode = RecoverRollback
		}
		trials = append(trials, trial{after: time.Duration(rng.Int64N(int64(full))), mode: mode})
	}
	kills, atSteps, midUpload := 0, 0, 0
	for n, tr := range trials {
		hot, files = world(n + 1)
		seen, killed := s3Child(t, hot, srv.Addr, tr.killAt, tr.after)
		if !killed {
			continue
		}
		kills++
		if tr.killAt > 0 {
			atSteps++
		}
		last := ""
		if len(seen) > 0 {
			last = seen[len(seen)-1]
		}
		if strings.HasPrefix(last, "upload:") || last == "journal:begin" {
			midUpload++
		}
		checkAfterKill(t, srv, hot, files, tr.mode, fmt.Sprintf("kill %d (at step %d %q, after %v, then %s)", n+1, tr.killAt, last, tr.after, map[RecoverMode]string{RecoverFinish: "finish", RecoverRollback: "roll back"}[tr.mode]))
	}
	t.Logf("%d SIGKILLs of an S3 migrate (%d at its %d recorded steps, each recovered both ways; %d part way through hashing or uploading)", kills, atSteps, len(steps), midUpload)
	if atSteps < 2*len(steps) {
		t.Fatalf("only %d of the %d kills at recorded steps landed", atSteps, 2*len(steps))
	}
}

// checkAfterKill recovers in mode and checks the artifact survived whole,
// then migrates again and checks that completes.
func checkAfterKill(t *testing.T, srv *s3Server, hot string, files map[string][]byte, mode RecoverMode, what string) {
	t.Helper()
	m, err := s3ChildManager(hot, srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.Recover(ctx, mode); err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	onHot, onS3 := wholeOnHot(hot, files), wholeOnS3(t, srv, files)
	if !onHot && !onS3 {
		t.Fatalf("%s: recovery left no whole copy", what)
	}
	noLeftovers(t, srv, hot)
	cold, _ := m.Config.Tier("s3")
	if _, err := m.Migrate(ctx, "m.pack", "", cold, false); err != nil {
		t.Fatalf("%s: migrating again: %v", what, err)
	}
	if wholeOnHot(hot, files) || !wholeOnS3(t, srv, files) {
		t.Fatalf("%s: migrating again did not move it whole", what)
	}
	noLeftovers(t, srv, hot)
}

func wholeOnHot(hot string, files map[string][]byte) bool {
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(hot, filepath.FromSlash(rel)))
		if err != nil || string(got) != string(want) {
			return false
		}
	}
	return true
}

func wholeOnS3(t *testing.T, srv *s3Server, files map[string][]byte) bool {
	c := srv.client(t)
	for rel, want := range files {
		o, err := c.GetObject(context.Background(), s3Bucket, s3Prefix+rel, minio.GetObjectOptions{})
		if err != nil {
			return false
		}
		got, err := readAllObject(o)
		if err != nil || string(got) != string(want) {
			return false
		}
	}
	return true
}

// clearBucket removes every object and unfinished upload under the
// prefix.
func clearBucket(t *testing.T, srv *s3Server) {
	t.Helper()
	c := srv.client(t)
	ctx := context.Background()
	for o := range c.ListObjects(ctx, s3Bucket, minio.ListObjectsOptions{Prefix: s3Prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if err := c.RemoveObject(ctx, s3Bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for u := range c.ListIncompleteUploads(ctx, s3Bucket, s3Prefix, true) {
		if u.Err == nil {
			c.RemoveIncompleteUpload(ctx, s3Bucket, u.Key)
		}
	}
}
