package root

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	runcmd "github.com/gguftool/gguftool/cmd/gguftool/internal/run"
)

// TestMain lets a test run the command line in a child process (to
// measure its peak memory): GGUFTOOL_CLI_CHILD=1 makes this binary
// gguftool, and GGUFTOOL_CLI_CHILD_PEAK names a file for its peak
// resident set size.
func TestMain(m *testing.M) {
	if os.Getenv("GGUFTOOL_CLI_CHILD") == "1" {
		code := Main()
		if path := os.Getenv("GGUFTOOL_CLI_CHILD_PEAK"); path != "" {
			if err := writePeakRSS(path); err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 1
			}
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// writePeakRSS writes the process's peak resident set size (VmHWM) in
// bytes. The child reports it itself because its rusage would not do:
// os/exec starts a child with vfork, so until exec it shares the test
// process's memory, and Linux counts that process's peak into the
// child's ru_maxrss, whatever tests ran before in it.
func writePeakRSS(path string) error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var n int64
			if _, err := fmt.Sscanf(strings.TrimSpace(kb), "%d kB", &n); err != nil {
				return fmt.Errorf("VmHWM %q: %w", kb, err)
			}
			return os.WriteFile(path, []byte(fmt.Sprint(n<<10)), 0o644)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("no VmHWM in /proc/self/status")
}

// child runs gguftool args in a new process and returns its --json output
// and peak resident set size in bytes.
func child(t *testing.T, args ...string) (runcmd.Report, int64) {
	t.Helper()
	peakFile := filepath.Join(t.TempDir(), "peak")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GGUFTOOL_CLI_CHILD=1", "GGUFTOOL_CLI_CHILD_PEAK="+peakFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	var r runcmd.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	data, err := os.ReadFile(peakFile)
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	if _, err := fmt.Sscan(string(data), &peak); err != nil {
		t.Fatalf("peak RSS %q: %v", data, err)
	}
	return r, peak
}

// TestStreamingMemory: streaming through a one-slot cache keeps the whole
// process under resident weights + cache + 64 MiB, however large the
// experts (nothing is preloaded behind the cache's back), and a cache
// sized for every expert touches only the slots it fills.
func TestStreamingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB model")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "--embd", "512", "--heads", "8", "--heads-kv", "2",
		"--head-dim", "64", "--layers", "4", "--experts", "64", "--experts-used", "4", "--expert-ff", "512", "-o", src); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	pack := filepath.Join(dir, "m.pack")
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	const margin = 64 << 20
	r, peak := child(t, "run", pack, "--prompt-ids", "1,2,3,4,5,6,7,8", "-n", "8", "--expert-cache-slots", "1", "--json", "--ignore-eos")
	resident := r.ResidentBytes
	all := int64(4*64) * r.Experts.RecordSize
	t.Logf("one slot: peak RSS %d MiB; resident %d MiB, cache %d KiB, all experts %d MiB, %d misses, %d evictions",
		peak>>20, resident>>20, r.Experts.CacheBytes>>10, all>>20, r.Experts.Misses, r.Experts.Evictions)
	if peak >= resident+r.Experts.CacheBytes+margin {
		t.Errorf("peak RSS %d ≥ resident %d + cache %d + 64 MiB", peak, resident, r.Experts.CacheBytes)
	}
	if r.Experts.BytesRead < r.Experts.Misses*uint64(r.Experts.RecordSize) || r.Experts.Evictions == 0 {
		t.Errorf("one slot: %+v", r.Experts)
	}
	// A cache with a slot for every expert, used for one token: only the
	// slots filled count.
	r, peak = child(t, "run", pack, "--prompt-ids", "1", "-n", "1", "--expert-cache-slots", "256", "--json")
	filled := int64(r.Experts.Misses) * r.Experts.RecordSize
	t.Logf("every slot: peak RSS %d MiB for a %d MiB cache that holds %d MiB", peak>>20, r.Experts.CacheBytes>>20, filled>>20)
	if peak >= resident+filled+margin {
		t.Errorf("peak RSS %d: the %d-byte cache was touched beyond the %d bytes it holds", peak, r.Experts.CacheBytes, filled)
	}
}
