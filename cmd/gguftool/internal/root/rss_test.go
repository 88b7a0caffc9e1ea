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
	// --gpu off: the Vulkan loader with a driver (lavapipe's LLVM) takes
	// about 90 MiB by itself, which is not the streaming this measures.
	cmd.Env = append(os.Environ(), "GGUFTOOL_CLI_CHILD=1", "GGUFTOOL_CLI_CHILD_PEAK="+peakFile, "GGUFTOOL_GPU=off")
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

// TestLongPromptMemory: a 2,000-token prompt on a model of real attention
// geometry (width 2048, 32 query heads of 128 over 4 KV heads, as
// Qwen3-30B-A3B's) peaks at no more than the weights held in RAM, the KV
// cache at its type (F16), the expert cache and 256 MiB, resident and
// streamed. Before the session's state had exact capacities and the
// scratch was rewound at each layer, this run peaked at 817 MB against
// weights and cache of 210 MB.
func TestLongPromptMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 200 MB model and prefills 2,000 tokens twice")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	if code, _, errOut := run(t, "synth", "--arch", "qwen3moe", "--type", "q8_0", "--random-blocks", "--embd", "2048", "--heads", "32",
		"--heads-kv", "4", "--head-dim", "128", "--layers", "4", "--experts", "16", "--experts-used", "2", "--expert-ff", "256",
		"--vocab", "4096", "-o", src); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	pack := filepath.Join(dir, "m.pack")
	if code, _, errOut := run(t, "pack", src, "-o", pack); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = fmt.Sprint(1 + i%4000)
	}
	prompt := strings.Join(ids, ",")
	const margin = 256 << 20
	const tokens = 4
	// 4 layers × 2 (keys, values) × 4 heads × 128 × 2 bytes (F16).
	wantKV := int64(len(ids)+tokens) * 4 * 2 * 4 * 128 * 2
	for _, c := range []struct {
		name string
		args []string
	}{
		{"resident", []string{"run", src}},
		{"streamed", []string{"run", pack, "--expert-cache-slots", "8"}},
	} {
		r, peak := child(t, append(c.args, "--prompt-ids", prompt, "-n", fmt.Sprint(tokens), "--ignore-eos", "--json")...)
		kv, cache := r.Telemetry.StateBytes, r.Experts.CacheBytes
		bound := r.WeightBytes + kv + cache + margin
		t.Logf("%s: peak RSS %d MiB; weights %d MiB, KV %d MiB, expert cache %d MiB; bound %d MiB; prefill %.0f tok/s",
			c.name, peak>>20, r.WeightBytes>>20, kv>>20, cache>>20, bound>>20, r.Telemetry.PrefillTokPerS)
		if kv != wantKV {
			t.Errorf("%s: the KV cache holds %d bytes, want %d (the prompt and the tokens at F16)", c.name, kv, wantKV)
		}
		if peak > bound {
			t.Errorf("%s: peak RSS %d MiB > weights %d + KV %d + cache %d + 256 MiB", c.name, peak>>20, r.WeightBytes>>20, kv>>20, cache>>20)
		}
	}
}
