package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/tiers"
	"github.com/gguftool/gguftool/twins"
)

// BenchTwinsOptions are the parsed flags of `gguftool bench twins`.
type BenchTwinsOptions struct {
	IO        *iostreams.IOStreams
	Hot, Cold string
	Runs      int
	JSON      bool
	Config    string // storage-tiers configuration, read when Cold is an s3:// URL
}

// NewCmdBenchTwins builds `gguftool bench twins`; runF replaces
// benchTwinsRun in tests.
func NewCmdBenchTwins(f *cmdutil.Factory, runF func(context.Context, *BenchTwinsOptions) error) *cobra.Command {
	o := &BenchTwinsOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "twins HOT COLD",
		Short: "Time twins verify against a raw read of both copies",
		Long: `Measure, in one run, alternating which goes first:

  (a) raw     every file of both copies read at once, front to back, through
              the same I/O engine (O_DIRECT, io_uring where available), with
              the same chunk size and reads in flight, and nothing done with
              the bytes
  (b) dd      the same, with dd iflag=direct bs=8M, one per copy (when dd
              is installed)
  (c) verify  gguftool twins verify HOT COLD: structure, XXH3-128 of every
              file of both copies read at once, container checks

and print GB/s (bytes of both copies per second) and the ratios verify/raw
and verify/dd. O_DIRECT keeps the page cache out of every run.

COLD may be an s3:// URL of a copy on an s3 tier (the tier that holds its
bucket gives the endpoint; credentials come from the AWS chain). Then (a)
reads HOT's files through the engine while each object is read by one
plain GET to the end, there is no (b), and (c) reads each object back by
parallel ranged GETs as twins verify does. The server's own caching is
not in gguftool's hands: run it against the endpoint you will use.

Examples:
  gguftool bench twins /nvme/model.pack /archive/model.pack
  gguftool bench twins /nvme/m-00001-of-00004.gguf /cold/m-00001-of-00004.gguf --runs 5 --json
  gguftool bench twins /nvme/model.pack s3://models/archive/model.pack --config tiers.json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(2, "HOT and COLD paths"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Hot, o.Cold = args[0], args[1]
			if o.Runs < 1 {
				return cmdutil.FlagErrorf("bench twins: --runs must be at least 1")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchTwinsRun(cmd.Context(), o)
		},
	}
	cmd.Flags().IntVar(&o.Runs, "runs", 3, "runs of each workload")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&o.Config, "config", "", "storage-tiers configuration, read when COLD is an s3:// URL (default $GGUFTOOL_CONFIG, else $XDG_CONFIG_HOME/gguftool/storage-tiers.json)")
	cmdutil.SetJSONSchema(cmd, TwinsSchema)
	return cmd
}

// TwinsSchema identifies the --json document of `bench twins`.
const TwinsSchema = "gguftool.bench-twins/v1"

// TwinsResult is `bench twins`'s output; seconds are the sums over runs.
type TwinsResult struct {
	Schema      string  `json:"schema"`
	Backend     string  `json:"backend"`
	Bytes       int64   `json:"bytes"` // both copies, one run
	Runs        int     `json:"runs"`
	RawSeconds  float64 `json:"raw_seconds"`
	DDSeconds   float64 `json:"dd_seconds,omitempty"`
	VerifySecs  float64 `json:"verify_seconds"`
	RawGBps     float64 `json:"raw_gb_per_s"`
	DDGBps      float64 `json:"dd_gb_per_s,omitempty"`
	VerifyGBps  float64 `json:"verify_gb_per_s"`
	VerifyVsRaw float64 `json:"verify_vs_raw"`
	VerifyVsDD  float64 `json:"verify_vs_dd,omitempty"`
	Level       string  `json:"level"`
	Object      bool    `json:"object,omitempty"` // COLD is on an s3 tier: raw is a plain GET of each object
}

// twinsLoad is one workload of bench twins and the sum of its runs'
// seconds.
type twinsLoad struct {
	run func() error
	sum *float64
}

func benchTwinsRun(ctx context.Context, o *BenchTwinsOptions) error {
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: 16, Direct: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	h := &tiers.EngineHasher{Engine: eng}
	res := TwinsResult{Schema: TwinsSchema, Backend: eng.Backend().String(), Runs: o.Runs}
	var loads []twinsLoad
	if tiers.IsObjectURL(o.Cold) {
		m, t, name, err := tiers.OpenObjectURL(o.Config, o.Cold)
		if err != nil {
			return err
		}
		defer m.Close()
		loads, err = objectTwinsLoads(ctx, o, h, m, t, name, &res)
		if err != nil {
			return err
		}
	} else if loads, err = diskTwinsLoads(ctx, o, h, &res); err != nil {
		return err
	}
	p := o.IO.NewProgress(int64(o.Runs*len(loads))*res.Bytes, "bench twins")
	for run := range o.Runs {
		for k := range loads {
			w := loads[(k+run)%len(loads)] // rotate which goes first
			start := time.Now()
			if err := w.run(); err != nil {
				return err
			}
			*w.sum += time.Since(start).Seconds()
			p.Add(res.Bytes)
		}
	}
	p.Finish()
	total := float64(res.Bytes) * float64(o.Runs) / 1e9
	res.RawGBps, res.VerifyGBps = total/res.RawSeconds, total/res.VerifySecs
	res.VerifyVsRaw = res.VerifyGBps / res.RawGBps
	if res.DDSeconds > 0 {
		res.DDGBps = total / res.DDSeconds
		res.VerifyVsDD = res.VerifyGBps / res.DDGBps
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	fmt.Fprintf(o.IO.Out, "both copies: %s, %d run(s), backend %s\n", iostreams.HumanBytes(res.Bytes), o.Runs, res.Backend)
	if res.Object {
		fmt.Fprintf(o.IO.Out, "raw read (GET)     %6.2f GB/s\n", res.RawGBps)
	} else {
		fmt.Fprintf(o.IO.Out, "raw read (engine)  %6.2f GB/s\n", res.RawGBps)
	}
	if res.DDGBps > 0 {
		fmt.Fprintf(o.IO.Out, "raw read (dd)      %6.2f GB/s\n", res.DDGBps)
	}
	fmt.Fprintf(o.IO.Out, "twins verify       %6.2f GB/s  (level %s)\n", res.VerifyGBps, res.Level)
	fmt.Fprintf(o.IO.Out, "verify / raw       %6.3f\n", res.VerifyVsRaw)
	if res.VerifyVsDD > 0 {
		fmt.Fprintf(o.IO.Out, "verify / dd        %6.3f\n", res.VerifyVsDD)
	}
	return nil
}

// bothAtOnce runs a and b at once and returns the first one's error, else
// the second's.
func bothAtOnce(a, b func() error) error {
	var wg sync.WaitGroup
	var errB error
	wg.Add(1)
	go func() { defer wg.Done(); errB = b() }()
	errA := a()
	wg.Wait()
	if errA != nil {
		return errA
	}
	return errB
}

// twinPairs pairs HOT's files with COLD's in order and sets res.Bytes to
// both copies' size; COLD with fewer files is refused before any run.
func twinPairs(o *BenchTwinsOptions, hot, cold *tiers.Artifact, res *TwinsResult) (func(readHot, readCold func(rel string) error) error, error) {
	if len(cold.Files) < len(hot.Files) {
		return nil, fmt.Errorf("bench twins: %s has fewer files than %s", o.Cold, o.Hot)
	}
	res.Bytes = hot.Size + cold.Size
	return func(readHot, readCold func(rel string) error) error {
		for i, hf := range hot.Files {
			cf := cold.Files[i]
			if err := bothAtOnce(func() error { return readHot(hf.Rel) }, func() error { return readCold(cf.Rel) }); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// verifyLoad runs a verification and records the level it reached.
func verifyLoad(res *TwinsResult, verify func() (*twins.Report, error)) func() error {
	return func() error {
		r, err := verify()
		if r != nil {
			res.Level = string(r.Level)
		}
		return err
	}
}

// diskTwinsLoads are the workloads for two copies on disks: raw reads
// through the engine, dd, and twins verify.
func diskTwinsLoads(ctx context.Context, o *BenchTwinsOptions, h *tiers.EngineHasher, res *TwinsResult) ([]twinsLoad, error) {
	hotRoot, hot, err := tiers.ArtifactAt(tiers.OSFS{}, o.Hot)
	if err != nil {
		return nil, err
	}
	coldRoot, cold, err := tiers.ArtifactAt(tiers.OSFS{}, o.Cold)
	if err != nil {
		return nil, err
	}
	pairs, err := twinPairs(o, hot, cold, res)
	if err != nil {
		return nil, err
	}
	under := func(root string, read func(string) error) func(string) error {
		return func(rel string) error { return read(filepath.Join(root, rel)) }
	}
	engineRead := func(p string) error { _, err := h.Read(ctx, p); return err }
	ddRead := func(p string) error {
		out, err := exec.CommandContext(ctx, "dd", "if="+p, "of=/dev/null", "bs=8M", "iflag=direct").CombinedOutput()
		if err != nil {
			return fmt.Errorf("dd %s: %v: %s", p, err, out)
		}
		return nil
	}
	raw := func() error { return pairs(under(hotRoot, engineRead), under(coldRoot, engineRead)) }
	dd := func() error { return pairs(under(hotRoot, ddRead), under(coldRoot, ddRead)) }
	verify := verifyLoad(res, func() (*twins.Report, error) { return twins.Verify(ctx, tiers.OSFS{}, h, o.Hot, o.Cold, nil) })
	loads := []twinsLoad{{raw, &res.RawSeconds}, {verify, &res.VerifySecs}}
	if _, err := exec.LookPath("dd"); err == nil {
		loads = append(loads, twinsLoad{dd, &res.DDSeconds})
	}
	return loads, nil
}

// objectTwinsLoads are the workloads for a copy on a disk and one on an
// s3 tier: the disk's file read through the engine while the object is
// read by one plain GET, and twins verify (the object by parallel ranged
// GETs).
func objectTwinsLoads(ctx context.Context, o *BenchTwinsOptions, h *tiers.EngineHasher, m *tiers.Manager, t *tiers.Tier, name string, res *TwinsResult) ([]twinsLoad, error) {
	hotRoot, hot, err := tiers.ArtifactAt(tiers.OSFS{}, o.Hot)
	if err != nil {
		return nil, err
	}
	cold, err := m.Find(t, name)
	if err != nil {
		return nil, err
	}
	pairs, err := twinPairs(o, hot, cold, res)
	if err != nil {
		return nil, err
	}
	res.Object = true
	raw := func() error {
		return pairs(
			func(rel string) error { _, err := h.Read(ctx, filepath.Join(hotRoot, rel)); return err },
			func(rel string) error { _, err := m.RawRead(ctx, t, rel); return err })
	}
	verify := verifyLoad(res, func() (*twins.Report, error) { return twins.VerifyObject(ctx, m, o.Hot, t, name, nil) })
	return []twinsLoad{{raw, &res.RawSeconds}, {verify, &res.VerifySecs}}, nil
}

// BenchMigrateOptions are the parsed flags of `gguftool bench migrate`.
type BenchMigrateOptions struct {
	IO       *iostreams.IOStreams
	Artifact string
	Dir      string
	JSON     bool
}

// NewCmdBenchMigrate builds `gguftool bench migrate`; runF replaces
// benchMigrateRun in tests.
func NewCmdBenchMigrate(f *cmdutil.Factory, runF func(context.Context, *BenchMigrateOptions) error) *cobra.Command {
	o := &BenchMigrateOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "migrate ARTIFACT --dir DIR",
		Short: "Time a journaled tier copy against cp + sync + sha256sum",
		Long: `Measure, in one run, each starting with the source evicted from the page
cache (posix_fadvise DONTNEED):

  (a) reference  cp of every file of ARTIFACT into DIR, sync of the copies,
                 then sha256sum of the source files and of the copies (the
                 usual hand-made verified copy; its sha256sum of the fresh
                 copy reads the page cache, not the disk)
  (b) gguftool   the copy a migrate makes: copy to temporary names on a
                 tier rooted in DIR while hashing the source, fsync every
                 checkpoint, re-read the copy with O_DIRECT, compare,
                 rename into place, fsync the directories (the source is
                 kept: the drop of a migrate is a few unlinks)

ARTIFACT is a pack directory, a GGUF file or any shard of a split set.
DIR should be on the destination disk; the copies are removed afterwards
(and the .gguftool folder the run creates beside ARTIFACT, if it created
it). Prints both throughputs and the ratio.

Examples:
  gguftool bench migrate /nvme/model.pack --dir /archive/scratch
  gguftool bench migrate /nvme/m-00001-of-00004.gguf --dir /cold/tmp --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "an artifact path"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Dir == "" {
				return cmdutil.FlagErrorf("bench migrate: --dir is required")
			}
			o.Artifact = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchMigrateRun(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "scratch directory on the destination disk")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	cmdutil.SetJSONSchema(cmd, MigrateSchema)
	return cmd
}

// MigrateSchema identifies the --json document of `bench migrate`.
const MigrateSchema = "gguftool.bench-migrate/v1"

// MigrateResult is `bench migrate`'s output.
type MigrateResult struct {
	Schema         string  `json:"schema"`
	Bytes          int64   `json:"bytes"`
	Files          int     `json:"files"`
	RefSeconds     float64 `json:"cp_sync_sha256sum_seconds"`
	CpSeconds      float64 `json:"cp_sync_seconds"`
	MigrateSeconds float64 `json:"migrate_seconds"`
	RefMBps        float64 `json:"cp_sync_sha256sum_mb_per_s"`
	MigrateMBps    float64 `json:"migrate_mb_per_s"`
	Ratio          float64 `json:"migrate_vs_reference"`
	RatioCp        float64 `json:"migrate_vs_cp_sync"`
}

func benchMigrateRun(ctx context.Context, o *BenchMigrateOptions) error {
	root, a, err := tiers.ArtifactAt(tiers.OSFS{}, o.Artifact)
	if err != nil {
		return err
	}
	if a.Kind == "directory" {
		return fmt.Errorf("bench migrate: %s is a directory but not a pack", o.Artifact)
	}
	for _, tool := range []string{"cp", "sync", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("bench migrate: the reference needs %s: %w", tool, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(o.Dir, ".gguftool-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	stateDir := filepath.Join(root, tiers.StateDir)
	if _, err := os.Stat(stateDir); os.IsNotExist(err) {
		defer os.RemoveAll(stateDir)
	}
	src := make([]string, len(a.Files))
	for i, f := range a.Files {
		src[i] = filepath.Join(root, f.Rel)
	}
	// The tiers of (b), checked before anything is measured.
	dstRoot := filepath.Join(work, "tier")
	if err := os.MkdirAll(dstRoot, 0o755); err != nil {
		return err
	}
	cfg, err := tiers.ParseConfig([]byte(fmt.Sprintf(`{"schema": %q, "version": 1, "tiers": [
		{"name": "source", "root": %q, "role": "hot"}, {"name": "dest", "root": %q, "role": "cold"}]}`,
		tiers.ConfigSchema, root, dstRoot)), "bench")
	if err != nil {
		return err
	}
	m, err := tiers.NewManager(cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	res := MigrateResult{Schema: MigrateSchema, Bytes: a.Size, Files: len(a.Files)}
	p := o.IO.NewProgress(2*a.Size, "bench migrate")

	// (a) cp + sync + sha256sum.
	for _, s := range src {
		if err := evict(s); err != nil {
			return err
		}
	}
	refDir := filepath.Join(work, "ref")
	start := time.Now()
	var dst []string
	for i, f := range a.Files {
		d := filepath.Join(refDir, f.Rel)
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "cp", src[i], d).CombinedOutput(); err != nil {
			return fmt.Errorf("cp: %v: %s", err, out)
		}
		dst = append(dst, d)
	}
	if out, err := exec.CommandContext(ctx, "sync", dst...).CombinedOutput(); err != nil {
		return fmt.Errorf("sync: %v: %s", err, out)
	}
	res.CpSeconds = time.Since(start).Seconds()
	if out, err := exec.CommandContext(ctx, "sha256sum", append(append([]string{}, src...), dst...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("sha256sum: %v: %s", err, out)
	}
	res.RefSeconds = time.Since(start).Seconds()
	os.RemoveAll(refDir)
	p.Add(a.Size)

	// (b) the journaled copy between two tiers.
	for _, s := range src {
		if err := evict(s); err != nil {
			return err
		}
	}
	to, _ := cfg.Tier("dest")
	start = time.Now()
	if _, err := m.Copy(ctx, a.Name, "source", to, false); err != nil {
		return err
	}
	res.MigrateSeconds = time.Since(start).Seconds()
	p.Add(a.Size)
	p.Finish()

	res.RefMBps = float64(a.Size) / 1e6 / res.RefSeconds
	res.MigrateMBps = float64(a.Size) / 1e6 / res.MigrateSeconds
	res.Ratio = res.MigrateMBps / res.RefMBps
	res.RatioCp = res.CpSeconds / res.MigrateSeconds
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	fmt.Fprintf(o.IO.Out, "artifact: %s, %s, %s\n", a.Name, iostreams.Plural(len(a.Files), "file"), iostreams.Bytes(a.Size))
	fmt.Fprintf(o.IO.Out, "cp + sync             %7.2f s\n", res.CpSeconds)
	fmt.Fprintf(o.IO.Out, "cp + sync + sha256sum %7.2f s  %7.1f MB/s\n", res.RefSeconds, res.RefMBps)
	fmt.Fprintf(o.IO.Out, "gguftool (copy+verify)%7.2f s  %7.1f MB/s\n", res.MigrateSeconds, res.MigrateMBps)
	fmt.Fprintf(o.IO.Out, "ratio to cp+sync+sha256sum %6.3f (to cp+sync alone %.3f)\n", res.Ratio, res.RatioCp)
	return nil
}
