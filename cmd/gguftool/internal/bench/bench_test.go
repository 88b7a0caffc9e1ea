package bench

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// flagCase is one argv and the options it should give, or the usage
// error it should be refused with.
type flagCase[O any] struct {
	name    string
	env     map[string]string
	args    string
	want    O
	wantErr string
}

// testFlags runs each case's argv through the command newCmd builds and
// compares the options its run function is handed, less the streams.
func testFlags[O any](t *testing.T, newCmd func(*cmdutil.Factory, func(context.Context, *O) error) *cobra.Command,
	streams func(*O) **iostreams.IOStreams, cases []flagCase[O]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ios, _, _ := iostreams.Test()
			var got *O
			cmd := newCmd(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *O) error {
				got = o
				return nil
			})
			cmd.SetFlagErrorFunc(cmdutil.FlagErrorFunc)
			cmd.SetArgs(strings.Fields(tt.args))
			cmd.SetIn(&bytes.Buffer{})
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			_, err := cmd.ExecuteC()
			if tt.wantErr != "" {
				if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *streams(got) != ios {
				t.Error("the options do not carry the factory's streams")
			}
			*streams(got) = nil
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// defaultModelFlags are the model flags with nothing set.
func defaultModelFlags() runflags.Model {
	return runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto"}
}

func TestNewCmdBenchPack(t *testing.T) {
	testFlags(t, NewCmdBenchPack, func(o *BenchPackOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchPackOptions]{
		{name: "defaults", args: "m.gguf", want: BenchPackOptions{Src: "m.gguf"}},
		{name: "every flag", args: "m-00001-of-00004.gguf --dir /scratch --keep --json",
			want: BenchPackOptions{Src: "m-00001-of-00004.gguf", Dir: "/scratch", Keep: true, JSON: true}},
		{name: "no source", args: "", wantErr: "expected one GGUF file or shard, got 0"},
	})
}

func TestNewCmdBenchIO(t *testing.T) {
	testFlags(t, NewCmdBenchIO, func(o *BenchIOOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchIOOptions]{
		{name: "defaults", args: "m.pack", want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "auto", Seed: 1}},
		{name: "binary size, every flag", args: "m.pack --gguf m.gguf --qd 32 --backend uring --topk 4 --bytes 4GiB --seed 9 --json",
			want: BenchIOOptions{Pack: "m.pack", GGUF: "m.gguf", QD: 32, Backend: "uring", TopK: 4, Bytes: 4 << 30, Seed: 9, JSON: true}},
		{name: "decimal size", args: "m.pack --bytes 1.5G", want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "auto", Seed: 1, Bytes: 15e8}},
		{name: "backend from the environment", env: map[string]string{"GGUFTOOL_IO_BACKEND": "pread"}, args: "m.pack",
			want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "pread", Seed: 1}},
		{name: "bad size", args: "m.pack --bytes all", wantErr: "invalid size"},
		{name: "no pack", args: "--qd 4", wantErr: "expected one pack directory, got 0"},
	})
}

func TestNewCmdBenchTwins(t *testing.T) {
	testFlags(t, NewCmdBenchTwins, func(o *BenchTwinsOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchTwinsOptions]{
		{name: "defaults", args: "/nvme/m.pack /cold/m.pack", want: BenchTwinsOptions{Hot: "/nvme/m.pack", Cold: "/cold/m.pack", Runs: 3}},
		{name: "every flag", args: "a b --runs 5 --json", want: BenchTwinsOptions{Hot: "a", Cold: "b", Runs: 5, JSON: true}},
		{name: "no runs", args: "a b --runs 0", wantErr: "--runs must be at least 1"},
		{name: "one path", args: "a", wantErr: "expected HOT and COLD paths, got 1"},
	})
}

func TestNewCmdBenchMigrate(t *testing.T) {
	testFlags(t, NewCmdBenchMigrate, func(o *BenchMigrateOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchMigrateOptions]{
		{name: "defaults", args: "/nvme/m.pack --dir /archive/scratch", want: BenchMigrateOptions{Artifact: "/nvme/m.pack", Dir: "/archive/scratch"}},
		{name: "json", args: "m.gguf --dir d --json", want: BenchMigrateOptions{Artifact: "m.gguf", Dir: "d", JSON: true}},
		{name: "no scratch directory", args: "m.pack", wantErr: "--dir is required"},
		{name: "no artifact", args: "--dir d", wantErr: "expected an artifact path, got 0"},
	})
}

func TestNewCmdBenchDecode(t *testing.T) {
	testFlags(t, NewCmdBenchDecode, func(o *BenchDecodeOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchDecodeOptions]{
		{name: "defaults", args: "m.gguf", want: BenchDecodeOptions{Model: "m.gguf", PromptTokens: 32, Tokens: 128, Runs: 3, Flags: defaultModelFlags()}},
		{
			name: "every flag",
			args: "m.pack --prompt-tokens 64 -n 16 --runs 1 --reference m.gguf --no-llamacpp --json --threads 2 --expert-cache 512MiB",
			want: BenchDecodeOptions{Model: "m.pack", PromptTokens: 64, Tokens: 16, Runs: 1, Reference: "m.gguf", NoLlamaCpp: true, JSON: true,
				Flags: runflags.Model{Threads: 2, ExpertCache: "512MiB", Policy: "lru", IO: "auto"}},
		},
		{name: "environment", env: map[string]string{"GGUFTOOL_THREADS": "4", "GGUFTOOL_CACHE_POLICY": "lfu"}, args: "m.pack",
			want: BenchDecodeOptions{Model: "m.pack", PromptTokens: 32, Tokens: 128, Runs: 3,
				Flags: runflags.Model{Threads: 4, ExpertCache: "auto", Policy: "lfu", IO: "auto"}}},
		{name: "one token", args: "m.gguf -n 1", wantErr: "-n ≥ 2"},
		{name: "no prompt", args: "m.gguf --prompt-tokens 0", wantErr: "--prompt-tokens ≥ 1"},
		{name: "no runs", args: "m.gguf --runs 0", wantErr: "--runs ≥ 1"},
	})
}

func TestNewCmdBenchServe(t *testing.T) {
	testFlags(t, NewCmdBenchServe, func(o *BenchServeOptions) **iostreams.IOStreams { return &o.IO }, []flagCase[BenchServeOptions]{
		{name: "defaults", args: "m.pack",
			want: BenchServeOptions{Model: "m.pack", Clients: 64, Duration: time.Minute, Queue: 16, MaxTokens: 16, Flags: defaultModelFlags()}},
		{
			name: "every flag",
			args: "m.gguf --clients 8 --duration 2s --queue 0 --max-tokens 4 --json --expert-cache-slots 2",
			want: BenchServeOptions{Model: "m.gguf", Clients: 8, Duration: 2 * time.Second, MaxTokens: 4, JSON: true,
				Flags: runflags.Model{ExpertCache: "auto", ExpertSlots: 2, Policy: "lru", IO: "auto"}},
		},
		{name: "cache from the environment", env: map[string]string{"GGUFTOOL_EXPERT_CACHE": "1GiB"}, args: "m.pack",
			want: BenchServeOptions{Model: "m.pack", Clients: 64, Duration: time.Minute, Queue: 16, MaxTokens: 16,
				Flags: runflags.Model{ExpertCache: "1GiB", Policy: "lru", IO: "auto"}}},
		{name: "no clients", args: "m.pack --clients 0", wantErr: "--clients ≥ 1"},
		{name: "negative queue", args: "m.pack --queue -1", wantErr: "--queue ≥ 0"},
		{name: "no duration", args: "m.pack --duration 0s", wantErr: "--duration > 0"},
		{name: "duration without a unit", args: "m.pack --duration 60", wantErr: `invalid argument "60"`},
	})
}

// TestServeFailures: the checks bench serve exits 1 on each see the
// failure they name, a 429 the server issued with room in its queue
// among them, and a clean run passes.
func TestServeFailures(t *testing.T) {
	clean := ServeResult{Completed: 10, Rejected429: 40, ServerRejections: 40, Other: map[string]int{},
		GoroutinesBefore: 5, GoroutinesAfter: 5, FDsBefore: 40, FDsAfter: 40}
	if why := clean.failures(); len(why) != 0 {
		t.Errorf("a clean run fails: %v", why)
	}
	for _, tc := range []struct {
		name string
		edit func(*ServeResult)
		want string
	}{
		{"a 429 with room in the queue", func(r *ServeResult) { r.ServerRejectedWithRoom = 1 }, "1 × 429 while the queue had room"},
		{"a 5xx", func(r *ServeResult) { r.Other = map[string]int{"500": 2} }, "statuses other than 200 and 429: map[500:2]"},
		{"a transport error", func(r *ServeResult) { r.Other = map[string]int{"transport error": 1} }, "transport error"},
		{"a leaked goroutine", func(r *ServeResult) { r.GoroutinesAfter = 6 }, "goroutines leaked: 5 → 6"},
		{"a leaked descriptor", func(r *ServeResult) { r.FDsAfter = 41 }, "file descriptors leaked: 40 → 41"},
		{"nothing completed", func(r *ServeResult) { r.Completed = 0 }, "no request completed"},
	} {
		r := clean
		tc.edit(&r)
		why := r.failures()
		if len(why) != 1 || !strings.Contains(why[0], tc.want) {
			t.Errorf("%s: failures %q; want one naming %q", tc.name, why, tc.want)
		}
	}
}
