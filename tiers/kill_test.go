package tiers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The SIGKILL test runs each operation in a child process (this test
// binary again, with GGUFTOOL_TIERS_CHILD set) on real directories, with
// the real file system, flock locks and the io_uring hasher, and kills it.
const (
	childEnv    = "GGUFTOOL_TIERS_CHILD"   // scenario index
	childRoot   = "GGUFTOOL_TIERS_ROOT"    // the tiers' parent directory
	childKillAt = "GGUFTOOL_TIERS_KILL_AT" // kill at the n-th journal step; 0: never
	killsEnv    = "GGUFTOOL_CRASH_KILLS"   // total kills wanted (default 300)
	bwEnv       = "GGUFTOOL_TIERS_BWLIMIT" // child's copy rate, to spread random kills
)

func TestMain(m *testing.M) {
	if s := os.Getenv(childEnv); s != "" {
		os.Exit(runChild(s))
	}
	if os.Getenv(s3ChildEnv) != "" {
		os.Exit(runS3Child())
	}
	os.Exit(m.Run())
}

// runChild runs one scenario and reports each journal step it passes,
// one line each, on standard output; with childKillAt it SIGKILLs itself
// at that step.
func runChild(scenario string) int {
	i, _ := strconv.Atoi(scenario)
	s := crashScenarios()[i]
	cfg, err := diskConfig(os.Getenv(childRoot), s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m, err := NewManager(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m.copyChunk, m.checkpointBytes = killChunk, killCheckpoint
	m.BWLimit, _ = strconv.ParseInt(os.Getenv(bwEnv), 10, 64)
	killAt, _ := strconv.Atoi(os.Getenv(childKillAt))
	steps := 0
	m.Hook = func(point string) {
		fmt.Println(point)
		if steps++; steps == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	if err := s.run(context.Background(), m); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// diskConfig is a scenario's configuration with tiers under dir.
func diskConfig(dir string, s crashScenario) (*Config, error) {
	return ParseConfig(configJSON(dir, s.tiers), dir+"/storage-tiers.json")
}

func diskWorld(t *testing.T, s crashScenario, files map[string][]byte) (string, *Config) {
	dir := t.TempDir()
	cfg, err := diskConfig(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range cfg.Tiers {
		if err := os.MkdirAll(tr.Root, 0o755); err != nil {
			t.Fatal(err)
		}
		if len(s.place[tr.Name]) > 0 {
			put(t, OSFS{}, tr.Root, files, s.place[tr.Name]...)
		}
	}
	return dir, cfg
}

// Copy geometry and pace of the children: small chunks and checkpoints,
// so an artifact of a few KiB passes many, and for the random kills a
// rate that stretches each copy over tens of milliseconds, so a kill at a
// random moment of it lands at a random byte offset.
const (
	killChunk      = 1024
	killCheckpoint = 2048
	killRate       = 256 << 10 // bytes per second
)

// TestSIGKILL kills migrate, ensure-hot and evict at every journal step
// and at random moments of their copies, recovers (alternately finishing
// and rolling back), and checks what TestCrashAtEveryStep checks, on a
// real disk. GGUFTOOL_CRASH_KILLS sets the total number of kills (default
// 300, at least one per journal step of every scenario); at least half of
// the tries at a random moment must interrupt a copy part way.
func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns hundreds of processes")
	}
	want := 300
	if s := os.Getenv(killsEnv); s != "" {
		want, _ = strconv.Atoi(s)
	}
	files := fixtureFiles(3)
	digests := originalDigests(files)
	scenarios := crashScenarios()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	// How many journal steps each scenario passes, and how long its copies
	// take at least, from the first checkpoint to the last, at the random
	// kills' pace (the throttle only ever adds time).
	var plans []killPlan
	var copying []int // scenarios that copy
	windows := make([]time.Duration, len(scenarios))
	for i, s := range scenarios {
		dir, _ := diskWorld(t, s, files)
		steps, err := child(killPlan{scenario: i}, dir, 0)
		if err != nil {
			t.Fatalf("%s without a kill: %v", s.name, err)
		}
		if len(steps) < 3 {
			t.Fatalf("%s: only %d journal steps", s.name, len(steps))
		}
		for k := 1; k <= len(steps); k++ {
			plans = append(plans, killPlan{scenario: i, killAt: k})
		}
		if n := copiedBytes(s, files); n > killCheckpoint {
			windows[i] = time.Duration(n-killCheckpoint) * time.Second / killRate
			copying = append(copying, i)
		}
	}
	if len(copying) == 0 {
		t.Fatal("no scenario copies anything: nothing for the random kills to interrupt")
	}
	stepPlans := len(plans)
	var r killTally
	n := 0
	for ; n < stepPlans || r.kills < want; n++ {
		if n >= 10*want {
			t.Fatalf("only %d kills in %d runs", r.kills, n)
		}
		p := killPlan{}
		rate := int64(0) // the step kills need no pace
		if n < stepPlans {
			p = plans[n]
		} else {
			i := copying[rng.IntN(len(copying))]
			p = killPlan{scenario: i, afterCopy: time.Duration(1 + rng.Int64N(int64(windows[i])))}
			rate = killRate
		}
		mode := RecoverFinish
		if n%2 == 1 {
			mode = RecoverRollback
		}
		r.add(p, killAndRecover(t, scenarios[p.scenario], p, rate, mode, files, digests))
	}
	if r.stepKills != stepPlans {
		t.Fatalf("%d of %d journal-step kills happened", r.stepKills, stepPlans)
	}
	tries := n - stepPlans
	t.Logf("%d SIGKILLs: %d at journal steps, %d at random moments of a copy (of %d tries; %d of them part way through it, at %d different offsets)",
		r.kills, r.stepKills, r.kills-r.stepKills, tries, r.midCopy, len(r.offsets))
	if 2*r.midCopy < tries || len(r.offsets) < min(r.midCopy, 5) {
		t.Fatalf("of %d random kills only %d interrupted a copy part way, at %d different offsets: the random kills miss the copies", tries, r.midCopy, len(r.offsets))
	}
}

// killPlan is when a child is killed: at its killAt-th journal step, or
// afterCopy after its first copy checkpoint.
type killPlan struct {
	scenario  int
	killAt    int
	afterCopy time.Duration
}

// killed is what one kill interrupted.
type killed struct {
	signalled bool
	midCopy   bool  // a copy was part way
	copied    int64 // how far, in durable bytes
}

// killTally counts the kills of a run of TestSIGKILL.
type killTally struct {
	kills, stepKills, midCopy int
	offsets                   map[[2]int64]bool // scenario, bytes copied
}

func (r *killTally) add(p killPlan, k killed) {
	if !k.signalled {
		return
	}
	r.kills++
	if p.killAt > 0 {
		r.stepKills++
		return
	}
	if k.midCopy {
		r.midCopy++
		if r.offsets == nil {
			r.offsets = map[[2]int64]bool{}
		}
		r.offsets[[2]int64{int64(p.scenario), k.copied}] = true
	}
}

// killAndRecover runs scenario s in a child killed as p says, recovers in
// mode, checks every artifact is whole where it was or where it goes,
// and runs the scenario again to completion.
func killAndRecover(t *testing.T, s crashScenario, p killPlan, rate int64, mode RecoverMode, files map[string][]byte, digests map[string]map[string]Digest) killed {
	t.Helper()
	dir, cfg := diskWorld(t, s, files)
	_, err := child(p, dir, rate)
	var ee *exec.ExitError
	k := killed{signalled: errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL}
	if p.killAt > 0 && !k.signalled {
		t.Fatalf("%s: not killed at journal step %d: %v", s.name, p.killAt, err)
	}
	if k.signalled {
		k.copied, k.midCopy = copyUnderWay(t, cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	what := fmt.Sprintf("%s, killed at step %d / %v after the first checkpoint", s.name, p.killAt, p.afterCopy)
	if _, err := m.Recover(context.Background(), mode); err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	checkHoldings(t, what, OSFS{}, cfg, digests, s)
	if left := leftovers(OSFS{}, cfg); len(left) > 0 {
		t.Fatalf("%s: left after recovery: %v", what, left)
	}
	m.copyChunk, m.checkpointBytes = killChunk, killCheckpoint
	if err := s.run(context.Background(), m); err != nil {
		t.Fatalf("%s: running again: %v", what, err)
	}
	final := maps.Clone(initialHoldings(s))
	maps.Copy(final, s.final)
	if got := holdings(t, OSFS{}, cfg, digests); !maps.EqualFunc(got, final, slices.Equal) {
		t.Fatalf("%s: after running again, holdings %v, want %v", what, got, final)
	}
	return k
}

// copyUnderWay reports whether a journal record shows a copy part way,
// and how many of its bytes were durable.
func copyUnderWay(t *testing.T, cfg *Config) (int64, bool) {
	t.Helper()
	for _, tr := range cfg.Tiers {
		js, err := readJournals(OSFS{}, tr.Root)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			if j.Step == StepCopying && journalCopied(j) < journalSize(j) {
				return journalCopied(j), true
			}
		}
	}
	return 0, false
}

// copiedBytes is how much scenario s copies: the size of every artifact
// that ends up on a tier it was not on.
func copiedBytes(s crashScenario, files map[string][]byte) int64 {
	initial := initialHoldings(s)
	var n int64
	for name, where := range s.final {
		for _, tier := range where {
			if slices.Contains(initial[name], tier) {
				continue
			}
			for rel, b := range files {
				if artifactOf(rel) == name {
					n += int64(len(b))
				}
			}
		}
	}
	return n
}

// checkHoldings asserts every artifact has a correct complete copy and is
// where it was or where the operation puts it.
func checkHoldings(t *testing.T, what string, fsys FS, cfg *Config, digests map[string]map[string]Digest, s crashScenario) {
	t.Helper()
	initial := initialHoldings(s)
	final := maps.Clone(initial)
	maps.Copy(final, s.final)
	for name, where := range holdings(t, fsys, cfg, digests) {
		if len(where) == 0 {
			t.Fatalf("%s: no complete copy of %s left", what, name)
		}
		if !slices.Equal(where, initial[name]) && !slices.Equal(where, final[name]) {
			t.Fatalf("%s: %s is on %v, neither where it was (%v) nor where it goes (%v)", what, name, where, initial[name], final[name])
		}
	}
}

// child runs a scenario in a child process copying at rate bytes per
// second (0: no cap), SIGKILLed as p says, and returns the journal steps
// it reported.
func child(p killPlan, dir string, rate int64) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(p.scenario), childRoot+"="+dir,
		childKillAt+"="+strconv.Itoa(p.killAt), bwEnv+"="+strconv.FormatInt(rate, 10))
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var steps []string
	var timer *time.Timer
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		steps = append(steps, lines.Text())
		if p.afterCopy > 0 && timer == nil && lines.Text() == "copy:checkpoint" {
			timer = time.AfterFunc(p.afterCopy, func() { cmd.Process.Signal(syscall.SIGKILL) })
		}
	}
	err = cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	if err != nil && errb.Len() > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return steps, err
}
