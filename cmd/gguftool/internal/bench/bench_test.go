package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil/cmdtest"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// defaultModelFlags are the model flags with nothing set.
func defaultModelFlags() runflags.Model {
	return runflags.Model{ExpertCache: "auto", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}
}

func TestNewCmdBenchPack(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchPack, func(o *BenchPackOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchPackOptions]{
		{Name: "defaults", Args: "m.gguf", Want: BenchPackOptions{Src: "m.gguf"}},
		{Name: "every flag", Args: "m-00001-of-00004.gguf --dir /scratch --keep --json",
			Want: BenchPackOptions{Src: "m-00001-of-00004.gguf", Dir: "/scratch", Keep: true, JSON: true}},
		{Name: "no source", Args: "", WantErr: "expected one GGUF file or shard, got 0"},
	})
}

func TestNewCmdBenchIO(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchIO, func(o *BenchIOOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchIOOptions]{
		{Name: "defaults", Args: "m.pack", Want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "auto", Seed: 1}},
		{Name: "binary size, every flag", Args: "m.pack --gguf m.gguf --qd 32 --backend uring --topk 4 --bytes 4GiB --seed 9 --json",
			Want: BenchIOOptions{Pack: "m.pack", GGUF: "m.gguf", QD: 32, Backend: "uring", TopK: 4, Bytes: 4 << 30, Seed: 9, JSON: true}},
		{Name: "decimal size", Args: "m.pack --bytes 1.5G", Want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "auto", Seed: 1, Bytes: 15e8}},
		{Name: "backend from the environment", Env: map[string]string{"GGUFTOOL_IO_BACKEND": "pread"}, Args: "m.pack",
			Want: BenchIOOptions{Pack: "m.pack", QD: 8, Backend: "pread", Seed: 1}},
		{Name: "bad size", Args: "m.pack --bytes all", WantErr: "invalid size"},
		{Name: "no pack", Args: "--qd 4", WantErr: "expected one pack directory, got 0"},
	})
}

func TestNewCmdBenchTwins(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchTwins, func(o *BenchTwinsOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchTwinsOptions]{
		{Name: "defaults", Args: "/nvme/m.pack /cold/m.pack", Want: BenchTwinsOptions{Hot: "/nvme/m.pack", Cold: "/cold/m.pack", Runs: 3}},
		{Name: "every flag", Args: "a b --runs 5 --json --config t.json", Want: BenchTwinsOptions{Hot: "a", Cold: "b", Runs: 5, JSON: true, Config: "t.json"}},
		{Name: "an s3 copy", Args: "/nvme/m.pack s3://models/archive/m.pack", Want: BenchTwinsOptions{Hot: "/nvme/m.pack", Cold: "s3://models/archive/m.pack", Runs: 3}},
		{Name: "no runs", Args: "a b --runs 0", WantErr: "--runs must be at least 1"},
		{Name: "one path", Args: "a", WantErr: "expected HOT and COLD paths, got 1"},
	})
}

func TestNewCmdBenchMigrate(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchMigrate, func(o *BenchMigrateOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchMigrateOptions]{
		{Name: "defaults", Args: "/nvme/m.pack --dir /archive/scratch", Want: BenchMigrateOptions{Artifact: "/nvme/m.pack", Dir: "/archive/scratch"}},
		{Name: "json", Args: "m.gguf --dir d --json", Want: BenchMigrateOptions{Artifact: "m.gguf", Dir: "d", JSON: true}},
		{Name: "no scratch directory", Args: "m.pack", WantErr: "--dir is required"},
		{Name: "no artifact", Args: "--dir d", WantErr: "expected an artifact path, got 0"},
	})
}

func TestNewCmdBenchDecode(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchDecode, func(o *BenchDecodeOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchDecodeOptions]{
		{Name: "defaults", Args: "m.gguf", Want: BenchDecodeOptions{Model: "m.gguf", PromptTokens: 32, Tokens: 128, Runs: 3, Parallel: 1, LlamaCPU: "best", Flags: defaultModelFlags()}},
		{
			Name: "every flag",
			Args: "m.pack --prompt-tokens 64 -n 16 --runs 1 --parallel 4 --reference m.gguf --no-llamacpp --llama-cpu haswell --json --threads 2 --expert-cache 512MiB",
			Want: BenchDecodeOptions{Model: "m.pack", PromptTokens: 64, Tokens: 16, Runs: 1, Parallel: 4, Reference: "m.gguf", NoLlamaCpp: true, LlamaCPU: "haswell", JSON: true,
				Flags: runflags.Model{Threads: 2, ExpertCache: "512MiB", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}},
		},
		{Name: "environment", Env: map[string]string{"GGUFTOOL_THREADS": "4", "GGUFTOOL_CACHE_POLICY": "lfu"}, Args: "m.pack",
			Want: BenchDecodeOptions{Model: "m.pack", PromptTokens: 32, Tokens: 128, Runs: 3, Parallel: 1, LlamaCPU: "best",
				Flags: runflags.Model{Threads: 4, ExpertCache: "auto", Policy: "lfu", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}}},
		{Name: "one sequence's prompt over a batch", Args: "m.gguf --prompt-tokens 16384 -n 16 --runs 1",
			Want: BenchDecodeOptions{Model: "m.gguf", PromptTokens: 16384, Tokens: 16, Runs: 1, Parallel: 1, LlamaCPU: "best", Flags: defaultModelFlags()}},
		{Name: "hostile CPU build", Args: "m.gguf --llama-cpu ../../x", WantErr: "--llama-cpu"},
		{Name: "parallel zero", Args: "m.gguf --parallel 0", WantErr: "--parallel 0"},
		{Name: "parallel prompts over a batch", Args: "m.gguf --parallel 17 --prompt-tokens 32", WantErr: "at most 512"},
		{Name: "one token", Args: "m.gguf -n 1", WantErr: "-n ≥ 2"},
		{Name: "no prompt", Args: "m.gguf --prompt-tokens 0", WantErr: "--prompt-tokens ≥ 1"},
		{Name: "no runs", Args: "m.gguf --runs 0", WantErr: "--runs ≥ 1"},
	})
}

func TestNewCmdBenchServe(t *testing.T) {
	cmdtest.RunFlagCases(t, NewCmdBenchServe, func(o *BenchServeOptions) **iostreams.IOStreams { return &o.IO }, []cmdtest.FlagCase[BenchServeOptions]{
		{Name: "defaults", Args: "m.pack",
			Want: BenchServeOptions{Model: "m.pack", Clients: 64, Duration: time.Minute, Queue: 16, Parallel: 8, Chunk: 64, MaxTokens: 16, Flags: defaultModelFlags()}},
		{
			Name: "every flag",
			Args: "m.gguf --clients 8 --duration 2s --queue 0 --parallel 2 --prefill-chunk 5 --max-tokens 4 --json --expert-cache-slots 2",
			Want: BenchServeOptions{Model: "m.gguf", Clients: 8, Duration: 2 * time.Second, Parallel: 2, Chunk: 5, MaxTokens: 4, JSON: true,
				Flags: runflags.Model{ExpertCache: "auto", ExpertSlots: 2, Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}},
		},
		{Name: "cache from the environment", Env: map[string]string{"GGUFTOOL_EXPERT_CACHE": "1GiB"}, Args: "m.pack",
			Want: BenchServeOptions{Model: "m.pack", Clients: 64, Duration: time.Minute, Queue: 16, Parallel: 8, Chunk: 64, MaxTokens: 16,
				Flags: runflags.Model{ExpertCache: "1GiB", Policy: "lru", IO: "auto", CacheTypeK: "f16", CacheTypeV: "f16", BatchSize: 512, GPU: "auto", GPUExperts: "auto"}}},
		{Name: "parallel zero", Args: "m.pack --parallel 0", WantErr: "--parallel in 1..512"},
		{Name: "prefill chunk zero", Args: "m.pack --prefill-chunk 0", WantErr: "--prefill-chunk ≥ 1"},
		{Name: "no clients", Args: "m.pack --clients 0", WantErr: "--clients ≥ 1"},
		{Name: "negative queue", Args: "m.pack --queue -1", WantErr: "--queue ≥ 0"},
		{Name: "no duration", Args: "m.pack --duration 0s", WantErr: "--duration > 0"},
		{Name: "duration without a unit", Args: "m.pack --duration 60", WantErr: `invalid argument "60"`},
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

// TestServeMaxTokensFitsTheContext: the bench's server gets a context
// that holds --max-tokens and a prompt (a larger --max-tokens once made
// every request a 400, then a start-up failure), and a --max-tokens the
// model's context cannot hold is a usage error naming the flag.
func TestServeMaxTokensFitsTheContext(t *testing.T) {
	for _, tc := range []struct{ maxTokens, model, want int }{
		{16, 4096, 1024}, {1024, 4096, 1024 + benchPromptRoom}, {2000, 4096, 2000 + benchPromptRoom}, {16, 512, 512},
	} {
		if got := serveContext(tc.maxTokens, tc.model); got != tc.want {
			t.Errorf("serveContext(%d, %d) = %d, want %d", tc.maxTokens, tc.model, got, tc.want)
		}
		if got := serveContext(tc.maxTokens, tc.model); got-tc.maxTokens < benchPromptRoom && checkMaxTokens(tc.maxTokens, tc.model) == nil {
			t.Errorf("--max-tokens %d with a %d context: accepted, yet leaves %d for the prompt", tc.maxTokens, tc.model, got-tc.maxTokens)
		}
	}
	err := checkMaxTokens(4096, 4096)
	if err == nil || !cmdutil.IsUsageError(err) || !strings.Contains(err.Error(), "--max-tokens 4096") {
		t.Errorf("--max-tokens 4096 on a 4096 context: %v, want a usage error naming the flag", err)
	}
}

// TestRawReadDepth: the raw bandwidth read keeps the queue depth in flight
// for small records and no more than 64 MiB, but at least two reads, for
// large ones.
func TestRawReadDepth(t *testing.T) {
	for _, c := range []struct {
		stride int64
		depth  int
		want   int
	}{
		{1 << 20, 32, 32},   // 32 MiB in flight
		{13254656, 32, 5},   // gpt-oss-20b's records: 63 MiB
		{1 << 30, 32, 2},    // larger than the bound: two
		{1 << 20, 1, 1 + 1}, // at least two
		{0, 8, 8},           // an empty pack
	} {
		if got := rawReadDepth(c.stride, c.depth); got != c.want {
			t.Errorf("rawReadDepth(%d, %d) = %d, want %d", c.stride, c.depth, got, c.want)
		}
	}
}
