package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/cmd/gguftool/internal/runflags"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf/quant"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/internal/llamacpp"
	"github.com/gguftool/gguftool/runtime/engine"
)

// BenchDecodeOptions are the parsed flags of `gguftool bench decode`.
type BenchDecodeOptions struct {
	IO           *iostreams.IOStreams
	Model        string
	PromptTokens int
	Tokens       int
	Runs         int
	Parallel     int
	Reference    string
	NoLlamaCpp   bool
	LlamaCPU     string // llama.cpp's CPU variant: "best" or a build's name
	JSON         bool
	Flags        runflags.Model
}

// NewCmdBenchDecode builds `gguftool bench decode`; runF replaces
// benchDecodeRun in tests.
func NewCmdBenchDecode(f *cmdutil.Factory, runF func(context.Context, *BenchDecodeOptions) error) *cobra.Command {
	o := &BenchDecodeOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "decode MODEL",
		Short: "Prefill and decode speed of the runtime, against llama.cpp on the same file",
		Long: `Measure the runtime's prefill and decode speed on MODEL (a GGUF, or a pack
whose experts stream through the cache), and llama.cpp's on the same GGUF
in the same run (the pinned npm package's C API through the oracle
driver: model read into RAM, no mmap, the run's KV cache type
(--cache-type-k/v, F16 by default), flash attention off (on for a Q8_0
cache, which llama.cpp needs it for), the CPU variant llama.cpp picks
for this CPU unless --llama-cpu names one of its builds, the same
thread count). gguftool's kernels are AVX2 (the report says which ran):
on an AVX-512 CPU, --llama-cpu haswell gives llama.cpp the same
instructions, and the default gives it its fastest.

The prompt is --prompt-tokens ids (100, 101, …) evaluated as one batch,
or in batches of --batch-size when longer, and llama.cpp is then given
the same ubatch (its own default is 512 too); then -n tokens are decoded
greedily without stopping at end-of-generation. The report gives the heap
allocations per decoded token too (the engine's own are none). Load time is reported for
both: gguftool's open of MODEL, llama.cpp's load of the GGUF.
Run 1 starts with an empty expert cache (cold); later runs reuse it
(warm). With --parallel P above 1, P sequences (prompt ids 100 + 13s,
101 + 13s, … for sequence s) are prefilled as one batch and decoded
together, one batch of P tokens per step, by both gguftool and llama.cpp
(each sequence in its own KV cells); the speeds are then the aggregate
tokens/s over the sequences. Speeds are medians over the runs. For a pack the report adds the
cache hit rate, bytes read per token, the disk bandwidth of a raw O_DIRECT
read of the containers, and the I/O bound max(compute, miss bytes ÷
bandwidth) per token with how close the run came to it. With --plan the
report adds the plan's predicted decode speed against the measured one:
the cold run (which repeats the plan's measuring run when --prompt-tokens
and -n match it) and the warm median. On a GPU the report adds the
device's bound: the weight bytes it reads per decoded token (its resident
weights, and the top-k experts of every MoE layer when they are in VRAM)
against its memory bandwidth as 256 MiB copies measure it (bytes read
plus written per second), and how close decode came to it.

On a GPU (--gpu) the peer is llama.cpp's Vulkan build on the same device
(GGML_VK_VISIBLE_DEVICES set to --gpu-device, 0 by default) with every
layer offloaded, and with the routed experts' tensors on the CPU
(its --cpu-moe) when gguftool's run keeps its experts there; the report
says which build ran.

llama.cpp needs a GGUF: MODEL itself, or --reference for a pack. Without
the oracle installed (scripts/llamacpp/install.sh, which builds the
Vulkan one too) or with --no-llamacpp, only gguftool is measured.
` + runflags.Help + `
Examples:
  gguftool bench decode model.gguf --threads 2
  gguftool bench decode model.pack --reference model.gguf --expert-cache 512MiB --json
  gguftool bench decode model.gguf --prompt-tokens 4096 -n 16 --runs 1
  gguftool bench decode model.gguf --llama-cpu haswell   # llama.cpp's AVX2 build
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a model (GGUF or pack)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Model = args[0]
			if o.PromptTokens < 1 || o.Tokens < 2 || o.Runs < 1 {
				return cmdutil.FlagErrorf("bench decode: --prompt-tokens ≥ 1, -n ≥ 2 and --runs ≥ 1")
			}
			// One sequence's prompt is evaluated in batches of
			// --batch-size; sequences decoded together are prefilled in one.
			if b := o.Flags.BatchSize; o.Parallel < 1 || (o.Parallel > 1 && o.Parallel*o.PromptTokens > b) {
				return cmdutil.FlagErrorf("bench decode: --parallel %d: want at least 1, with --parallel × --prompt-tokens at most %d (--batch-size)", o.Parallel, b)
			}
			if !validCPUVariant(o.LlamaCPU) {
				return cmdutil.FlagErrorf("bench decode: --llama-cpu %q: want best or a build name such as haswell, skylakex, zen4", o.LlamaCPU)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchDecodeRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.PromptTokens, "prompt-tokens", 32, "prompt length")
	fl.IntVarP(&o.Tokens, "max-tokens", "n", 128, "tokens to decode")
	fl.IntVar(&o.Runs, "runs", 3, "runs of each (medians are reported)")
	fl.IntVar(&o.Parallel, "parallel", 1, "sequences decoded together, one batch per step (speeds are their aggregate)")
	fl.StringVar(&o.Reference, "reference", "", "GGUF for llama.cpp when MODEL is a pack")
	fl.BoolVar(&o.NoLlamaCpp, "no-llamacpp", false, "measure gguftool only")
	fl.StringVar(&o.LlamaCPU, "llama-cpu", "best", "llama.cpp's CPU build: best for this CPU, or a name (haswell: AVX2)")
	fl.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.Flags.Register(cmd)
	cmdutil.SetJSONSchema(cmd, DecodeSchema)
	return cmd
}

// DecodeSchema identifies the --json document of `bench decode`.
const DecodeSchema = "gguftool.bench-decode/v1"

// DecodeResult is the --json document of `bench decode`.
type DecodeResult struct {
	Schema       string             `json:"schema"`
	Model        string             `json:"model"`
	Threads      int                `json:"threads"`
	Kernels      string             `json:"kernels"`
	PromptTokens int                `json:"prompt_tokens"`
	Tokens       int                `json:"tokens"`
	Parallel     int                `json:"parallel"`
	Runs         []engine.Telemetry `json:"runs"`
	Ours         Speeds             `json:"gguftool"`
	LlamaCpp     *Speeds            `json:"llamacpp,omitempty"`
	LlamaCPU     string             `json:"llamacpp_cpu,omitempty"` // the CPU build it ran: best, or a name
	// LlamaBuild is which llama.cpp ran: cpu, vulkan (every layer on
	// the device) or "vulkan --cpu-moe" (the routed experts on the CPU).
	LlamaBuild   string             `json:"llamacpp_build,omitempty"`
	Reference    string             `json:"reference,omitempty"`
	PrefillRatio float64            `json:"prefill_ratio,omitempty"` // gguftool ÷ llama.cpp, warm medians
	DecodeRatio  float64            `json:"decode_ratio,omitempty"`
	Stream       *StreamBound       `json:"stream,omitempty"`
	Device       *DeviceBound       `json:"device,omitempty"`
	Experts      engine.SourceStats `json:"experts"`
	Placement    engine.Placement   `json:"placement"`
	Plan         *PlanCheck         `json:"plan,omitempty"`
}

// PlanCheck sets a plan's prediction against the decode measured with it.
// The plan predicts from a cold start (its measuring run's prompt, then
// decode), which run 1 repeats; warm runs start with the cache run 1 left.
type PlanCheck struct {
	File       string  `json:"file"`
	Predicted  float64 `json:"predicted_tokens_per_second"`
	DecodeCold float64 `json:"decode_cold"`
	Decode     float64 `json:"decode"`
	ColdRatio  float64 `json:"cold_to_predicted"`
	WarmRatio  float64 `json:"warm_to_predicted"`
}

// Speeds are tokens/s, and the seconds a model took to load.
type Speeds struct {
	LoadSeconds float64 `json:"load_seconds"` // gguftool's one open; llama.cpp's median
	PrefillCold float64 `json:"prefill_cold"`
	DecodeCold  float64 `json:"decode_cold"`
	Prefill     float64 `json:"prefill"` // median over the warm runs (all runs for llama.cpp)
	Decode      float64 `json:"decode"`
	// DecodeAllocs is gguftool's heap allocations per decoded token,
	// the warm runs' median (absent for llama.cpp).
	DecodeAllocs *float64 `json:"decode_allocs_per_token,omitempty"`
}

// StreamBound relates a pack's decode to its I/O.
type StreamBound struct {
	HitRate         float64 `json:"hit_rate"`
	BytesPerToken   float64 `json:"miss_bytes_per_token"`
	DiskGBps        float64 `json:"disk_gb_per_s"`
	ComputeSeconds  float64 `json:"compute_seconds_per_token"` // decode time minus I/O wait
	IOSeconds       float64 `json:"io_seconds_per_token"`      // miss bytes ÷ disk bandwidth
	BoundTokPerS    float64 `json:"bound_tokens_per_second"`   // 1 ÷ max(compute, io)
	AchievedTokPerS float64 `json:"achieved_tokens_per_second"`
	Efficiency      float64 `json:"efficiency"` // achieved ÷ bound
}

// DeviceBound relates a GPU run's decode to the device's memory
// bandwidth: the weight bytes it reads per token (every resident weight
// on the device, and the top-k experts of each MoE layer when they are in
// VRAM) against what its copies move per second (read plus written). With
// the experts on the CPU the bound covers the device's part only.
type DeviceBound struct {
	CopyGBps        float64 `json:"copy_gb_per_s"`
	BytesPerToken   int64   `json:"device_bytes_per_token"`
	BoundTokPerS    float64 `json:"bound_tokens_per_second"` // copy bandwidth ÷ bytes per token
	AchievedTokPerS float64 `json:"achieved_tokens_per_second"`
	Efficiency      float64 `json:"efficiency"` // achieved ÷ bound
	ExpertsOnCPU    bool    `json:"experts_on_cpu,omitempty"`
}

// deviceBound measures the device's copy bandwidth (with copies of 256
// MiB, or what the budget leaves room for) and relates decode to it.
func deviceBound(m *engine.Model, p engine.Placement, decode float64) (*DeviceBound, error) {
	bw, err := m.DeviceCopyBandwidth(256 << 20)
	if err != nil {
		return nil, err
	}
	d := &DeviceBound{CopyGBps: bw / 1e9, BytesPerToken: p.DeviceBytesPerToken, AchievedTokPerS: decode, ExpertsOnCPU: p.Experts != "vram"}
	if d.BytesPerToken > 0 {
		d.BoundTokPerS = bw / float64(d.BytesPerToken)
		d.Efficiency = decode / d.BoundTokPerS
	}
	return d, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func benchDecodeRun(ctx context.Context, o *BenchDecodeOptions) error {
	say := func(format string, args ...any) {
		if !o.IO.Quiet {
			fmt.Fprintf(o.IO.ErrOut, format+"\n", args...)
		}
	}
	start := time.Now()
	m, err := o.Flags.Open(ctx, o.Model, o.IO)
	if err != nil {
		return err
	}
	defer m.Close()
	res := DecodeResult{Schema: DecodeSchema, Model: o.Model, Threads: m.Threads(), Kernels: quant.Kernels(),
		PromptTokens: o.PromptTokens, Tokens: o.Tokens, Parallel: o.Parallel}
	res.Ours.LoadSeconds = time.Since(start).Seconds()
	if err := measureOurs(ctx, o, m, &res, say); err != nil {
		return err
	}
	switch {
	case res.Placement.Backend == "vulkan":
		if res.Device, err = deviceBound(m, res.Placement, res.Ours.Decode); err != nil {
			return err
		}
	case res.Experts.Source == "pack":
		if res.Stream, err = streamBound(ctx, o.Model, res.Runs[len(res.Runs)-1]); err != nil {
			return err
		}
	}
	if p := o.Flags.Applied; p != nil {
		pred := p.Choice.PredictedTokPerS
		res.Plan = &PlanCheck{File: o.Flags.Plan, Predicted: pred, DecodeCold: res.Ours.DecodeCold, Decode: res.Ours.Decode,
			ColdRatio: res.Ours.DecodeCold / pred, WarmRatio: res.Ours.Decode / pred}
	}
	ref := o.Reference
	if ref == "" && res.Experts.Source == "resident" {
		if st, err := os.Stat(o.Model); err == nil && !st.IsDir() {
			ref = o.Model
		}
	}
	if !o.NoLlamaCpp && ref != "" {
		if err := measureLlamaCpp(ctx, o, m, ref, &res, say); err != nil {
			return err
		}
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	printDecode(o.IO.Out, &res, o.Runs)
	return nil
}

// measureOurs runs the model o.Runs times on the prompt 100, 101, … and
// records every run, the cold (first) speeds and the medians of the warm
// ones (of the one run when there is only one).
func measureOurs(ctx context.Context, o *BenchDecodeOptions, m *engine.Model, res *DecodeResult, say func(string, ...any)) error {
	prompt := make([]int, o.PromptTokens)
	for i := range prompt {
		prompt[i] = (100 + i) % m.Hparams.Vocab
	}
	var warmPrefill, warmDecode, warmAllocs []float64
	for r := range o.Runs {
		var t engine.Telemetry
		if o.Parallel > 1 {
			var err error
			if t, err = decodeTogether(ctx, m, o.Parallel, o.PromptTokens, o.Tokens); err != nil {
				return err
			}
		} else {
			g, err := m.Generate(ctx, prompt, engine.GenerateOptions{MaxTokens: o.Tokens})
			if err != nil {
				return err
			}
			t = g.Telemetry
		}
		res.Runs = append(res.Runs, t)
		say("gguftool run %d (%s cache): prefill %.1f tok/s, decode %.1f tok/s", r+1, t.CacheState, t.PrefillTokPerS, t.DecodeTokPerS)
		if r == 0 {
			res.Ours.PrefillCold, res.Ours.DecodeCold = t.PrefillTokPerS, t.DecodeTokPerS
		}
		if r > 0 || o.Runs == 1 {
			warmPrefill = append(warmPrefill, t.PrefillTokPerS)
			warmDecode = append(warmDecode, t.DecodeTokPerS)
			warmAllocs = append(warmAllocs, t.DecodeAllocsPerToken)
		}
	}
	res.Ours.Prefill, res.Ours.Decode = median(warmPrefill), median(warmDecode)
	allocs := median(warmAllocs)
	res.Ours.DecodeAllocs = &allocs
	res.Experts = m.Experts().Stats()
	res.Placement = m.Placement()
	return nil
}

// streamBound relates the last run's decode of a pack to the disk's raw
// bandwidth.
func streamBound(ctx context.Context, pack string, last engine.Telemetry) (*StreamBound, error) {
	bw, err := diskBandwidth(ctx, pack)
	if err != nil {
		return nil, err
	}
	steps := float64(max(1, last.GeneratedTokens-1))
	d := last.Decode
	sb := &StreamBound{DiskGBps: bw, AchievedTokPerS: last.DecodeTokPerS}
	if d.Fetches > 0 {
		sb.HitRate = float64(d.Hits) / float64(d.Fetches)
	}
	sb.BytesPerToken = float64(d.BytesRead) / steps
	sb.ComputeSeconds = (last.DecodeSeconds - d.IOWait.Seconds()) / steps
	sb.IOSeconds = sb.BytesPerToken / (bw * 1e9)
	sb.BoundTokPerS = 1 / max(sb.ComputeSeconds, sb.IOSeconds)
	sb.Efficiency = sb.AchievedTokPerS / sb.BoundTokPerS
	return sb, nil
}

// validCPUVariant reports whether name can be a llama.cpp CPU build
// (libggml-cpu-NAME.so): best, or lower-case letters and digits.
func validCPUVariant(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// rawReadInFlight bounds the bytes the raw read keeps in flight: enough
// for any disk's full speed, and not a cache's worth (gpt-oss-20b's
// 13 MB records at a queue depth of 32 would be 0.4 GiB).
const rawReadInFlight = 64 << 20

// rawReadDepth is how many record-sized reads the raw read keeps in
// flight: the queue depth, fewer where they would hold more than
// rawReadInFlight, and at least two.
func rawReadDepth(stride int64, queueDepth int) int {
	return max(2, min(queueDepth, int(rawReadInFlight/max(stride, 1))))
}

// measureLlamaCpp runs llama.cpp on the GGUF ref as many times as
// gguftool ran, with the same prompt length, tokens and threads, and
// records its speeds and the ratios, with the model's KV cache type and
// batch size; without the oracle installed it says so and records
// nothing.
func measureLlamaCpp(ctx context.Context, o *BenchDecodeOptions, m *engine.Model, ref string, res *DecodeResult, say func(string, ...any)) error {
	p := m.Placement()
	find, build := llamacpp.Find, "cpu"
	if p.Backend == "vulkan" {
		find, build = llamacpp.FindVulkan, "vulkan"
	}
	oracle, err := find()
	if errors.Is(err, llamacpp.ErrNotInstalled) {
		say("llama.cpp (%s build): %v; measuring gguftool only", build, err)
		return nil
	}
	if err != nil {
		return err
	}
	if oracle.Vulkan {
		oracle.CPUMoE = p.Experts != "vram"
		if oracle.CPUMoE {
			build += " --cpu-moe"
		}
		if oracle.VKDevice = o.Flags.GPUDevice; oracle.VKDevice == "" {
			oracle.VKDevice = "0"
		}
	}
	k, v := m.CacheTypes()
	if k != v {
		say("llama.cpp: the driver keeps keys and values in one type, and this run keeps keys in %s and values in %s; measuring gguftool only", k, v)
		return nil
	}
	bo := llamacpp.BenchOptions{PromptTokens: o.PromptTokens, Tokens: o.Tokens, Threads: res.Threads, Parallel: o.Parallel, KV: k.String(), CPU: o.LlamaCPU}
	if b := m.BatchSize(); o.PromptTokens > b && o.Parallel <= 1 {
		bo.UBatch = b // as gguftool evaluates it; one batch of it all would need its square in scores
	}
	var pre, dec, load []float64
	for r := range o.Runs {
		b, err := oracle.Bench(ctx, ref, bo)
		if err != nil {
			return err
		}
		p, d := float64(b.PromptTokens)/b.PrefillSeconds, float64(len(b.Tokens)-1)/b.DecodeSeconds
		if b.Parallel > 1 {
			p, d = float64(b.Parallel*b.PromptTokens)/b.PrefillSeconds, float64(b.Parallel*(o.Tokens-1))/b.DecodeSeconds
		}
		say("llama.cpp run %d: prefill %.1f tok/s, decode %.1f tok/s", r+1, p, d)
		pre, dec, load = append(pre, p), append(dec, d), append(load, b.LoadSeconds)
	}
	res.LlamaCpp = &Speeds{PrefillCold: pre[0], DecodeCold: dec[0], Prefill: median(pre), Decode: median(dec), LoadSeconds: median(load)}
	res.Reference, res.LlamaCPU, res.LlamaBuild = ref, bo.CPU, build
	res.PrefillRatio = res.Ours.Prefill / res.LlamaCpp.Prefill
	res.DecodeRatio = res.Ours.Decode / res.LlamaCpp.Decode
	return nil
}

func printDecode(w io.Writer, res *DecodeResult, runs int) {
	fmt.Fprintf(w, "model %s, %d threads, %s kernels, prompt %d tokens, %d decoded, %d runs\n", res.Model, res.Threads, res.Kernels,
		res.PromptTokens, res.Tokens, runs)
	fmt.Fprintf(w, "gguftool   prefill %7.1f tok/s (cold %7.1f)   decode %6.1f tok/s (cold %6.1f)   load %.2f s   %.1f allocs/token\n",
		res.Ours.Prefill, res.Ours.PrefillCold, res.Ours.Decode, res.Ours.DecodeCold, res.Ours.LoadSeconds, *res.Ours.DecodeAllocs)
	if res.LlamaCpp != nil {
		build := res.LlamaCPU + " CPU build"
		if res.LlamaBuild != "cpu" {
			build = res.LlamaBuild + " build"
		}
		fmt.Fprintf(w, "llama.cpp  prefill %7.1f tok/s               decode %6.1f tok/s                load %.2f s   %s\n",
			res.LlamaCpp.Prefill, res.LlamaCpp.Decode, res.LlamaCpp.LoadSeconds, build)
		fmt.Fprintf(w, "ratio      prefill %.2f×   decode %.2f×\n", res.PrefillRatio, res.DecodeRatio)
	}
	fmt.Fprintln(w, runflags.DescribeExperts(res.Experts, res.Placement))
	if s := res.Stream; s != nil {
		fmt.Fprintf(w, "stream     hit rate %.1f%%, %s/token from disk at %.2f GB/s; compute %.1f ms + I/O %.1f ms per token → bound %.1f tok/s; achieved %.1f (%.0f%%)\n",
			100*s.HitRate, iostreams.HumanBytes(int64(s.BytesPerToken)), s.DiskGBps, 1e3*s.ComputeSeconds, 1e3*s.IOSeconds,
			s.BoundTokPerS, s.AchievedTokPerS, 100*s.Efficiency)
	}
	if d := res.Device; d != nil {
		part := ""
		if d.ExpertsOnCPU {
			part = " (the device's part: the experts run on the CPU)"
		}
		fmt.Fprintf(w, "device     %s/token of weights at %.1f GB/s (copy, read + written) → bound %.1f tok/s%s; achieved %.1f (%.0f%%)\n",
			iostreams.HumanBytes(d.BytesPerToken), d.CopyGBps, d.BoundTokPerS, part, d.AchievedTokPerS, 100*d.Efficiency)
	}
	if p := res.Plan; p != nil {
		fmt.Fprintf(w, "plan       %s predicted %.1f tok/s; measured cold %.1f (%.2f× predicted), warm %.1f (%.2f×)\n",
			p.File, p.Predicted, p.DecodeCold, p.ColdRatio, p.Decode, p.WarmRatio)
	}
}

// diskBandwidth reads a pack's containers raw (O_DIRECT, record-sized
// requests at the engine's queue depth, up to 1 GiB) and returns GB/s.
// Its buffers are bounded (rawReadDepth), so the measurement does not
// raise the peak memory of the run it follows.
func diskBandwidth(ctx context.Context, dir string) (float64, error) {
	p, err := container.OpenDir(dir)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, Direct: true})
	if err != nil {
		return 0, err
	}
	defer eng.Close()
	rr, err := p.NewRecordReader(eng)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	pool, err := ioengine.NewPool(int(p.MaxStride()), rawReadDepth(p.MaxStride(), eng.QueueDepth()))
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	layers := make([]int, 0, len(p.Containers))
	var packBytes int64
	for l, r := range p.Containers {
		layers = append(layers, l)
		packBytes += r.Header.FileSize - r.Header.HeaderSize
	}
	sort.Ints(layers)
	chunks := rawReads(p, rr, layers, min(packBytes, 1<<30))
	m, err := window(ctx, eng, pool, len(chunks), func(i int, b *ioengine.Buffer) *ioengine.Request {
		return &ioengine.Request{File: chunks[i].f, Off: chunks[i].off, Len: chunks[i].n, Buf: b}
	})
	return m.GBps, err
}
