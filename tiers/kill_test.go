package tiers

import (
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
	os.Exit(m.Run())
}

// runChild runs one scenario and reports how many journal steps it
// passed; with childKillAt it SIGKILLs itself at that step.
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
	m.copyChunk, m.checkpointBytes = 1024, 2048
	m.BWLimit, _ = strconv.ParseInt(os.Getenv(bwEnv), 10, 64)
	killAt, _ := strconv.Atoi(os.Getenv(childKillAt))
	steps := 0
	m.Hook = func(string) {
		if steps++; steps == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	if err := s.run(context.Background(), m); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(steps)
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

// TestSIGKILL kills migrate, ensure-hot and evict at every journal step
// and at random moments, recovers (alternately finishing and rolling
// back), and checks what TestCrashAtEveryStep checks, on a real disk.
// GGUFTOOL_CRASH_KILLS sets the total number of kills (default 300, at
// least one per journal step of every scenario).
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
	kills, stepKills, midOp := 0, 0, 0

	type plan struct {
		scenario int
		killAt   int           // journal step, or 0 for a timed kill
		after    time.Duration // timed kill
	}
	var plans []plan
	durations := make([]time.Duration, len(scenarios))
	for i, s := range scenarios {
		dir, _ := diskWorld(t, s, files)
		start := time.Now()
		out, err := child(i, dir, 0, 0, 0)
		durations[i] = time.Since(start)
		if err != nil {
			t.Fatalf("%s without a kill: %v", s.name, err)
		}
		steps, _ := strconv.Atoi(strings.TrimSpace(out))
		if steps < 3 {
			t.Fatalf("%s: only %d journal steps", s.name, steps)
		}
		for k := 1; k <= steps; k++ {
			plans = append(plans, plan{scenario: i, killAt: k})
		}
	}
	stepPlans := len(plans)
	for n := 0; n < stepPlans || kills < want; n++ {
		if n >= 10*want {
			t.Fatalf("only %d kills in %d runs", kills, n)
		}
		var p plan
		if n < stepPlans {
			p = plans[n]
		} else {
			i := rng.IntN(len(scenarios))
			p = plan{scenario: i, after: time.Duration(rng.Int64N(int64(durations[i])))}
		}
		s := scenarios[p.scenario]
		dir, cfg := diskWorld(t, s, files)
		_, err := child(p.scenario, dir, p.killAt, p.after, 0)
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if p.killAt > 0 && !killed {
			t.Fatalf("%s: not killed at journal step %d: %v", s.name, p.killAt, err)
		}
		if killed && p.killAt == 0 {
			// Did the kill interrupt the operation itself (a journal record or
			// a temporary file exists), rather than process start-up?
			if len(leftovers(OSFS{}, cfg)) > 0 {
				midOp++
			}
		}
		if killed {
			kills++
			if p.killAt > 0 {
				stepKills++
			}
		}
		mode := RecoverFinish
		if n%2 == 1 {
			mode = RecoverRollback
		}
		m, err := NewManager(cfg)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%s, killed at step %d / after %v", s.name, p.killAt, p.after)
		if _, err := m.Recover(context.Background(), mode); err != nil {
			t.Fatalf("%s: recover: %v", what, err)
		}
		checkHoldings(t, what, OSFS{}, cfg, digests, s)
		if left := leftovers(OSFS{}, cfg); len(left) > 0 {
			t.Fatalf("%s: left after recovery: %v", what, left)
		}
		m.copyChunk, m.checkpointBytes = 1024, 2048
		if err := s.run(context.Background(), m); err != nil {
			t.Fatalf("%s: running again: %v", what, err)
		}
		final := maps.Clone(initialHoldings(s))
		maps.Copy(final, s.final)
		if got := holdings(t, OSFS{}, cfg, digests); !maps.EqualFunc(got, final, slices.Equal) {
			t.Fatalf("%s: after running again, holdings %v, want %v", what, got, final)
		}
		m.Close()
	}
	if stepKills != stepPlans {
		t.Fatalf("%d of %d journal-step kills happened", stepKills, stepPlans)
	}
	t.Logf("%d SIGKILLs: %d at journal steps, %d at random moments (%d of them with an operation under way)", kills, stepKills, kills-stepKills, midOp)
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

// child runs a scenario in a child process, SIGKILLing it after a delay
// when after > 0, and returns its standard output.
func child(scenario int, dir string, killAt int, after time.Duration, bw int64) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(scenario), childRoot+"="+dir,
		childKillAt+"="+strconv.Itoa(killAt), bwEnv+"="+strconv.FormatInt(bw, 10))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return "", err
	}
	if after > 0 {
		timer := time.AfterFunc(after, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	if err != nil && errb.Len() > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.String(), err
}
