package tiers

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestS3Locks: the lock objects keep two hosts (here, two managers with
// their own clients) from working on one artifact at once, let readers
// share, expire with a crashed holder, and are renewed while held.
func TestS3Locks(t *testing.T) {
	srv := startS3(t)
	cfg := s3Config(t, t.TempDir(), srv.Addr)
	cold := cfg.Tiers[1]
	host := func() *Manager { m := s3Manager(t, cfg); m.S3.LeaseTTL = 1500 * time.Millisecond; return m }
	a, b := host(), host()
	busy := func(err error, what string) {
		t.Helper()
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("%s: %v, want busy", what, err)
		}
	}

	unlock, err := a.lock(cold, "m.pack", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.lock(cold, "m.pack", true)
	busy(err, "a second exclusive lock")
	if !strings.Contains(err.Error(), "lease until") {
		t.Fatalf("the refusal does not name the holder: %v", err)
	}
	_, err = b.lock(cold, "m.pack", false)
	busy(err, "a shared lock under an exclusive one")
	time.Sleep(3500 * time.Millisecond) // more than two leases: only renewal keeps it
	_, err = b.lock(cold, "m.pack", true)
	busy(err, "an exclusive lock after its holder renewed it")
	unlock()
	unlock, err = b.lock(cold, "m.pack", true)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock()

	r1, err := a.lock(cold, "m.pack", false)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.lock(cold, "m.pack", false)
	if err != nil {
		t.Fatalf("two readers: %v", err)
	}
	_, err = host().lock(cold, "m.pack", true)
	busy(err, "an exclusive lock under readers")
	r1()
	r2()

	// A crashed holder: its lock object stays, its lease runs out.
	s, _ := a.objectsFor(cold)
	dead := s.record("crashed", true)
	dead.Expires = time.Now().Add(-time.Second).UnixMilli()
	if _, err := s.putLock(context.Background(), s.lockKey("tiny.gguf"), dead, "", true); err != nil {
		t.Fatal(err)
	}
	unlock, err = b.lock(cold, "tiny.gguf", true)
	if err != nil {
		t.Fatalf("taking over an expired lock: %v", err)
	}
	unlock()
	live := s.record("alive", true)
	if _, err := s.putLock(context.Background(), s.lockKey("tiny.gguf"), live, "", true); err != nil {
		t.Fatal(err)
	}
	_, err = b.lock(cold, "tiny.gguf", true)
	busy(err, "a live lock of another host")

	// Eight hosts at once: the conditional create lets exactly one in.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for range 8 {
		m := host()
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := m.lock(cold, "race", true)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
				t.Cleanup(u)
			case errors.Is(err, ErrBusy):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || refused != 7 {
		t.Fatalf("8 hosts racing for one lock: %d won, %d refused; want 1 and 7", won, refused)
	}
}

// TestS3MigrateBusyAcrossHosts: while another host holds the artifact's
// lock object, a migration onto the bucket is refused and moves nothing.
func TestS3MigrateBusyAcrossHosts(t *testing.T) {
	w := newS3World(t, 21, nil)
	other := s3Manager(t, w.cfg)
	unlock, err := other.lock(w.cold, "m.pack", true)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = s3Manager(t, w.cfg).Migrate(context.Background(), "m.pack", "", w.cold, false)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("migrate while another host holds the lock: %v", err)
	}
	checkHot(t, w.hot.Root, artifactFiles(w.files, "m.pack"))
}

// TestS3LockOfAGoneProcess: a lock object left by a process of this
// machine that no longer runs (a crash, a SIGKILL) is taken over at once,
// not after its lease; one whose process still runs, or one of another
// host, is still busy until its lease ends.
func TestS3LockOfAGoneProcess(t *testing.T) {
	srv := startS3(t)
	cfg := s3Config(t, t.TempDir(), srv.Addr)
	cold := cfg.Tiers[1]
	m := s3Manager(t, cfg)
	m.S3.LeaseTTL = time.Hour // only the holder's death can free these
	s, _ := m.objectsFor(cold)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	running := exec.Command("sleep", "60")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { running.Process.Kill(); running.Wait() })
	put := func(name string, edit func(*lockRecord)) {
		t.Helper()
		r := s.record("someone", true)
		edit(&r)
		if _, err := s.putLock(context.Background(), s.lockKey(name), r, "", true); err != nil {
			t.Fatal(err)
		}
	}
	put("a", func(r *lockRecord) { r.PID, r.Start = gone.Process.Pid, 0 })
	put("b", func(r *lockRecord) { r.PID, r.Start = running.Process.Pid, processStart(running.Process.Pid) })
	put("c", func(r *lockRecord) { r.PID, r.Start, r.Host = gone.Process.Pid, 0, "another-host" })
	put("d", func(r *lockRecord) { r.PID, r.Start = running.Process.Pid, processStart(running.Process.Pid)+1 }) // the pid, reused

	for _, c := range []struct {
		name string
		free bool
		why  string
	}{
		{"a", true, "a process of this machine that exited"},
		{"b", false, "a process of this machine that runs"},
		{"c", false, "another host's process, whatever its pid here"},
		{"d", true, "a pid now taken by a later process"},
	} {
		unlock, err := m.lock(cold, c.name, true)
		switch {
		case c.free && err != nil:
			t.Fatalf("lock held by %s: %v, want it taken over at once", c.why, err)
		case !c.free && !errors.Is(err, ErrBusy):
			t.Fatalf("lock held by %s: %v, want busy", c.why, err)
		case err == nil:
			unlock()
		}
	}
}
