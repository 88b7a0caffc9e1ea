package trace

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/trace"
)

// ReplaySchema is the schema of `trace replay --json`.
const ReplaySchema = "gguftool.trace-replay/v1"

// TraceReplayOptions are the parsed flags of `gguftool trace replay`.
type TraceReplayOptions struct {
	IO         *iostreams.IOStreams
	Path       string
	Policies   []string
	Capacities []cachelab.Capacity
	PerLayer   bool
	Lab        cachelab.Options
	JSON       bool
	SVG        string
}

// Replay is what `trace replay` reports.
type Replay struct {
	Schema   string        `json:"schema"`
	File     string        `json:"file"`
	Model    string        `json:"model"`
	Layers   int           `json:"layers"`
	Experts  int           `json:"experts"`
	TopK     int           `json:"top_k"`
	Steps    int64         `json:"steps"`
	Lookups  int64         `json:"lookups"`
	Cache    string        `json:"cache"` // "global" or "per-layer"
	Window   int           `json:"window"`
	HalfLife float64       `json:"half_life"`
	Rows     []ReplayPoint `json:"capacities"`
}

// ReplayPoint is every policy's result at one capacity, with the best
// online policy and its ratio to Belady's hits.
type ReplayPoint struct {
	Asked    string        `json:"asked"`
	Slots    int           `json:"slots"`
	Percent  float64       `json:"percent"` // of the model's (layer, expert) pairs
	Policies []PolicyPoint `json:"policies"`
	Best     string        `json:"best_online,omitempty"`
	Belady   *float64      `json:"belady_hit_rate,omitempty"`
	Ratio    *float64      `json:"best_to_belady,omitempty"`
}

// PolicyPoint is one policy's hit count and rate.
type PolicyPoint struct {
	Policy  string  `json:"policy"`
	Hits    int64   `json:"hits"`
	HitRate float64 `json:"hit_rate"`
}

// NewCmdTraceReplay builds `gguftool trace replay`; runF replaces
// traceReplayRun in tests.
func NewCmdTraceReplay(f *cmdutil.Factory, runF func(context.Context, *TraceReplayOptions) error) *cobra.Command {
	opts := &TraceReplayOptions{IO: f.IOStreams, Lab: cachelab.DefaultOptions}
	var policies, capacities string
	cmd := &cobra.Command{
		Use:   "replay TRACE [--policy P,...] [--capacity C,...]",
		Short: "Replay a routing trace through expert-cache policies, with Belady's optimum as the ceiling",
		Long: `Replay a routing trace through expert-cache eviction policies, offline, and
print each policy's hit rate at each capacity, Belady's optimum as the
ceiling, and the best online policy with its ratio to Belady
(docs/cache-lab.md).

The replay fetches as the engine does: per batch (a decode position, or up to
512 prefill positions) and layer, every distinct expert is looked up, then
the misses are inserted. Policies (--policy, comma-separated, or "all"; all
but belady are also run's and serve's --cache-policy):
  lru     least recently used
  lfu     least frequently used since insertion, LRU among equals
  lfru    LRU for re-used experts, LFU for experts seen once
  window  fewest uses in the last --window tokens, LRU among equals
  decay   lowest decayed frequency, sum of 0.5^(age/--halflife)
  stale   longest idle relative to its own mean reuse interval
  belady  evict the expert whose next use is farthest: the offline optimum

--capacity takes percentages of the model's (layer, expert) pairs (5%,
12.5%) or numbers of slots (512). One cache serves every layer, as the
engine's does (--global), or with --per-layer each layer has its own, the
capacity split evenly. --svg writes the coverage curve (hit rate against
capacity, one line per policy) as a self-contained SVG, published whole.
With --json one document goes to stdout (schema ` + ReplaySchema + `).

Refusals, with their exit codes: 2 for an unknown policy, a capacity that is
not a percentage in (0, 100] or a count of at least 1, a --window below 1,
a --halflife that is not positive, or an --svg that is TRACE or a
directory; 5 when TRACE does not exist; 3 when it is not a well-formed
trace.

The trace is streamed, so memory does not grow with its length; Belady's
next uses go to a temporary file in $TMPDIR (12 bytes a lookup, unlinked
at once).

Examples:
  gguftool trace replay run.trace.zst
  gguftool trace replay run.trace --policy lru,lfu,belady --capacity 5%,10%,25%,50%
  gguftool trace replay run.trace --policy all --capacity 128,512 --per-layer --json
  gguftool trace replay run.trace --window 16 --halflife 32 --svg curve.svg
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a trace file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			var err error
			if opts.Policies, err = cachelab.ParsePolicies(policies); err != nil {
				return cmdutil.FlagErrorf("--policy: %v", err)
			}
			if opts.Capacities, err = cachelab.ParseCapacities(capacities); err != nil {
				return cmdutil.FlagErrorf("--capacity: %v", err)
			}
			if opts.Lab.Window < 1 {
				return cmdutil.FlagErrorf("--window %d: want at least 1 token", opts.Lab.Window)
			}
			if !(opts.Lab.HalfLife > 0) || opts.Lab.HalfLife > 1e12 {
				return cmdutil.FlagErrorf("--halflife %v: want a positive number of tokens", opts.Lab.HalfLife)
			}
			if cmd.Flags().Changed("global") && opts.PerLayer {
				return cmdutil.FlagErrorf("--global and --per-layer: choose one")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return traceReplayRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&policies, "policy", "lru,lfu,lfru,window,decay,stale,belady", "policies to replay, comma-separated: "+strings.Join(cachelab.Policies, ", ")+", or all")
	fl.StringVar(&capacities, "capacity", "5%,10%,25%,50%", "cache sizes, comma-separated: percentages of the (layer, expert) pairs or numbers of slots")
	fl.BoolVar(&opts.PerLayer, "per-layer", false, "one cache per layer, the capacity split evenly")
	fl.Bool("global", true, "one cache shared by every layer, as the engine has (the default)")
	fl.IntVar(&opts.Lab.Window, "window", cachelab.DefaultOptions.Window, "window: the recency window in tokens")
	fl.Float64Var(&opts.Lab.HalfLife, "halflife", cachelab.DefaultOptions.HalfLife, "decay: the half-life in tokens")
	fl.BoolVar(&opts.JSON, "json", false, "print the results as JSON")
	fl.StringVar(&opts.SVG, "svg", "", "write the coverage curve as an SVG plot to FILE")
	cmdutil.SetJSONSchema(cmd, ReplaySchema)
	_ = cmd.RegisterFlagCompletionFunc("policy", cobra.FixedCompletions(append(cachelab.Policies, "all"), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func traceReplayRun(ctx context.Context, opts *TraceReplayOptions) error {
	if opts.SVG != "" {
		if err := cmdutil.CheckOutput("trace replay: --svg", opts.SVG, opts.Path); err != nil {
			return err
		}
	}
	r, err := RunReplay(ctx, opts)
	if err != nil {
		return err
	}
	if opts.SVG != "" {
		if err := writeSVG(opts.SVG, r); err != nil {
			return err
		}
	}
	if opts.JSON {
		return cmdutil.PrintJSON(opts.IO.Out, r)
	}
	printReplay(opts.IO.Out, r)
	return nil
}

// RunReplay reads the trace once and replays every policy at every
// capacity as it streams, so memory does not grow with the trace's
// length; Belady's next uses go to a temporary file of 12 bytes per
// lookup, removed from the directory as soon as it is made.
func RunReplay(ctx context.Context, opts *TraceReplayOptions) (*Replay, error) {
	tr, c, err := trace.Open(opts.Path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	h := tr.Header
	pairs := h.Layers * h.Experts
	var runs []cachelab.Run
	for _, cp := range opts.Capacities {
		for _, name := range opts.Policies {
			runs = append(runs, cachelab.Run{Policy: name, Capacity: cp.For(pairs)})
		}
	}
	var scratch cachelab.Scratch
	if slices.Contains(opts.Policies, "belady") {
		f, err := os.CreateTemp("", "gguftool-replay-*.next")
		if err != nil {
			return nil, fmt.Errorf("trace replay: Belady's scratch file: %w", err)
		}
		os.Remove(f.Name()) // the open file is all that is needed; nothing is left behind
		defer f.Close()
		scratch = f
	}
	results, st, err := cachelab.ReplayStream(ctx, tr, runs, opts.PerLayer, opts.Lab, scratch)
	if err != nil {
		return nil, err
	}
	r := &Replay{Schema: ReplaySchema, File: opts.Path, Model: h.ModelName, Layers: h.Layers, Experts: h.Experts, TopK: h.TopK,
		Steps: st.Steps, Lookups: st.Lookups, Cache: "global", Window: opts.Lab.Window, HalfLife: opts.Lab.HalfLife}
	if opts.PerLayer {
		r.Cache = "per-layer"
	}
	for ci, cp := range opts.Capacities {
		slots := cp.For(pairs)
		pt := ReplayPoint{Asked: cp.String(), Slots: slots, Percent: 100 * float64(slots) / float64(pairs)}
		var bestHits int64 = -1
		for pi, name := range opts.Policies {
			res := results[ci*len(opts.Policies)+pi]
			pt.Policies = append(pt.Policies, PolicyPoint{Policy: name, Hits: res.Hits, HitRate: res.HitRate()})
			if name == "belady" {
				rate := res.HitRate()
				pt.Belady = &rate
			} else if res.Hits > bestHits {
				pt.Best, bestHits = name, res.Hits
			}
		}
		if pt.Belady != nil && pt.Best != "" {
			ratio := 1.0
			if *pt.Belady > 0 {
				ratio = float64(bestHits) / float64(r.Lookups) / *pt.Belady
			}
			pt.Ratio = &ratio
		}
		r.Rows = append(r.Rows, pt)
	}
	return r, nil
}

// printReplay prints the coverage table: one row per capacity, one
// column per policy, then the best online policy and its ratio to Belady.
func printReplay(w io.Writer, r *Replay) {
	fmt.Fprintf(w, "trace     %s\n", r.File)
	fmt.Fprintf(w, "model     %s: %d layers × %d experts = %d pairs, top-%d\n", r.Model, r.Layers, r.Experts, r.Layers*r.Experts, r.TopK)
	fmt.Fprintf(w, "replayed  %d steps, %d lookups, %s cache, window %d, half-life %g\n\n", r.Steps, r.Lookups, r.Cache, r.Window, r.HalfLife)
	if len(r.Rows) == 0 {
		return
	}
	fmt.Fprintf(w, "%-9s %6s", "capacity", "slots")
	for _, p := range r.Rows[0].Policies {
		fmt.Fprintf(w, " %7s", p.Policy)
	}
	fmt.Fprintf(w, "   %-7s %s\n", "best", "÷ belady")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-9s %6d", row.Asked, row.Slots)
		for _, p := range row.Policies {
			fmt.Fprintf(w, " %6.1f%%", 100*p.HitRate)
		}
		fmt.Fprintf(w, "   %-7s", row.Best)
		if row.Ratio != nil {
			fmt.Fprintf(w, " %.3f", *row.Ratio)
		}
		fmt.Fprintln(w)
	}
}

// writeSVG publishes the SVG plot whole (atomicfile), never a partial one.
func writeSVG(path string, r *Replay) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := io.WriteString(f, CoverageSVG(r)); err != nil {
		return err
	}
	return f.Commit()
}
