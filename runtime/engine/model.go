package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/resident"
	"github.com/gguftool/gguftool/trace"
)

// Options configure how a model is opened.
type Options struct {
	// Threads is the number of compute threads; 0 means GOMAXPROCS.
	Threads int
	// Cache configures the expert cache of a pack; unused for a GGUF,
	// whose experts are all resident.
	Cache CacheOptions
	// ResidentExperts loads every expert of a pack into RAM instead of
	// streaming them: the pack's resident mode, the oracle for streaming.
	ResidentExperts bool
	// Resident, if set, is a resident tier GGUF (gguftool resident-only)
	// whose tensors replace the pack's or model's non-expert tensors.
	Resident string
	// CacheTypeK and CacheTypeV are the types sessions keep their keys
	// and values in (F16 when not set, as llama.cpp's default).
	CacheTypeK, CacheTypeV KVType
	// BatchSize is the most positions one forward pass evaluates: longer
	// prompts are evaluated in batches of it (llama.cpp's n_ubatch), which
	// bounds the activations' memory. 0 means DefaultBatchSize.
	BatchSize int
	// Progress, if set, is told as Open reads weights into RAM: the bytes
	// read so far and the bytes it will read in all, after every 16 MiB
	// at most. The last call has done equal to total.
	Progress func(done, total int64)
	// GPU, if set, is the device the forward pass runs on: the resident
	// weights (the token embedding aside), the activations and the KV and
	// recurrent state go to its memory, and the routed experts as
	// GPUExperts says.
	GPU *gpu.Device
	// GPUExperts says where the routed experts go with a GPU: into VRAM
	// when they fit (ExpertsAuto), into VRAM or fail (ExpertsVRAM), or
	// with the expert source on the CPU (ExpertsCPU).
	GPUExperts ExpertPlacement
	// GPUClose, if set, is called by Close once the model has freed what
	// it holds on GPU (the caller's device, closed with the model).
	GPUClose func() error
}

// Model is a loaded model: hyper-parameters, the non-expert weights in RAM,
// and a source of routed experts.
type Model struct {
	Hparams *Hparams
	// Path is what was opened: a GGUF file or a pack directory.
	Path string
	// Meta is the GGUF holding the metadata (tokenizer, chat template).
	Meta *gguf.File
	// ResidentBytes is the size of the non-expert weights held in RAM.
	ResidentBytes int64
	// Notes say how Open changed what the options asked for (an expert
	// cache clamped to the pack or to the memory, or rounded up to one
	// record; an automatic cache with no room), for the caller to show.
	Notes []string

	tokEmbd matrix
	outNorm vector
	outRes  vector // kimi-k3: scores the final residual mix; empty without it
	output  matrix
	layers  []layer
	experts ExpertSource
	work    workers
	closers []func() error
	digest  [16]byte // identifies the model in traces
	// packDigest is pack.json's XXH3-128 as resident manifests record it
	// ("" for a GGUF).
	packDigest container.Digest
	mem        arena // the weights held in RAM

	kvK, kvV KVType // the sessions' cache types
	batch    int    // the most positions per forward pass
	be       Backend
	// deviceWeights frees the weights a device backend holds; nil on the
	// CPU.
	deviceWeights func()
	gpuClose      func() error

	// passes lets one forward pass run at a time: the backend's working
	// memory and the expert source's cache belong to the model, and
	// sessions evaluated from several goroutines take turns.
	passes sync.Mutex
}

// Open loads a model: a GGUF file or split set (every expert resident), or
// a pack directory (experts streamed through the cache, or all resident
// with Options.ResidentExperts). Once ctx is done it stops reading within
// 16 MiB, frees what it read and returns the context's error.
func Open(ctx context.Context, path string, o Options) (*Model, error) {
	if o.BatchSize < 0 || o.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("engine: a batch size of %d: want 1 to %d (0 for %d)", o.BatchSize, MaxBatchSize, DefaultBatchSize)
	}
	m := &Model{Path: path, kvK: o.CacheTypeK, kvV: o.CacheTypeV, batch: o.BatchSize, gpuClose: o.GPUClose}
	if m.batch == 0 {
		m.batch = DefaultBatchSize
	}
	m.work.n = o.Threads
	if m.work.n <= 0 {
		m.work.n = runtime.GOMAXPROCS(0)
	}
	m.be = newCPUBackend(&m.work)
	lm := &loadMeter{ctx: ctx, report: o.Progress}
	err := lm.cancelled()
	if err == nil {
		if st, serr := os.Stat(path); serr == nil && st.IsDir() {
			err = m.openPack(path, o, lm)
		} else {
			err = m.openGGUF(path, o, lm)
		}
	}
	if err == nil {
		err = m.checkCacheTypes()
	}
	if err == nil && o.GPU != nil {
		err = m.toDevice(ctx, o.GPU, o.GPUExperts, lm)
	}
	if err == nil {
		lm.finish()
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) openGGUF(path string, o Options, lm *loadMeter) error {
	set, err := gguf.OpenSet(path)
	if err != nil {
		return err
	}
	m.closers = append(m.closers, set.Close)
	m.Meta = set.Meta()
	if m.Hparams, err = ReadHparams(m.Meta); err != nil {
		return err
	}
	if m.digest, err = identity(m.Meta.ReaderAt(), m.Meta.DataOffset); err != nil {
		return err
	}
	l := &loader{tab: setTable{set}, mem: &m.mem, meter: lm}
	rl, err := m.residentLoader(l, o.Resident)
	if err != nil {
		return err
	}
	lm.total = tableBytes(l.tab, m.Hparams.Layers, true) + tableBytes(rl.tab, m.Hparams.Layers, false)
	res, err := loadResidentExperts(l, m.Hparams)
	if err != nil {
		return err
	}
	m.experts = res
	return m.loadResident(rl)
}

func (m *Model) openPack(dir string, o Options, lm *loadMeter) error {
	p, err := container.OpenDir(dir) // refuses a directory without pack.json
	if err != nil {
		return err
	}
	m.closers = append(m.closers, p.Close)
	m.Meta = p.Resident
	if m.Hparams, err = ReadHparams(m.Meta); err != nil {
		return err
	}
	m.digest, m.packDigest = p.Manifest.Sum.Bytes(), container.DigestOf(p.Manifest.Sum)
	for il, c := range p.Containers {
		if blocks := m.Hparams.Layers + m.Hparams.NextN; il >= blocks {
			what := fmt.Sprintf("the expert container of layer %d", il)
			if len(c.Header.Components) > 0 {
				what = "tensor " + c.Header.Components[0].Name
			}
			return &ModelError{File: c.Name, Msg: fmt.Sprintf("%s is of block %d, but block_count is %d: the pack holds more blocks than its metadata says", what, il, blocks)}
		}
	}
	rl, err := m.residentLoader(&loader{tab: fileTable{p.Resident}, mem: &m.mem, meter: lm}, o.Resident)
	if err != nil {
		return err
	}
	lm.total = tableBytes(rl.tab, m.Hparams.Layers, false)
	if o.ResidentExperts {
		lm.total += containerBytes(p, m.Hparams.Layers)
		res, err := loadPackResident(p, m.Hparams, &m.mem, lm)
		if err != nil {
			return err
		}
		m.experts = res
	} else {
		ps, err := openPackExperts(p, m.Hparams, o.Cache)
		if err != nil {
			return err
		}
		m.experts = ps
		if ps.note != "" {
			m.Notes = append(m.Notes, ps.note)
		}
	}
	return m.loadResident(rl)
}

// residentLoader is the loader of the non-expert weights: l itself, or
// one of the resident tier file when tier is set.
func (m *Model) residentLoader(l *loader, tier string) (*loader, error) {
	if tier == "" {
		return l, nil
	}
	path, err := m.residentTierPath(tier)
	if err != nil {
		return nil, err
	}
	set, err := gguf.OpenSet(path)
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, set.Close)
	if a := set.Meta().Architecture(); a != "" && a != m.Hparams.Arch {
		return nil, &ModelError{File: path, Msg: fmt.Sprintf("resident tier is for %s, the model is %s", a, m.Hparams.Arch)}
	}
	return &loader{tab: setTable{set}, mem: &m.mem, meter: l.meter}, nil
}

// loadResident reads the non-expert weights.
func (m *Model) loadResident(l *loader) error {
	h := m.Hparams
	if err := checkBlocks(h, l.tab.where(), l.tab.names()); err != nil {
		return err
	}
	D, V := h.Embd, h.Vocab
	before := l.bytes
	if V <= 0 {
		return &ModelError{File: l.tab.where(), Msg: "no tokenizer.ggml.tokens, so no vocabulary size"}
	}
	var err error
	if m.tokEmbd, err = l.matrix("token_embd.weight", D, V, 0); err != nil {
		return err
	}
	if m.outNorm.f, err = l.vector("output_norm.weight", D); err != nil {
		return err
	}
	if h.ResBlockSize > 0 {
		if m.outRes.f, err = l.vector("output_res_score.weight", D); err != nil {
			return err
		}
	}
	out, err := l.optionalMatrix("output.weight", D, V)
	switch {
	case err != nil:
		return err
	case out != nil:
		m.output = *out
	case h.Arch == "olmoe":
		return l.missing("output.weight")
	default:
		m.output = m.tokEmbd // tied, as llama.cpp does when output.weight is absent
	}
	m.layers = make([]layer, h.Layers)
	for i := range m.layers {
		if err := m.loadLayer(l, i); err != nil {
			return err
		}
	}
	m.ResidentBytes = l.bytes - before
	return nil
}

// checkBlocks refuses a model whose file holds tensors of a block at or
// beyond block_count. The forward pass runs only the blocks the metadata
// counts, so such a file would run as a silently truncated model;
// llama.cpp refuses it too (its tensor count does not match).
func checkBlocks(h *Hparams, file string, names iter.Seq[string]) error {
	blocks := h.Layers + h.NextN
	for name := range names {
		rest, ok := strings.CutPrefix(name, "blk.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if b, err := strconv.Atoi(num); err == nil && b >= blocks {
			return &ModelError{File: file, Msg: fmt.Sprintf("tensor %s is of block %d, but block_count is %d: the file holds more blocks than its metadata says", name, b, blocks)}
		}
	}
	return nil
}

// BatchSize is the most positions one forward pass evaluates.
func (m *Model) BatchSize() int { return m.batch }

// CacheTypes are the types sessions keep their keys and values in.
func (m *Model) CacheTypes() (k, v KVType) { return m.kvK, m.kvV }

// WeightBytes is the RAM the model's weights occupy: the resident
// tensors, and every expert when they are all resident (the expert cache
// is apart).
func (m *Model) WeightBytes() int64 { return m.mem.bytes }

// Experts returns the model's expert source.
func (m *Model) Experts() ExpertSource { return m.experts }

// PackDigest is the xxh3-128 of a pack's pack.json, as resident manifests
// and plans record it; empty for a GGUF.
func (m *Model) PackDigest() string { return string(m.packDigest) }

// Threads is the number of compute threads.
func (m *Model) Threads() int { return m.work.n }

// Close releases the model's files and memory.
func (m *Model) Close() error {
	m.work.close()
	var errs []error
	if m.experts != nil {
		errs = append(errs, m.experts.Close())
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	if m.deviceWeights != nil {
		m.deviceWeights()
		m.deviceWeights = nil
	}
	if m.gpuClose != nil {
		errs = append(errs, m.gpuClose())
		m.gpuClose = nil
	}
	m.layers, m.tokEmbd, m.output, m.experts = nil, matrix{}, matrix{}, nil
	errs = append(errs, m.mem.free())
	return errors.Join(errs...)
}

// residentTierPath resolves a resident tier given as its GGUF, as its
// manifest (*.resident.json, which names the GGUF beside it), or as a
// label: <label>.resident.json looked for in $GGUFTOOL_RESIDENT_TIERS,
// the current directory, the model's directory and the one above it. A
// manifest that pairs with a pack must pair with this one.
func (m *Model) residentTierPath(tier string) (string, error) {
	if strings.HasSuffix(tier, ".gguf") {
		return tier, nil
	}
	manifest := tier
	if !strings.HasSuffix(tier, ".resident.json") {
		if strings.ContainsRune(tier, filepath.Separator) {
			return tier, nil
		}
		var looked []string
		manifest = ""
		for _, dir := range []string{os.Getenv("GGUFTOOL_RESIDENT_TIERS"), ".", m.Path, filepath.Dir(m.Path)} {
			if dir == "" {
				continue
			}
			p := filepath.Join(dir, tier+".resident.json")
			looked = append(looked, p)
			if _, err := os.Stat(p); err == nil {
				manifest = p
				break
			}
		}
		if manifest == "" {
			return "", fmt.Errorf("engine: resident tier %q: no %s.resident.json in %s: %w", tier, tier, strings.Join(looked, ", "), os.ErrNotExist)
		}
	}
	man, err := resident.ReadManifest(context.Background(), manifest)
	if err != nil {
		return "", err
	}
	if len(man.Files) == 0 {
		return "", &ModelError{File: manifest, Msg: "the manifest names no resident GGUF"}
	}
	if man.Pack != nil && m.packDigest != "" && man.Pack.ManifestXXH3 != m.packDigest {
		return "", &ModelError{File: manifest, Msg: fmt.Sprintf("resident tier %s pairs with pack %s (pack.json %s), not with %s",
			man.TierLabel, man.Pack.Dir, man.Pack.ManifestXXH3, m.Path)}
	}
	return filepath.Join(filepath.Dir(manifest), man.Files[0].File), nil
}

// TraceHeader describes the model for a trace recorded on it.
func (m *Model) TraceHeader() trace.Header {
	h := trace.Header{Layers: m.Hparams.Layers, Experts: m.Hparams.Experts, TopK: m.Hparams.ExpertsUsed, ModelDigest: m.digest}
	if v, ok := m.Meta.Lookup("general.name"); ok {
		h.ModelName, _ = v.Str()
		if len(h.ModelName) > trace.MaxNameLen {
			h.ModelName = h.ModelName[:trace.MaxNameLen]
		}
	}
	return h
}

// identity digests what identifies the model: a GGUF's metadata bytes or
// a pack's pack.json.
func identity(r io.ReaderAt, n int64) ([16]byte, error) {
	h := xxh3.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, n)); err != nil {
		return [16]byte{}, err
	}
	return h.Sum128().Bytes(), nil
}
