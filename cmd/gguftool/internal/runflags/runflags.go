// Package runflags holds the flags every command that runs a model shares
// (run, bench decode, serve, demo): threads, the expert cache, the I/O
// backend and the resident tier.
package runflags

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/planner"
)

// Model are the flags that say how to open a model.
type Model struct {
	Threads         int
	ExpertCache     string
	ExpertSlots     int
	Policy          string
	IO              string
	Buffered        bool
	ResidentExperts bool
	ResidentTier    string
	Prefetch        bool
	// CtxSize is the positions a sequence may hold (0: the model's
	// context, capped by the memory left; Context applies it).
	CtxSize int
	// CacheTypeK and CacheTypeV are the KV cache's types; BatchSize the
	// most positions one forward pass evaluates.
	CacheTypeK, CacheTypeV string
	BatchSize              int
	// Plan is a plan file (gguftool plan) whose choice fills in every
	// flag of these not given on the command line.
	Plan string
	// Explicit names the flags given on the command line, recorded only
	// with --plan: they win over the plan.
	Explicit map[string]bool
	// Applied is the plan once Options has read it.
	Applied *planner.Plan
	// GPU is --gpu (auto, on, off; "" is off, so the zero Model runs on
	// the CPU), GPUDevice --gpu-device ("" for the first usable) and
	// VRAMBudget --vram-budget (a size, "" for what the device reports).
	// GPUExperts is where the routed experts go with a GPU.
	GPU        string
	GPUDevice  string
	VRAMBudget string
	// GPUExperts is --gpu-experts: auto, vram or cpu.
	GPUExperts string
}

// Help is the flags' description for a command's Long help.
const Help = `
A MODEL is a GGUF file (any shard of a split set), whose experts are all
held in RAM, or a pack directory (gguftool pack), whose routed experts are
streamed from disk through the expert cache: --expert-cache bounds it in
bytes (2GiB, 500M, 0 for none) or "auto" (the memory left by the cgroup
limit or MemAvailable after the resident weights and a 512 MiB margin);
--expert-cache-slots sets a count of experts instead. While a layer's
experts run, --prefetch applies the next layer's router to the hidden
state at hand and reads ahead the experts it would pick (speculative
prefetch). Whether that gains depends on the disk and the model: it is off
by default, gguftool plan measures it and turns it on in a plan where it
is faster, and it pauses by itself while fewer than half its guesses are
used. The logits are the
same bit for bit whatever the cache, policy, prefetch, I/O backend or
thread count.
--plan FILE applies a plan made by gguftool plan for this pack: its
resident tier, expert cache, policy, prefetch and threads, except where a
flag is given on the command line (flags win; the plan wins over the
$GGUFTOOL_ variables). A plan made for another pack is refused.
--resident-tier takes a resident tier's GGUF, its manifest
(LABEL.resident.json), or its label alone, found as LABEL.resident.json in
$GGUFTOOL_RESIDENT_TIERS, the current directory, the model's directory or
the one above it; a tier made from another pack is refused.

The KV cache keeps each sequence's keys and values in --cache-type-k and
--cache-type-v: f16 (the default, as llama.cpp's), f32 (every bit of the
forward pass's activations) or q8_0 (half of f16; needs heads of a
multiple of 32 values). It grows with the positions a sequence holds, up
to --ctx-size; 0 takes the model's training context, capped so that the
sequences a command runs at once (serve --parallel) fit, each full, in
the memory left after the model (said in one note when capped). A prompt
is evaluated --batch-size positions per forward pass (default 512, as
llama.cpp's n_ubatch), which bounds the activations' memory; the logits
are the same bits whatever the batch size.

--gpu auto (the default) runs the forward pass on a Vulkan GPU when one
is usable — the resident weights (all but the token embedding), the
activations and the KV and recurrent state in its memory — and on the CPU
otherwise, saying why in one note. With a GPU, --gpu-experts auto (the
default) puts the routed experts in VRAM too when all of them fit the
budget with 10% of it to spare for the KV cache and activations (a pack's
are read once at load), and otherwise computes them on the CPU from RAM or
the pack, their activations crossing once per MoE layer, saying so in a
note with the sizes; --gpu-experts vram fails (exit 1, both sizes) where
they do not fit; --gpu-experts cpu keeps them on the CPU (llama.cpp's
--cpu-moe). --gpu auto never picks a driver that runs on the CPU (Mesa's
lavapipe), which --gpu on does. --gpu on fails without a loader or device (exit 5) or
with a device lacking a feature the kernels need (exit 1, naming it);
--gpu off stays on the CPU. --gpu-device N picks a device as gpu info
lists them; --vram-budget SIZE bounds what gguftool allocates on it (the
resident weights, the experts there, KV cache and activations); a budget
the resident weights do not fit is exit 1, saying both sizes. The GPU's logits are
close to the CPU's, not equal (docs/gpu.md): the same run to run, and
the same streamed or resident.

Limits: --threads above the CPUs this process may use (GOMAXPROCS) is
clamped to them. An expert cache larger than the pack's expert records, or
than the memory available after the resident weights and a 512 MiB margin,
is clamped to it, whether --expert-cache or --expert-cache-slots sized it;
a size smaller than one expert record is rounded up to one record (only 0
means no cache). Each adjustment is reported once on stderr as a note. A
negative --threads, --expert-cache-slots or --ctx-size, a --batch-size
outside 1..8192, an unknown --io, --cache-policy or cache type, or an
--expert-cache that is not a size is a usage error (exit 2); a q8_0 cache
for a model whose heads are not whole blocks is exit 1, naming the size.
`

// Register adds the flags to cmd.
func (m *Model) Register(cmd *cobra.Command) {
	fl := cmd.Flags()
	threads, _ := strconv.Atoi(cmdutil.EnvOr("THREADS", "0"))
	fl.IntVarP(&m.Threads, "threads", "t", threads, "compute threads; 0 = all cores ($GGUFTOOL_THREADS)")
	fl.StringVar(&m.ExpertCache, "expert-cache", cmdutil.EnvOr("EXPERT_CACHE", "auto"), "pack: expert cache size (2GiB, 0, auto) ($GGUFTOOL_EXPERT_CACHE)")
	fl.IntVar(&m.ExpertSlots, "expert-cache-slots", 0, "pack: expert cache size as a number of experts (overrides --expert-cache)")
	fl.StringVar(&m.Policy, "cache-policy", cmdutil.EnvOr("CACHE_POLICY", "lru"), "pack: eviction policy: "+strings.Join(engine.Policies, ", ")+" ($GGUFTOOL_CACHE_POLICY)")
	fl.StringVar(&m.IO, "io", cmdutil.EnvOr("IO", "auto"), "pack: I/O backend: auto, uring, pread ($GGUFTOOL_IO)")
	fl.BoolVar(&m.Buffered, "buffered", false, "pack: read through the page cache instead of O_DIRECT")
	fl.BoolVar(&m.ResidentExperts, "resident-experts", false, "pack: load every expert into RAM (the oracle for streaming)")
	fl.BoolVar(&m.Prefetch, "prefetch", false, "pack: read ahead the experts the next layer's router would pick from the current hidden state")
	fl.StringVar(&m.ResidentTier, "resident-tier", "", "non-expert weights from a resident tier (gguftool resident-only): its label, manifest or GGUF")
	fl.StringVar(&m.Plan, "plan", "", "pack: apply a plan (gguftool plan) to the flags not given")
	ctxSize, _ := strconv.Atoi(cmdutil.EnvOr("CTX_SIZE", "0"))
	fl.IntVarP(&m.CtxSize, "ctx-size", "c", ctxSize, "positions per sequence; 0 = the model's context, capped by the memory left ($GGUFTOOL_CTX_SIZE)")
	fl.IntVar(&m.CtxSize, "ctx", ctxSize, "the same as --ctx-size")
	_ = fl.MarkDeprecated("ctx", "use --ctx-size")
	fl.StringVar(&m.CacheTypeK, "cache-type-k", cmdutil.EnvOr("CACHE_TYPE_K", "f16"), "KV cache type of the keys: f16, f32, q8_0 ($GGUFTOOL_CACHE_TYPE_K)")
	fl.StringVar(&m.CacheTypeV, "cache-type-v", cmdutil.EnvOr("CACHE_TYPE_V", "f16"), "KV cache type of the values: f16, f32, q8_0 ($GGUFTOOL_CACHE_TYPE_V)")
	fl.StringVar(&m.GPU, "gpu", cmdutil.EnvOr("GPU", "auto"), "run on a Vulkan GPU: auto, on, off ($GGUFTOOL_GPU)")
	fl.StringVar(&m.GPUDevice, "gpu-device", "", "the GPU to use, by its index in gpu info; default: the first usable")
	fl.StringVar(&m.VRAMBudget, "vram-budget", cmdutil.EnvOr("VRAM_BUDGET", ""), "most GPU memory to use (8GiB); empty = what the device reports ($GGUFTOOL_VRAM_BUDGET)")
	fl.StringVar(&m.GPUExperts, "gpu-experts", cmdutil.EnvOr("GPU_EXPERTS", "auto"), "with a GPU, where the routed experts run: auto (VRAM when they fit), vram, cpu ($GGUFTOOL_GPU_EXPERTS)")
	batch, _ := strconv.Atoi(cmdutil.EnvOr("BATCH_SIZE", strconv.Itoa(engine.DefaultBatchSize)))
	fl.IntVarP(&m.BatchSize, "batch-size", "b", batch, "positions per forward pass of a prompt ($GGUFTOOL_BATCH_SIZE)")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if m.Plan != "" {
			m.Explicit = map[string]bool{}
			fl.Visit(func(f *pflag.Flag) { m.Explicit[f.Name] = true })
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	_ = cmd.RegisterFlagCompletionFunc("cache-policy", cobra.FixedCompletions(engine.Policies, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("io", cobra.FixedCompletions(ioBackends, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("gpu", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	for _, name := range []string{"cache-type-k", "cache-type-v"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions([]string{"f16", "f32", "q8_0"}, cobra.ShellCompDirectiveNoFileComp))
	}
}

// ioBackends are the values --io takes.
var ioBackends = []string{ioengine.Auto.String(), ioengine.Uring.String(), ioengine.Pread.String()}

// Options converts the flags into runtime options. Threads above the CPUs
// this process may use (GOMAXPROCS) are clamped to them: more threads than
// CPUs only take turns on them, and every decode step waits for the last.
func (m *Model) Options() (engine.Options, error) {
	if _, err := m.applyPlan(); err != nil {
		return engine.Options{}, err
	}
	o := engine.Options{Threads: m.Threads, ResidentExperts: m.ResidentExperts, Resident: m.ResidentTier, BatchSize: m.BatchSize}
	switch {
	case m.Threads < 0:
		return o, cmdutil.FlagErrorf("--threads %d: must be ≥ 0", m.Threads)
	case m.CtxSize < 0:
		return o, cmdutil.FlagErrorf("--ctx-size %d: must be ≥ 0 (0 = the model's context)", m.CtxSize)
	case m.BatchSize < 1 || m.BatchSize > engine.MaxBatchSize:
		return o, cmdutil.FlagErrorf("--batch-size %d: must be in 1..%d", m.BatchSize, engine.MaxBatchSize)
	}
	var err error
	if o.CacheTypeK, err = engine.ParseKVType(m.CacheTypeK); err != nil {
		return o, cmdutil.FlagErrorf("--cache-type-k: %v", err)
	}
	if o.CacheTypeV, err = engine.ParseKVType(m.CacheTypeV); err != nil {
		return o, cmdutil.FlagErrorf("--cache-type-v: %v", err)
	}
	if _, err := m.gpuOptions(); err != nil {
		return o, err
	}
	if o.GPUExperts, err = engine.ParseExpertPlacement(strings.ToLower(m.GPUExperts)); err != nil {
		return o, cmdutil.FlagErrorf("--gpu-experts %v", err)
	}
	if cpus := runtime.GOMAXPROCS(0); o.Threads == 0 || o.Threads > cpus {
		o.Threads = cpus
	}
	be, err := ioengine.ParseBackend(m.IO)
	if err != nil {
		return o, cmdutil.FlagErrorf("--io: %v", err)
	}
	o.Cache = engine.CacheOptions{Policy: m.Policy, Backend: be, Buffered: m.Buffered, Slots: m.ExpertSlots, Prefetch: m.Prefetch}
	if !slices.Contains(engine.Policies, strings.ToLower(m.Policy)) {
		return o, cmdutil.FlagErrorf("--cache-policy %q: want one of %s", m.Policy, strings.Join(engine.Policies, ", "))
	}
	switch {
	case m.ExpertSlots < 0:
		return o, cmdutil.FlagErrorf("--expert-cache-slots %d: must be ≥ 0", m.ExpertSlots)
	case m.ExpertSlots > 0:
	case strings.EqualFold(m.ExpertCache, "auto"):
		o.Cache.Auto = true
	default:
		n, err := cmdutil.ParseSize(m.ExpertCache)
		if err != nil {
			return o, cmdutil.FlagErrorf("--expert-cache: %v", err)
		}
		o.Cache.Bytes = n
	}
	return o, nil
}

// Open opens the model at path with the flags' options, showing on
// streams how far the weights have loaded (a bar on a terminal, a line
// every few seconds elsewhere, nothing with --quiet) and stopping when ctx
// is done (Ctrl-C), then writes to streams' stderr, once each, the notes
// on what was changed from what the flags asked for: threads clamped to
// the CPUs, an expert cache clamped or rounded up.
func (m *Model) Open(ctx context.Context, path string, streams *iostreams.IOStreams) (*engine.Model, error) {
	return m.OpenNoting(ctx, path, streams, func(note string) { fmt.Fprintf(streams.ErrOut, "note: %s\n", note) })
}

// OpenNoting is Open for a caller that reports notes its own way (serve
// logs them).
func (m *Model) OpenNoting(ctx context.Context, path string, streams *iostreams.IOStreams, note func(string)) (*engine.Model, error) {
	o, err := m.Options()
	if err != nil {
		return nil, err
	}
	gopts, err := m.gpuOptions()
	if err != nil {
		return nil, err
	}
	dev, why, err := gpu.Open(gopts)
	if err != nil {
		return nil, err
	}
	if why != "" {
		note("GPU: not used (" + why + "): running on the CPU")
	}
	if dev != nil {
		o.GPU, o.GPUClose = dev.Device, dev.Close
	}
	var bar iostreams.Progress
	var shown int64
	o.Progress = func(done, total int64) {
		if bar == nil {
			bar = streams.NewProgress(total, "loading "+filepath.Base(path))
		}
		bar.Add(done - shown)
		shown = done
	}
	em, err := engine.Open(ctx, path, o)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if dev != nil {
			dev.Close()
		}
		return nil, err
	}
	if p := m.Applied; p != nil && p.PackDigest != em.PackDigest() {
		em.Close()
		return nil, fmt.Errorf("--plan %s was made for pack %s (pack.json %s), not for %s: make one for it with gguftool plan",
			m.Plan, p.Pack, p.PackDigest, path)
	}
	if m.Threads > o.Threads {
		note(fmt.Sprintf("--threads %d is more than the %d CPUs this process may use (GOMAXPROCS): using %d",
			m.Threads, o.Threads, o.Threads))
	}
	for _, n := range em.Notes {
		note(n)
	}
	return em, nil
}

// gpuOptions reads --gpu, --gpu-device and --vram-budget.
func (m *Model) gpuOptions() (gpu.Options, error) {
	if m.GPU == "" {
		return gpu.Options{Mode: gpu.ModeOff}, nil
	}
	mode, err := gpu.ParseMode(strings.ToLower(m.GPU))
	if err != nil {
		return gpu.Options{}, cmdutil.FlagErrorf("%v", err)
	}
	o := gpu.Options{Mode: mode, Device: -1}
	if m.GPUDevice != "" {
		if o.Device, err = strconv.Atoi(m.GPUDevice); err != nil || o.Device < 0 {
			return o, cmdutil.FlagErrorf("--gpu-device %q: want a device index, as gpu info lists them", m.GPUDevice)
		}
		if mode == gpu.ModeOff {
			return o, cmdutil.FlagErrorf("--gpu-device %s with --gpu off", m.GPUDevice)
		}
	}
	if m.VRAMBudget != "" {
		if o.Budget, err = cmdutil.ParseSize(m.VRAMBudget); err != nil || o.Budget <= 0 {
			return o, cmdutil.FlagErrorf("--vram-budget %q: want a size such as 8GiB", m.VRAMBudget)
		}
	}
	return o, nil
}

// applyPlan reads --plan once and fills in, from its choice, every flag
// not given on the command line; it returns the plan (nil without
// --plan).
func (m *Model) applyPlan() (*planner.Plan, error) {
	if m.Plan == "" || m.Applied != nil {
		return m.Applied, nil
	}
	p, err := planner.Read(m.Plan)
	if err != nil {
		return nil, err
	}
	c := p.Choice
	unset := func(names ...string) bool {
		for _, n := range names {
			if m.Explicit[n] {
				return false
			}
		}
		return true
	}
	if unset("threads") {
		m.Threads = c.Threads
	}
	if unset("expert-cache", "expert-cache-slots") {
		m.ExpertCache, m.ExpertSlots = strconv.FormatInt(c.ExpertCacheBytes, 10), 0
	}
	if unset("cache-policy") {
		m.Policy = c.Policy
	}
	if unset("prefetch") {
		m.Prefetch = c.Prefetch
	}
	if unset("resident-tier") && c.ResidentTier != "" {
		m.ResidentTier = c.ResidentTier
	}
	m.Applied = p
	return p, nil
}

// Describe is a one-line account of where experts came from.
func Describe(s engine.SourceStats) string {
	if s.Source == "resident" {
		return fmt.Sprintf("experts: %d served from RAM (all resident)", s.Fetches)
	}
	hitRate := 0.0
	if s.Fetches > 0 {
		hitRate = 100 * float64(s.Hits) / float64(s.Fetches)
	}
	line := fmt.Sprintf("experts: %d routed, RAM cache hits %d (%.1f%%), SSD misses %d, %s in %d reads, I/O wait %.3f s, %d evictions",
		s.Fetches, s.Hits, hitRate, s.Misses, iostreams.HumanBytes(int64(s.BytesRead)), s.Reads, s.IOWait.Seconds(), s.Evictions)
	if s.PrefetchGuessed > 0 {
		line += fmt.Sprintf("; prefetch: %d read ahead, %d used, %s wasted, guesses %.0f%% precise, %.0f%% recall",
			s.PrefetchReads, s.PrefetchUsed, iostreams.HumanBytes(int64(s.PrefetchWastedBytes)),
			100*float64(s.PrefetchGuessedUsed)/float64(s.PrefetchGuessed), 100*float64(s.PrefetchGuessedUsed)/float64(max(s.PrefetchNeeded, 1)))
		if s.PrefetchAcrossReads > 0 {
			line += fmt.Sprintf(" (of the reads ahead, %d for the next token, %d of those used)", s.PrefetchAcrossReads, s.PrefetchAcrossUsed)
		}
	}
	return line
}

// DescribeExperts is where the routed experts are: every one in VRAM
// (read once at load), or the expert cache's geometry.
func DescribeExperts(s engine.SourceStats, p engine.Placement) string {
	if p.Experts == "vram" {
		return fmt.Sprintf("experts: all in VRAM on %s (%s), read once at load", p.Device, iostreams.HumanBytes(p.DeviceExpertBytes))
	}
	return DescribeCache(s)
}

// DescribeCache is the cache's geometry.
func DescribeCache(s engine.SourceStats) string {
	if s.Source == "resident" {
		return "expert cache: none needed (every expert resident)"
	}
	return fmt.Sprintf("expert cache: %d slots × %s = %s, policy %s", s.CacheSlots, iostreams.HumanBytes(s.RecordSize),
		iostreams.HumanBytes(s.CacheBytes), s.Policy)
}

// Context is the positions each of sequences sequences may hold: --ctx-size,
// or the model's context capped by the memory left (said once through
// note). A --ctx-size beyond the model's context is refused.
func (m *Model) Context(em *engine.Model, sequences int, note func(string)) (int, error) {
	if m.CtxSize > em.Hparams.Context {
		return 0, fmt.Errorf("--ctx-size %d is longer than the model's context of %d positions", m.CtxSize, em.Hparams.Context)
	}
	if m.CtxSize > 0 {
		return m.CtxSize, nil
	}
	ctx, why := em.DefaultContext(sequences)
	if why != "" {
		note(why)
	}
	return ctx, nil
}
