package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// BenchIOOptions are the parsed flags of `gguftool bench io`.
type BenchIOOptions struct {
	IO      *iostreams.IOStreams
	Pack    string
	GGUF    string
	QD      int
	Backend string
	TopK    int
	Bytes   int64
	Seed    uint64
	JSON    bool
}

// NewCmdBenchIO builds `gguftool bench io`; runF replaces benchIORun in
// tests.
func NewCmdBenchIO(f *cmdutil.Factory, runF func(context.Context, *BenchIOOptions) error) *cobra.Command {
	o := &BenchIOOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "io PACK [--gguf SRC]",
		Short: "Expert fetch from a pack against a raw O_DIRECT read and the tensor-major GGUF",
		Long: `Replay random top-k expert reads per layer (the model's MoE layers in order,
k experts each, chosen by a seeded generator) and measure, in one run, at
the same queue depth and through the same I/O engine:

  (a) pack     one aligned read of a whole record per expert
  (b) gguf     the same experts from the tensor-major GGUF (--gguf): one
               read per tensor per expert (gate, up, down: three), each
               widened to the O_DIRECT alignment
  (c) raw      a sequential O_DIRECT read of the pack's container files in
               requests of the record size (the reference)

All reads use O_DIRECT where the file system allows it, so the page cache
is bypassed; the output says whether it was in effect, and which backend
(io_uring or pread) ran. Prints GB/s of bytes read for each, and the
ratios pack/raw and gguf/pack.

Examples:
  gguftool bench io /nvme/model.pack --gguf /nvme/model-00001-of-00004.gguf
  gguftool bench io model.pack --qd 32 --bytes 4GiB --backend uring --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "one pack directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Pack = args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return benchIORun(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.GGUF, "gguf", "", "the tensor-major source of the pack, for the three-reads-per-expert comparison")
	fl.IntVar(&o.QD, "qd", 8, "queue depth (reads in flight)")
	fl.StringVar(&o.Backend, "backend", cmdutil.EnvOr("IO_BACKEND", "auto"), "I/O backend: auto, uring, pread ($GGUFTOOL_IO_BACKEND)")
	fl.IntVar(&o.TopK, "topk", 0, "experts per layer per step (default: the model's experts used)")
	fl.Var(cmdutil.SizeValue{N: &o.Bytes}, "bytes", "bytes to read per measurement (default: the containers' size, at most 4 GiB)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the expert choice")
	fl.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	cmdutil.SetJSONSchema(cmd, IOSchema)
	return cmd
}

// IOSchema identifies the --json document of `bench io`.
const IOSchema = "gguftool.bench-io/v1"

// IOResult is `bench io`'s output.
type IOResult struct {
	Schema     string       `json:"schema"`
	Backend    string       `json:"backend"`
	Fallback   string       `json:"fallback_reason,omitempty"`
	QueueDepth int          `json:"queue_depth"`
	Direct     bool         `json:"o_direct"`
	TopK       int          `json:"topk"`
	Pack       Measurement  `json:"pack"`
	GGUF       *Measurement `json:"gguf,omitempty"`
	Raw        Measurement  `json:"raw"`
	PackVsRaw  float64      `json:"pack_vs_raw"`
	GGUFVsPack float64      `json:"gguf_vs_pack,omitempty"`
}

// Measurement is one workload's result.
type Measurement struct {
	Reads   int     `json:"reads"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gb_per_s"`
}

// window keeps up to qd reads in flight, one pool buffer each, and
// returns the bytes read and the time taken.
func window(ctx context.Context, eng *ioengine.Engine, pool *ioengine.Pool, n int, make func(i int, b *ioengine.Buffer) *ioengine.Request) (Measurement, error) {
	var wg sync.WaitGroup
	var bytes atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	for i := range n {
		b, err := pool.Get(ctx)
		if err != nil {
			return Measurement{}, err
		}
		req := make(i, b)
		batch, err := eng.Submit(ctx, []*ioengine.Request{req})
		if err != nil {
			pool.Put(b)
			return Measurement{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := batch.Wait(); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
			bytes.Add(int64(req.N))
			pool.Put(b)
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return Measurement{}, err
	}
	m := Measurement{Reads: n, Bytes: bytes.Load(), Seconds: time.Since(start).Seconds()}
	m.GBps = float64(m.Bytes) / 1e9 / m.Seconds
	return m, nil
}

type pick struct{ layer, expert int }

// rawRead is one record-sized read of a container.
type rawRead struct {
	f   *ioengine.File
	off int64
	n   int
}

// rawReads is the raw-read reference workload: the containers' records in
// file order, layer after layer, starting over until total bytes.
func rawReads(p *container.OpenPack, rr *container.RecordReader, layers []int, total int64) []rawRead {
	var out []rawRead
	var n int64
	for n < total {
		for _, l := range layers {
			h := p.Containers[l].Header
			for e := 0; e < h.Experts && n < total; e++ {
				out = append(out, rawRead{rr.File(l), h.RecordOffset(e), int(h.Stride)})
				n += h.Stride
			}
		}
	}
	return out
}

func benchIORun(ctx context.Context, o *BenchIOOptions) error {
	backend, err := ioengine.ParseBackend(o.Backend)
	if err != nil {
		return cmdutil.FlagErrorf("bench io: %v", err)
	}
	p, err := container.OpenDir(o.Pack)
	if err != nil {
		return err
	}
	defer p.Close()
	eng, err := ioengine.New(ioengine.Options{Backend: backend, QueueDepth: o.QD, Direct: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	rr, err := p.NewRecordReader(eng)
	if err != nil {
		return err
	}
	defer rr.Close()
	layers := make([]int, 0, len(p.Containers))
	var packBytes int64
	for l, r := range p.Containers {
		layers = append(layers, l)
		packBytes += r.Header.FileSize - r.Header.HeaderSize
	}
	if len(layers) == 0 {
		return fmt.Errorf("bench io: %s has no expert containers", o.Pack)
	}
	sort.Ints(layers)
	k := o.TopK
	if k == 0 {
		k = max(p.Manifest.MoE.ExpertsUsed, 1)
	}
	budget := o.Bytes
	if budget == 0 {
		budget = min(packBytes, 4<<30)
	}
	// The workload: steps of k distinct random experts in every layer.
	rng := rand.New(rand.NewPCG(o.Seed, 0))
	var picks []pick
	var planned int64
	for planned < budget {
		for _, l := range layers {
			h := p.Containers[l].Header
			for _, e := range rng.Perm(h.Experts)[:min(k, h.Experts)] {
				picks = append(picks, pick{l, e})
				planned += h.Stride
			}
		}
	}
	res := IOResult{Schema: IOSchema, Backend: eng.Backend().String(), Fallback: eng.FallbackReason(),
		QueueDepth: eng.QueueDepth(), Direct: rr.File(layers[0]).Direct(), TopK: k}
	stride := int(p.MaxStride())
	pool, err := ioengine.NewPool(stride, eng.QueueDepth())
	if err != nil {
		return err
	}
	defer pool.Close()

	// (c) raw: the containers' records, in file order, in requests of
	// the record size.
	raw := rawReads(p, rr, layers, planned)
	if res.Raw, err = window(ctx, eng, pool, len(raw), func(i int, b *ioengine.Buffer) *ioengine.Request {
		return &ioengine.Request{File: raw[i].f, Off: raw[i].off, Len: raw[i].n, Buf: b}
	}); err != nil {
		return err
	}
	// (a) pack: one record per expert.
	if res.Pack, err = window(ctx, eng, pool, len(picks), func(i int, b *ioengine.Buffer) *ioengine.Request {
		h := p.Containers[picks[i].layer].Header
		return &ioengine.Request{File: rr.File(picks[i].layer), Off: h.RecordOffset(picks[i].expert), Len: int(h.Stride), Buf: b}
	}); err != nil {
		return err
	}
	res.PackVsRaw = res.Pack.GBps / res.Raw.GBps
	// (b) the same experts from the tensor-major GGUF.
	if o.GGUF != "" {
		m, err := ggufReads(ctx, eng, o.GGUF, p, picks)
		if err != nil {
			return err
		}
		res.GGUF = &m
		res.GGUFVsPack = m.GBps / res.Pack.GBps
	}
	if o.JSON {
		return cmdutil.PrintJSON(o.IO.Out, res)
	}
	w := o.IO.Out
	fmt.Fprintf(w, "backend %s, queue depth %d, O_DIRECT %v, top-%d of each layer's experts\n", res.Backend, res.QueueDepth, res.Direct, k)
	if res.Fallback != "" {
		fmt.Fprintf(w, "io_uring unavailable: %s\n", res.Fallback)
	}
	line := func(name string, m Measurement) {
		fmt.Fprintf(w, "%-5s %7d reads %10s in %6.2f s  %6.2f GB/s\n", name, m.Reads, iostreams.HumanBytes(m.Bytes), m.Seconds, m.GBps)
	}
	line("raw", res.Raw)
	line("pack", res.Pack)
	if res.GGUF != nil {
		line("gguf", *res.GGUF)
	}
	fmt.Fprintf(w, "pack/raw %.2f", res.PackVsRaw)
	if res.GGUF != nil {
		fmt.Fprintf(w, ", gguf/pack %.2f", res.GGUFVsPack)
	}
	fmt.Fprintln(w)
	return nil
}

// ggufReads reads the picked experts from the tensor-major set: one read
// per component tensor per expert, widened to the file's alignment.
func ggufReads(ctx context.Context, eng *ioengine.Engine, path string, p *container.OpenPack, picks []pick) (Measurement, error) {
	s, err := gguf.OpenSet(path)
	if err != nil {
		return Measurement{}, err
	}
	defer s.Close()
	files := make([]*ioengine.File, len(s.Paths))
	for i, sp := range s.Paths {
		if files[i], err = eng.Open(sp); err != nil {
			return Measurement{}, err
		}
		defer files[i].Close()
	}
	type rd struct {
		f   *ioengine.File
		off int64
		n   int
	}
	var reads []rd
	maxLen := 0
	for _, pk := range picks {
		for _, c := range p.Containers[pk.layer].Header.Components {
			t, ok := s.Tensor(c.Name)
			if !ok {
				return Measurement{}, fmt.Errorf("bench io: %s has no tensor %s: not the pack's source", path, c.Name)
			}
			f := files[t.Shard]
			off, n, _ := ioengine.AlignRange(t.FileOffset+int64(pk.expert)*c.BytesPerExpert, int(c.BytesPerExpert), f.Align())
			reads = append(reads, rd{f, off, n})
			maxLen = max(maxLen, n)
		}
	}
	pool, err := ioengine.NewPool(maxLen, eng.QueueDepth())
	if err != nil {
		return Measurement{}, err
	}
	defer pool.Close()
	return window(ctx, eng, pool, len(reads), func(i int, b *ioengine.Buffer) *ioengine.Request {
		return &ioengine.Request{File: reads[i].f, Off: reads[i].off, Len: reads[i].n, Buf: b}
	})
}
