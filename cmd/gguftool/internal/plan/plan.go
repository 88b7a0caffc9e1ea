// Package plan is `gguftool plan`: measure this machine and a pack, and
// write the configuration predicted to decode fastest.
package plan

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/engine"
	"github.com/gguftool/gguftool/runtime/planner"
)

// PlanOptions are the parsed flags of `gguftool plan`.
type PlanOptions struct {
	IO           *iostreams.IOStreams
	Pack         string
	RAM          string
	Trace        string
	TierDirs     []string
	Threads      int
	PromptTokens int
	Tokens       int
	Depths       []int
	DiskBytes    int64
	Tolerance    float64
	Output       string
	JSON         bool
}

// NewCmdPlan builds `gguftool plan`; runF replaces planRun in tests.
func NewCmdPlan(f *cmdutil.Factory, runF func(context.Context, *PlanOptions) error) *cobra.Command {
	o := &PlanOptions{IO: f.IOStreams, DiskBytes: 256 << 20}
	var depths string
	cmd := &cobra.Command{
		Use:   "plan PACK [--ram SIZE] [--trace TRACE] [-o PLAN]",
		Short: "Measure the machine and a pack, and write the configuration predicted to decode fastest",
		Long: `Measure this machine and PACK, predict the decode speed of every
configuration, and write the fastest as a plan that run, serve and bench
decode apply with --plan (docs/planner.md, docs/format/plan.md).

It measures, in this order:
  disk     expert-sized O_DIRECT reads at queue depths --qd (waves of that
           many reads, each waited for, as the runtime reads a layer's
           misses), about --disk-bytes each
  compute  a decode of -n tokens after a --prompt-tokens prompt from a cold
           cache: the time per token without its I/O wait (the mean of
           two runs); each run followed by the same with speculative
           prefetch, to see whether prefetch gains here
  routing  the experts that decode chose (or --trace, recorded with run
           --trace on this model, or imported with its shape)

Then for each resident weight set — the pack's own and every resident tier
made for this pack (resident-only) found in --tiers, the pack's directory
or the one above it — the expert cache gets what --ram leaves after the
weights and a 512 MiB margin, and the routing is replayed through each of
the runtime's policies and through Belady's offline optimum. A decoded
token is predicted to take its compute time plus, per layer, its misses
read as one wave at the bandwidth measured at that queue depth. The plan
picks the fastest prediction, or, among those within --tolerance of it,
the largest resident tier (which costs the least quality). Prefetch is on
in the plan only if both runs with it were at least 5% faster than the
run without it just before.

The plan goes to -o (default: PACK.plan.json beside the pack), published
atomically, replacing an earlier plan there. The report says the
configuration, the predicted tok/s, the tok/s Belady's hits would give,
and the compute bound; --json prints the plan itself (schema ` + planner.Schema + `).

Refusals, with their exit codes: 2 for --ram that is not a size, a queue
depth below 1, -n below 2, --prompt-tokens below 1, a --tolerance outside
[0, 1), or an -o that is a directory or the --trace; 5 when PACK, --trace
or a --tiers directory does not exist; 3 when PACK or the trace is
malformed; 1 when the trace is of another model or PACK streams no
experts.

Examples:
  gguftool plan /nvme/kimi.pack --ram 24GiB
  gguftool plan model.pack --ram 8GiB --trace chat.trace.zst -o model.plan.json
  gguftool run model.pack --plan model.plan.json --prompt "Hello"
  gguftool bench decode model.pack --plan model.plan.json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a pack directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Pack = args[0]
			var err error
			if o.Depths, err = parseDepths(depths); err != nil {
				return cmdutil.FlagErrorf("--qd: %v", err)
			}
			switch {
			case o.Tokens < 2 || o.PromptTokens < 1:
				return cmdutil.FlagErrorf("plan: -n ≥ 2 and --prompt-tokens ≥ 1")
			case o.Tolerance < 0 || o.Tolerance >= 1:
				return cmdutil.FlagErrorf("--tolerance %g: want a fraction in [0, 1)", o.Tolerance)
			case o.Threads < 0:
				return cmdutil.FlagErrorf("--threads %d: must be ≥ 0", o.Threads)
			}
			if !strings.EqualFold(o.RAM, "auto") {
				if _, err := cmdutil.ParseSize(o.RAM); err != nil {
					return cmdutil.FlagErrorf("--ram: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return planRun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.RAM, "ram", "auto", `memory the run may use (24GiB), or "auto": what this process may use now`)
	fl.StringVar(&o.Trace, "trace", "", "a routing trace to predict from, instead of the measuring run's")
	fl.StringArrayVar(&o.TierDirs, "tiers", nil, "a directory of resident tiers to consider (repeatable)")
	fl.IntVarP(&o.Threads, "threads", "t", 0, "compute threads; 0 = all cores")
	fl.IntVar(&o.PromptTokens, "prompt-tokens", 32, "prompt length of the measuring runs")
	fl.IntVarP(&o.Tokens, "max-tokens", "n", 64, "tokens the measuring runs decode")
	fl.StringVar(&depths, "qd", "1,2,4,8,16,32", "disk queue depths to measure")
	fl.Var(cmdutil.SizeValue{N: &o.DiskBytes}, "disk-bytes", "bytes to read at each queue depth")
	fl.Float64Var(&o.Tolerance, "tolerance", 0.05, "prefer a larger resident tier predicted within this fraction of the fastest")
	fl.StringVarP(&o.Output, "output", "o", "", "where to write the plan (default PACK.plan.json)")
	fl.BoolVar(&o.JSON, "json", false, "print the plan as JSON")
	cmdutil.SetJSONSchema(cmd, planner.Schema)
	return cmd
}

func parseDepths(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("queue depth %q: want an integer in 1…4096", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func planRun(ctx context.Context, o *PlanOptions) error {
	// Before measuring for minutes: a plan that cannot be published.
	if err := cmdutil.CheckOutput("plan: --output", planPath(o), o.Trace); err != nil {
		return err
	}
	for _, d := range o.TierDirs {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return &filekind.Error{Path: d, Is: filekind.Describe(st.Mode()), Want: "a directory of resident tiers"}
		}
	}
	ram, err := ramBytes(o.RAM)
	if err != nil {
		return err
	}
	po := planner.Options{Pack: o.Pack, RAM: ram, Threads: o.Threads, PromptTokens: o.PromptTokens, Tokens: o.Tokens,
		Trace: o.Trace, TierDirs: o.TierDirs, Depths: o.Depths, DiskSize: o.DiskBytes, Tolerance: o.Tolerance}
	if !o.IO.Quiet {
		po.Progress = func(s string) { fmt.Fprintf(o.IO.ErrOut, "plan: %s\n", s) }
	}
	p, err := planner.Make(ctx, po)
	if err != nil {
		return err
	}
	out := planPath(o)
	if err := p.Write(out); err != nil {
		return err
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, p)
	}
	printPlan(o.IO.Out, p, out)
	return nil
}

// ramBytes is --ram in bytes: a size, or what this process may use now.
func ramBytes(s string) (int64, error) {
	if !strings.EqualFold(s, "auto") {
		return cmdutil.ParseSize(s)
	}
	mem, err := engine.AvailableMemory()
	if err != nil {
		return 0, err
	}
	return mem.Available, nil
}

func printPlan(w io.Writer, p *planner.Plan, path string) {
	c := p.Choice
	fmt.Fprintf(w, "plan for %s with %s of RAM, written to %s\n", p.Pack, iostreams.Bytes(p.RAM), path)
	fmt.Fprintf(w, "disk (%s, O_DIRECT %v):", p.Disk.Backend, p.Disk.Direct)
	for _, pt := range p.Disk.Points {
		fmt.Fprintf(w, " qd %d %.2f GB/s;", pt.QueueDepth, pt.GBps)
	}
	pf := p.Prefetch
	verdict := "not faster in every pair: off"
	if pf.Gains {
		verdict = "faster in every pair: on"
	}
	fmt.Fprintf(w, "\ncompute %.1f ms per token at %d threads; prefetch %.1f tok/s off, %.1f on (means of %d pairs, %.0f%% of guesses used; %s)\n",
		1e3*p.Compute.SecondsPerToken, p.Compute.Threads, pf.OffTokPerS, pf.OnTokPerS, pf.Pairs, 100*pf.Precision, verdict)
	fmt.Fprintf(w, "routing: %s, %d positions, %d decoded\n\n", p.Trace.Source, p.Trace.Steps, p.Trace.DecodeSteps)
	fmt.Fprintf(w, "%-12s %12s %8s %8s %8s %12s %10s %10s\n", "tier", "cache", "policy", "hits", "belady", "miss/token", "tok/s", "belady")
	for i, k := range p.Candidates {
		mark := " "
		if i == c.Candidate {
			mark = "*"
		}
		fmt.Fprintf(w, "%-12s %12s %8s %7.1f%% %7.1f%% %12s %10.1f %10.1f %s\n", k.Tier.Label, iostreams.HumanBytes(k.CacheBytes), k.Policy,
			100*k.HitRate, 100*k.BeladyHitRate, iostreams.HumanBytes(int64(k.MissBytesPerToken)), k.PredictedTokPerS, k.BeladyTokPerS, mark)
	}
	fmt.Fprintf(w, "\nchoice: tier %s, expert cache %s, policy %s, prefetch %v, %d threads\n", c.TierLabel,
		iostreams.Bytes(c.ExpertCacheBytes), c.Policy, c.Prefetch, c.Threads)
	fmt.Fprintf(w, "predicted %.1f tok/s (Belady's hits: %.1f; every expert a hit: %.1f)\n", c.PredictedTokPerS, c.BeladyTokPerS, c.ComputeBoundTokPerS)
	fmt.Fprintf(w, "apply with: --plan %s\n", path)
}

// planPath is where the plan goes: -o, or PACK.plan.json beside the pack.
func planPath(o *PlanOptions) string {
	if o.Output != "" {
		return o.Output
	}
	return filepath.Clean(o.Pack) + ".plan.json"
}
