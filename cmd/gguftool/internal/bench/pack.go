package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// BenchPackOptions are the parsed flags of `gguftool bench pack`.
type BenchPackOptions struct {
	IO   *iostreams.IOStreams
	Src  string
	Dir  string
	Keep bool
	JSON bool
}

// NewCmdBenchPack builds `gguftool bench pack`; runF replaces benchPackRun
// in tests.
func NewCmdBenchPack(f *cmdutil.Factory, runF func(context.Context, *BenchPackOptions) error) *cobra.Command {
	o := &BenchPackOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "pack SRC",
		Short: "Time gguftool pack against cp of the same shards",
		Long: `Measure, in one run and on the same disk, the wall time of cp of the
source shards (followed by an fsync of every copy, since pack publishes
durably) and of gguftool pack of the same source, each starting with the
source evicted from the page cache (posix_fadvise DONTNEED) so both read
it from the disk; and pack's peak resident memory (it runs as a child
process). Prints both throughputs and their ratio.

Work files go to a temporary directory under --dir (default: beside SRC)
and are removed unless --keep.

Examples:
  gguftool bench pack /nvme/model-00001-of-00004.gguf
  gguftool bench pack model.gguf --dir /nvme/scratch --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one GGUF file or shard"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Src = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchPackRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "where to write the copies and the pack (default: beside SRC)")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep the copy and the pack")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	cmdutil.SetJSONSchema(cmd, PackSchema)
	return cmd
}

// PackSchema identifies the --json document of `bench pack`.
const PackSchema = "gguftool.bench-pack/v1"

// PackResult is `bench pack`'s output.
type PackResult struct {
	Schema       string  `json:"schema"`
	SourceBytes  int64   `json:"source_bytes"`
	CpSeconds    float64 `json:"cp_seconds"`
	PackSeconds  float64 `json:"pack_seconds"`
	CpMBps       float64 `json:"cp_mb_per_s"`
	PackMBps     float64 `json:"pack_mb_per_s"`
	Ratio        float64 `json:"pack_vs_cp"`
	PackPeakRSS  int64   `json:"pack_peak_rss_bytes"`
	CacheEvicted bool    `json:"cache_evicted"`
}

func benchPackRun(ctx context.Context, o *BenchPackOptions) error {
	s, err := gguf.OpenSet(o.Src)
	if err != nil {
		return err
	}
	paths := s.Paths
	var total int64
	for _, f := range s.Shards {
		total += f.Size
	}
	s.Close()
	parent := o.Dir
	if parent == "" {
		parent = filepath.Dir(paths[0])
	}
	work, err := os.MkdirTemp(parent, ".gguftool-bench-")
	if err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(work)
	}
	evicted := true
	evictAll := func() {
		for _, p := range paths {
			if evict(p) != nil {
				evicted = false
			}
		}
	}
	res := PackResult{Schema: PackSchema, SourceBytes: total}

	evictAll()
	copies := filepath.Join(work, "cp")
	if err := os.Mkdir(copies, 0o755); err != nil {
		return err
	}
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "cp", append(paths, copies)...).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	for _, p := range paths {
		f, err := os.OpenFile(filepath.Join(copies, filepath.Base(p)), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	res.CpSeconds = time.Since(start).Seconds()
	if !o.Keep {
		os.RemoveAll(copies)
	}

	evictAll()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start = time.Now()
	cmd := exec.CommandContext(ctx, self, "pack", "--quiet", paths[0], "-o", filepath.Join(work, "pack"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pack: %v: %s", err, out)
	}
	res.PackSeconds = time.Since(start).Seconds()
	res.PackPeakRSS = peakRSS(cmd.ProcessState)
	res.CacheEvicted = evicted
	res.CpMBps = float64(total) / 1e6 / res.CpSeconds
	res.PackMBps = float64(total) / 1e6 / res.PackSeconds
	res.Ratio = res.CpSeconds / res.PackSeconds
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	fmt.Fprintf(o.IO.Out, "source %s; cp %.2f s (%.0f MB/s); pack %.2f s (%.0f MB/s); pack/cp throughput %.2f; pack peak RSS %s\n",
		iostreams.HumanBytes(total), res.CpSeconds, res.CpMBps, res.PackSeconds, res.PackMBps, res.Ratio, iostreams.HumanBytes(res.PackPeakRSS))
	return nil
}
