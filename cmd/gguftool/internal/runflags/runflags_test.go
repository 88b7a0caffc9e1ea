package runflags

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/planner"
)

// parse registers the flags on a bare command and parses argv.
func parse(t *testing.T, argv string) (Model, error) {
	t.Helper()
	var m Model
	cmd := &cobra.Command{Use: "x"}
	m.Register(cmd)
	return m, cmd.ParseFlags(strings.Fields(argv))
}

func TestRegister(t *testing.T) {
	cmdtest.UnsetEnv(t)
	defaults := Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}
	kv := func(k, v string, batch, ctx int) Model {
		m := defaults
		m.CacheTypeK, m.CacheTypeV, m.BatchSize, m.CtxSize = k, v, batch, ctx
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		args string
		want Model
	}{
		{name: "defaults", want: defaults},
		{
			name: "every flag",
			args: "-t 4 --expert-cache 2GiB --expert-cache-slots 8 --cache-policy lfu --io pread --buffered --resident-experts --resident-tier q4_k_m --prefetch",
			want: Model{Threads: 4, ExpertCache: "2GiB", ExpertSlots: 8, Policy: "lfu", IO: "pread", Buffered: true, ResidentExperts: true, ResidentTier: "q4_k_m", Prefetch: true, CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"},
		},
		{
			name: "environment overrides the defaults",
			env:  map[string]string{"GGUFTOOL_THREADS": "3", "GGUFTOOL_EXPERT_CACHE": "500M", "GGUFTOOL_CACHE_POLICY": "lfru", "GGUFTOOL_IO": "uring"},
			want: Model{Threads: 3, ExpertCache: "500M", Policy: "lfru", IO: "uring", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"},
		},
		{name: "the KV cache, the batch and the context", args: "--cache-type-k q8_0 --cache-type-v f32 -b 128 -c 4096", want: kv("q8_0", "f32", 128, 4096)},
		{name: "--ctx is --ctx-size", args: "--ctx 2048", want: kv("f16", "f16", 512, 2048)},
		{name: "--gpu-experts", args: "--gpu on --gpu-experts cpu", want: func() Model { m := defaults; m.GPU, m.GPUExperts = "on", "cpu"; return m }()},
		{name: "--gpu-experts from the environment", env: map[string]string{"GGUFTOOL_GPU_EXPERTS": "vram"}, want: func() Model { m := defaults; m.GPUExperts = "vram"; return m }()},
		{
			name: "the KV cache from the environment",
			env:  map[string]string{"GGUFTOOL_CACHE_TYPE_K": "f32", "GGUFTOOL_CACHE_TYPE_V": "q8_0", "GGUFTOOL_BATCH_SIZE": "64", "GGUFTOOL_CTX_SIZE": "100"},
			want: kv("f32", "q8_0", 64, 100),
		},
		{
			name: "flags override the environment",
			env:  map[string]string{"GGUFTOOL_THREADS": "3", "GGUFTOOL_EXPERT_CACHE": "500M"},
			args: "--threads 6 --expert-cache 0",
			want: Model{Threads: 6, ExpertCache: "0", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got, err := parse(t, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	cmdtest.UnsetEnv(t)
	tests := []struct {
		name    string
		args    string
		want    engine.Options
		wantErr string
	}{
		{name: "defaults: all cores, an automatic cache", want: engine.Options{Threads: runtime.GOMAXPROCS(0), CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512,
			Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Auto, Auto: true}}},
		{name: "threads beyond the CPUs: clamped", args: "-t 100000", want: engine.Options{Threads: runtime.GOMAXPROCS(0), CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512,
			Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Auto, Auto: true}}},
		{name: "cache size with a suffix", args: "-t 2 --expert-cache 1.5GiB --io pread --buffered",
			want: engine.Options{Threads: min(2, runtime.GOMAXPROCS(0)), CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512, Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Pread, Buffered: true, Bytes: 3 << 29}}},
		{name: "slots override the size", args: "-t 1 --expert-cache 2G --expert-cache-slots 3 --cache-policy LFU",
			want: engine.Options{Threads: 1, CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512, Cache: engine.CacheOptions{Policy: "LFU", Backend: ioengine.Auto, Slots: 3}}},
		{name: "resident", args: "-t 1 --resident-experts --resident-tier q8_0",
			want: engine.Options{Threads: 1, CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512, ResidentExperts: true, Resident: "q8_0", Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Auto, Auto: true}}},
		{name: "cache types and a batch size", args: "-t 1 --cache-type-k F32 --cache-type-v q8_0 --batch-size 2048",
			want: engine.Options{Threads: 1, CacheTypeK: engine.KVF32, CacheTypeV: engine.KVQ8_0, BatchSize: 2048, Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Auto, Auto: true}}},
		{name: "negative threads", args: "-t -1", wantErr: "--threads -1"},
		{name: "negative context", args: "--ctx-size -1", wantErr: "--ctx-size -1: must be ≥ 0"},
		{name: "batch size 0", args: "-b 0", wantErr: "--batch-size 0: must be in 1..8192"},
		{name: "batch size too big", args: "-b 8193", wantErr: "--batch-size 8193"},
		{name: "unknown cache type", args: "--cache-type-k q4_0", wantErr: `--cache-type-k: engine: KV cache type "q4_0": want f32, f16 or q8_0`},
		{name: "unknown value cache type", args: "--cache-type-v bf16", wantErr: "--cache-type-v"},
		{name: "unknown backend", args: "--io spdk", wantErr: "--io"},
		{name: "unknown policy", args: "--cache-policy fifo", wantErr: `--cache-policy "fifo"`},
		{name: "negative slots", args: "--expert-cache-slots -2", wantErr: "--expert-cache-slots -2"},
		{name: "bad cache size", args: "--expert-cache lots", wantErr: "--expert-cache"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := parse(t, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Options()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpenNotes: Open says once on the writer how it changed what the
// flags asked for: threads clamped to the CPUs, a cache clamped to the
// pack's records or rounded up to one record; nothing when it changed
// nothing.
func TestOpenNotes(t *testing.T) {
	cmdtest.UnsetEnv(t)
	t.Setenv("GGUFTOOL_GPU", "off") // TestGPUFlags has the GPU's notes
	pack := cmdtest.TinyPack(t)
	cpus := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		args      string
		wantNotes []string
		threads   int
		slots     int
	}{
		{"-t 100000 --expert-cache-slots 10000000", []string{
			fmt.Sprintf("note: --threads 100000 is more than the %d CPUs this process may use (GOMAXPROCS): using %d", cpus, cpus),
			"note: expert cache of 10000000 slots is more than the pack's 16 expert records: clamped to 16 slots"}, cpus, 16},
		{"--expert-cache 1TiB", []string{"note: expert cache of 1099511627776 bytes (1.0 TiB) is more than the pack's 16 expert records: clamped to 16 slots"}, cpus, 16},
		{"-t 1 --expert-cache 1", []string{"note: expert cache of 1 byte is smaller than one expert record"}, 1, 1},
		{"-t 1 --expert-cache-slots 3", nil, 1, 3},
	} {
		m, err := parse(t, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		streams, _, notes := iostreams.Test()
		em, err := m.Open(context.Background(), pack, streams)
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		lines := strings.Split(strings.TrimSuffix(notes.String(), "\n"), "\n")
		if notes.Len() == 0 {
			lines = nil
		}
		ok := len(lines) == len(tc.wantNotes)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], tc.wantNotes[i])
		}
		if !ok {
			t.Errorf("%s: notes\n%s\nwant lines beginning\n%s", tc.args, notes.String(), strings.Join(tc.wantNotes, "\n"))
		}
		if em.Threads() != tc.threads || em.Experts().Stats().CacheSlots != tc.slots {
			t.Errorf("%s: %d threads, %d slots; want %d, %d", tc.args, em.Threads(), em.Experts().Stats().CacheSlots, tc.threads, tc.slots)
		}
		em.Close()
	}
}

// TestPlanFillsUnsetFlags: --plan fills in what the command line leaves
// unset, from the plan's choice, and what it sets wins; a plan that does
// not parse is refused before anything opens.
func TestPlanFillsUnsetFlags(t *testing.T) {
	cmdtest.UnsetEnv(t)
	t.Setenv("GGUFTOOL_CACHE_POLICY", "lfu")
	path := filepath.Join(t.TempDir(), "p.json")
	p := &planner.Plan{Schema: planner.Schema, Pack: "/x.pack", PackDigest: "ab", Candidates: []planner.Candidate{{}},
		Choice: planner.Choice{ResidentTier: "/t/q8_0.resident.json", ExpertCacheBytes: 3 << 20, Policy: "lfru", Prefetch: true, Threads: 1}}
	if err := p.Write(path); err != nil {
		t.Fatal(err)
	}
	options := func(argv string) (engine.Options, error) {
		var m Model
		var got engine.Options
		var err error
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { got, err = m.Options(); return nil }}
		m.Register(cmd)
		cmd.SetArgs(strings.Fields(argv))
		if e := cmd.Execute(); e != nil {
			t.Fatal(e)
		}
		return got, err
	}
	got, err := options("--plan " + path)
	want := engine.Options{Threads: 1, Resident: "/t/q8_0.resident.json", CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512,
		Cache: engine.CacheOptions{Policy: "lfru", Backend: ioengine.Auto, Bytes: 3 << 20, Prefetch: true}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("plan alone: %v\n%s", err, cmp.Diff(want, got))
	}
	got, err = options("--plan " + path + " --expert-cache-slots 5 --cache-policy lru --prefetch=false --resident-tier q4_k_m -t 1")
	want = engine.Options{Threads: 1, Resident: "q4_k_m", CacheTypeK: engine.KVF16, CacheTypeV: engine.KVF16, BatchSize: 512, Cache: engine.CacheOptions{Policy: "lru", Backend: ioengine.Auto, Slots: 5}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("flags over the plan: %v\n%s", err, cmp.Diff(want, got))
	}
	if err := os.WriteFile(path, []byte(`{"schema":"gguftool.plan/v1"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := options("--plan " + path); !errors.Is(err, planner.ErrInvalid) || !strings.Contains(err.Error(), path) {
		t.Errorf("a damaged plan: %v", err)
	}
}

// TestOpenShowsProgress: on a terminal Open draws a bar while the weights
// load and clears it when done; quiet, it draws nothing; and a context
// already done (a Ctrl-C during the load) stops it with the context's
// error.
func TestOpenShowsProgress(t *testing.T) {
	cmdtest.UnsetEnv(t)
	pack := cmdtest.TinyPack(t)
	m, err := parse(t, "--resident-experts")
	if err != nil {
		t.Fatal(err)
	}
	for _, quiet := range []bool{false, true} {
		streams, _, errOut := iostreams.Test()
		streams.SetStderrTTY(true)
		streams.Quiet = quiet
		em, err := m.Open(context.Background(), pack, streams)
		if err != nil {
			t.Fatal(err)
		}
		em.Close()
		if drew := strings.Contains(errOut.String(), "loading "+filepath.Base(pack)); drew == quiet {
			t.Errorf("quiet %v: stderr %q", quiet, errOut.String())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	streams, _, _ := iostreams.Test()
	if _, err := m.Open(ctx, pack, streams); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled load: %v, want context.Canceled", err)
	}
}

// TestGPUFlags: --gpu auto on a machine without a usable GPU (none, or
// only lavapipe) says so in one note and runs on the CPU; a bad --gpu,
// --gpu-device or --vram-budget is a usage error; --gpu on with lavapipe
// runs there and says what the device holds.
func TestGPUFlags(t *testing.T) {
	cmdtest.UnsetEnv(t)
	pack := cmdtest.TinyPack(t)
	for _, bad := range []string{"--gpu yes", "--gpu-device x", "--gpu-device -2", "--gpu off --gpu-device 0", "--vram-budget lots", "--vram-budget 0", "--gpu-experts gpu"} {
		m, err := parse(t, bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Options(); !cmdutil.IsUsageError(err) {
			t.Errorf("%s: %v, want a usage error", bad, err)
		}
	}
	t.Setenv("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
	m, _ := parse(t, "")
	streams, _, notes := iostreams.Test()
	em, err := m.Open(context.Background(), pack, streams)
	if err != nil {
		t.Fatal(err)
	}
	em.Close()
	if !strings.HasPrefix(notes.String(), "note: GPU: not used (") || strings.Count(notes.String(), "\n") != 1 {
		t.Errorf("--gpu auto without a GPU: notes %q, want one saying why", notes.String())
	}
	if _, err := os.Stat("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"); err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal("lavapipe is not installed")
		}
		t.Skip("lavapipe is not installed")
	}
	m, _ = parse(t, "--gpu on")
	streams, _, notes = iostreams.Test()
	em, err = m.Open(context.Background(), pack, streams)
	if err != nil {
		t.Fatal(err)
	}
	em.Close()
	if !strings.Contains(notes.String(), "holds the resident weights") || !strings.Contains(notes.String(), "the routed experts (") {
		t.Errorf("--gpu on: notes %q, want the resident weights and the experts on the device", notes.String())
	}
	m, _ = parse(t, "--gpu on --gpu-experts cpu")
	streams, _, notes = iostreams.Test()
	em, err = m.Open(context.Background(), pack, streams)
	if err != nil {
		t.Fatal(err)
	}
	if p := em.Placement(); p.Experts != "ram" {
		t.Errorf("--gpu-experts cpu: the experts are in %s", p.Experts)
	}
	em.Close()
	if !strings.Contains(notes.String(), "routed experts run on the CPU") {
		t.Errorf("--gpu-experts cpu: notes %q", notes.String())
	}
}

// TestDescribeExperts: experts in VRAM are said to be there, with their
// size; otherwise the cache is described.
func TestDescribeExperts(t *testing.T) {
	p := engine.Placement{Backend: "vulkan", Device: "gpu0", Experts: "vram", DeviceExpertBytes: 3 << 20}
	if got := DescribeExperts(engine.SourceStats{Source: "pack"}, p); got != "experts: all in VRAM on gpu0 (3.0 MiB), read once at load" {
		t.Errorf("in VRAM: %q", got)
	}
	p.Experts = "ram"
	if got := DescribeExperts(engine.SourceStats{Source: "resident"}, p); got != DescribeCache(engine.SourceStats{Source: "resident"}) {
		t.Errorf("on the CPU: %q", got)
	}
}
