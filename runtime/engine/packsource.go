package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/trace"
)

// stagingBytes bounds the read buffers of misses in flight; a layer with
// more misses reads them in waves of this size.
const stagingBytes = 16 << 20

// packLayer says where each expert tensor sits inside a layer's records.
type packLayer struct {
	layout ExpertLayout
	// Component indices, −1 when absent: gate, up, down, a fused gate_up
	// (then gate and up are absent), and the gate, up and down biases.
	gate, up, down, gateUp int
	bias                   [3]int
}

// packExperts streams routed experts from a pack's containers through the
// I/O engine into a bounded cache.
type packExperts struct {
	pack    *container.OpenPack
	eng     *ioengine.Engine
	rr      *container.RecordReader
	staging *ioengine.Pool
	cache   *expertCache
	layers  []packLayer
	stats   SourceStats
	note    string // how cacheSize changed the cache asked for; "" if not

	prefetch  bool             // read guesses ahead (CacheOptions.Prefetch)
	pf        [2]prefetchState // by layer parity
	precision [2]float64       // moving averages of each kind of guess's precision
	// lastFetched is the layer of the last Fetch: a guess for a layer no
	// later than it is for the next step.
	lastFetched int
	positions   int64 // evaluated over every batch so far: the cache's clock

	// Fetch's working lists and the record reads, kept so that a fetch
	// allocates nothing: one wave of reads is in flight at a time.
	hits                    []cachedHit
	misses, demand, guessed []int
	wave                    []*container.RecordRead
	free                    []*container.RecordRead // reads done with
}

// cachedHit is an expert found in the cache, with its record.
type cachedHit struct {
	expert int
	rec    []byte
}

// batchClock is an expert source whose cache keeps time in tokens, as a
// trace does: the session announces each batch's positions before
// fetching for it.
type batchClock interface{ startBatch(positions int) }

// startBatch sets the cache's clock to the batch's first position,
// counted over every batch this model has run, whatever the session.
func (ps *packExperts) startBatch(positions int) {
	ps.cache.clock = ps.positions
	ps.positions += int64(positions)
}

// expertPart is one kind of per-expert tensor a pack's records may hold.
type expertPart struct {
	suffix string
	shape  func(D, F, E int64) [3]int64
	bias   int // index into packLayer.bias, or −1 for a matrix
}

var expertParts = []expertPart{
	{".ffn_gate_exps.weight", func(D, F, E int64) [3]int64 { return [3]int64{D, F, E} }, -1},
	{".ffn_up_exps.weight", func(D, F, E int64) [3]int64 { return [3]int64{D, F, E} }, -1},
	{".ffn_down_exps.weight", func(D, F, E int64) [3]int64 { return [3]int64{F, D, E} }, -1},
	{".ffn_gate_up_exps.weight", func(D, F, E int64) [3]int64 { return [3]int64{D, 2 * F, E} }, -1},
	{".ffn_gate_exps.bias", func(D, F, E int64) [3]int64 { return [3]int64{F, E} }, 0},
	{".ffn_up_exps.bias", func(D, F, E int64) [3]int64 { return [3]int64{F, E} }, 1},
	{".ffn_down_exps.bias", func(D, F, E int64) [3]int64 { return [3]int64{D, E} }, 2},
}

// packComponents finds the expert components of every MoE layer and
// checks their shapes against the hyper-parameters.
func packComponents(p *container.OpenPack, h *Hparams) ([]packLayer, error) {
	layers := make([]packLayer, h.Layers)
	for il := range layers {
		if !h.isMoE(il) {
			continue
		}
		c, ok := p.Containers[il]
		if !ok {
			return nil, &ModelError{File: p.Dir, Msg: fmt.Sprintf("the pack has no expert container for layer %d", il)}
		}
		pl, err := findComponents(c, h, il)
		if err != nil {
			return nil, err
		}
		layers[il] = *pl
	}
	return layers, nil
}

func findComponents(c *container.Reader, h *Hparams, il int) (*packLayer, error) {
	D, F, E := int64(h.expertIn()), int64(h.expertFF(il)), int64(h.Experts)
	pl := &packLayer{gate: -1, up: -1, down: -1, gateUp: -1, bias: [3]int{-1, -1, -1}}
	for ci, comp := range c.Header.Components {
		pi := slices.IndexFunc(expertParts, func(p expertPart) bool { return strings.HasSuffix(comp.Name, p.suffix) })
		if pi < 0 {
			return nil, fmt.Errorf("%w: %s: layer %d has expert tensor %s, which the runtime does not use", ErrUnsupported, c.Name, il, comp.Name)
		}
		part := expertParts[pi]
		want := part.shape(D, F, E)
		dims := 3
		if part.bias >= 0 {
			dims = 2
		}
		if len(comp.Shape) != dims || !slices.Equal(comp.Shape, want[:dims]) {
			return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("tensor %s has shape %v, want %v", comp.Name, comp.Shape, want[:dims])}
		}
		if part.bias >= 0 {
			if comp.Type != gguf.TypeF32 || comp.BytesPerExpert != 4*want[0] {
				return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("bias %s is %s with %d bytes per expert, want F32 with %d", comp.Name, comp.Type, comp.BytesPerExpert, 4*want[0])}
			}
			pl.bias[part.bias] = ci
			continue
		}
		if err := checkMatrix(comp.Name, comp.Type, int(want[0])); err != nil {
			return nil, err
		}
		if comp.BytesPerExpert != comp.Type.RowBytes(want[0])*want[1] {
			return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("tensor %s has %d bytes per expert, want %d", comp.Name, comp.BytesPerExpert, comp.Type.RowBytes(want[0])*want[1])}
		}
		*[]*int{&pl.gate, &pl.up, &pl.down, &pl.gateUp}[pi] = ci
	}
	pl.layout = ExpertLayout{Gate: gguf.TypeCount, Biases: pl.bias[0] >= 0}
	comps := c.Header.Components
	if pl.gateUp >= 0 {
		if pl.gate >= 0 || pl.up >= 0 {
			return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("layer %d has both a fused gate_up and separate gate or up experts", il)}
		}
		pl.layout.Gate, pl.layout.Up = comps[pl.gateUp].Type, comps[pl.gateUp].Type
	} else {
		if pl.up < 0 || (pl.gate < 0 && h.Arch != "llama") {
			return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("layer %d lacks an up or gate expert tensor", il)}
		}
		pl.layout.Up = comps[pl.up].Type
		if pl.gate >= 0 {
			pl.layout.Gate = comps[pl.gate].Type
		}
	}
	if pl.down < 0 {
		return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("layer %d lacks a down expert tensor", il)}
	}
	pl.layout.Down = comps[pl.down].Type
	if (pl.bias[0] >= 0) != (pl.bias[1] >= 0) || (pl.bias[0] >= 0) != (pl.bias[2] >= 0) {
		return nil, &ModelError{File: c.Name, Msg: fmt.Sprintf("layer %d has some expert biases but not all three", il)}
	}
	return pl, nil
}

// openPackExperts opens the pack's routed experts behind a cache sized by
// cacheSize; the source's note says how the cache asked for was changed.
func openPackExperts(p *container.OpenPack, h *Hparams, o CacheOptions) (*packExperts, error) {
	if o.Slots < 0 || o.Bytes < 0 {
		return nil, fmt.Errorf("engine: an expert cache of %d slots or %d bytes: neither may be negative", o.Slots, o.Bytes)
	}
	layers, err := packComponents(p, h)
	if err != nil {
		return nil, err
	}
	stride := p.MaxStride()
	var records int64
	for _, c := range p.Manifest.Containers {
		records += int64(c.Experts)
	}
	slots64, note, err := cacheSize(o, stride, records, p.Manifest.Resident.Size, AvailableMemory)
	if err != nil {
		return nil, err
	}
	slots := int(slots64)
	ps := &packExperts{pack: p, layers: layers, note: note, prefetch: o.Prefetch, precision: [2]float64{1, 1}, lastFetched: -1,
		pf: [2]prefetchState{{layer: -1}, {layer: -1}}}
	if ps.cache, err = newExpertCache(slots, stride, o.Policy); err != nil {
		return nil, err
	}
	staging := int(max(int64(h.ExpertsUsed), min(stagingBytes/stride, int64(h.Experts))))
	if ps.staging, err = ioengine.NewPool(int(stride), staging); err != nil {
		ps.Close()
		return nil, err
	}
	if ps.eng, err = ioengine.New(ioengine.Options{Backend: o.Backend, QueueDepth: o.QueueDepth, Direct: !o.Buffered}); err != nil {
		ps.Close()
		return nil, err
	}
	if ps.rr, err = p.NewRecordReader(ps.eng); err != nil {
		ps.Close()
		return nil, err
	}
	ps.stats = SourceStats{Source: "pack", CacheSlots: slots, CacheBytes: int64(slots) * stride,
		Policy: ps.cache.policy.Name(), RecordSize: stride}
	return ps, nil
}

func (ps *packExperts) Layout(layer int) ExpertLayout { return ps.layers[layer].layout }

// expert assembles one expert of layer from its record's components.
func (ps *packExperts) expert(layer int, from trace.Level, rec []byte) Expert {
	pl, hdr := &ps.layers[layer], ps.pack.Containers[layer].Header
	comp := func(c int) []byte {
		cp := &hdr.Components[c]
		return rec[cp.Offset : cp.Offset+cp.BytesPerExpert]
	}
	w := Expert{Down: comp(pl.down), From: from}
	switch {
	case pl.gateUp >= 0:
		w.Gate, w.Up = splitGateUp(comp(pl.gateUp))
	case pl.gate >= 0:
		w.Gate, w.Up = comp(pl.gate), comp(pl.up)
	default:
		w.Up = comp(pl.up)
	}
	if pl.bias[0] >= 0 {
		w.GateBias, w.UpBias, w.DownBias = comp(pl.bias[0]), comp(pl.bias[1]), comp(pl.bias[2])
	}
	return w
}

func (ps *packExperts) Fetch(ctx context.Context, layer int, experts []int, use func(int, Expert) error) error {
	hits, misses := ps.hits[:0], ps.misses[:0]
	for _, e := range experts {
		ps.stats.Fetches++
		if rec, ok := ps.cache.get(cacheKey(layer, e)); ok {
			hits = append(hits, cachedHit{e, rec})
			continue
		}
		misses = append(misses, e)
	}
	ps.hits, ps.misses = hits, misses // their arrays, for the next fetch
	ps.stats.Hits += uint64(len(hits))
	ps.stats.Misses += uint64(len(misses))

	// Misses guessed and read ahead land from the prefetch; the others
	// are read now, in waves of the staging buffers the prefetch leaves.
	pf := ps.takePrefetch(layer, misses)
	var guessed []int
	if pf != nil {
		demand := ps.demand[:0]
		guessed = ps.guessed[:0]
		for _, e := range misses {
			if slices.ContainsFunc(pf.reads, func(rd *container.RecordRead) bool { return rd.Expert == e }) {
				guessed = append(guessed, e)
			} else {
				demand = append(demand, e)
			}
		}
		ps.demand, ps.guessed = demand, guessed
		misses = demand
	}
	// Reads ahead hold staging buffers until they are used or dropped:
	// this layer's until usePrefetch, the next layer's until its Fetch.
	free := ps.staging.Count() - ps.heldAhead()

	// The first wave of misses goes out before any hit is computed, so the
	// reads proceed while the cached experts are multiplied.
	wave := min(len(misses), free)
	batch, reads, err := ps.submit(ctx, layer, misses[:wave])
	if err != nil {
		ps.dropAll()
		return err
	}
	for _, h := range hits {
		if err := use(h.expert, ps.expert(layer, trace.LevelRAM, h.rec)); err != nil {
			ps.dropAll()
			return errors.Join(err, ps.drain(batch, reads))
		}
	}
	if pf != nil {
		if err := ps.usePrefetch(layer, pf, guessed, use); err != nil {
			return errors.Join(err, ps.drain(batch, reads))
		}
	}
	for {
		if err := ps.complete(ctx, layer, batch, reads, use); err != nil {
			return err
		}
		misses = misses[wave:]
		if len(misses) == 0 {
			return ctx.Err()
		}
		wave = min(len(misses), ps.staging.Count()-ps.heldAhead())
		if batch, reads, err = ps.submit(ctx, layer, misses[:wave]); err != nil {
			return err
		}
	}
}

// submit starts reading the records of experts into staging buffers.
func (ps *packExperts) submit(ctx context.Context, layer int, experts []int) (*ioengine.Batch, []*container.RecordRead, error) {
	if len(experts) == 0 {
		return nil, nil, nil
	}
	reads := ps.wave[:0]
	for _, e := range experts {
		buf, err := ps.staging.Get(ctx)
		if err != nil {
			ps.release(reads)
			return nil, nil, err
		}
		reads = append(reads, ps.newRead(layer, e, buf))
	}
	ps.wave = reads
	batch, err := ps.rr.Submit(ctx, reads)
	if err != nil {
		ps.release(reads)
		return nil, nil, err
	}
	ps.stats.Reads += uint64(len(reads))
	return batch, reads, nil
}

// complete computes each record of a batch as it lands, then caches it.
func (ps *packExperts) complete(ctx context.Context, layer int, batch *ioengine.Batch, reads []*container.RecordRead,
	use func(int, Expert) error) error {
	if batch == nil {
		return nil
	}
	for {
		wait := time.Now()
		req, ok := batch.Next()
		ps.stats.IOWait += time.Since(wait)
		if !ok {
			break
		}
		rd := req.Tag.(*container.RecordRead)
		err := rd.Err()
		if err == nil {
			err = rd.Verify()
		}
		if err != nil {
			return errors.Join(fmt.Errorf("engine: layer %d expert %d: %w", layer, rd.Expert, err), ps.drain(batch, reads))
		}
		rec := rd.Record()
		ps.stats.BytesRead += uint64(len(rec))
		if err := use(rd.Expert, ps.expert(layer, trace.LevelSSD, rec)); err != nil {
			return errors.Join(err, ps.drain(batch, reads))
		}
		ps.cache.put(cacheKey(layer, rd.Expert), rec)
	}
	ps.release(reads)
	batch.Release()
	return nil
}

// drain waits for every read of a batch still in flight, so no buffer
// returns to the pool while the kernel may write into it, then releases
// the buffers.
func (ps *packExperts) drain(batch *ioengine.Batch, reads []*container.RecordRead) error {
	if batch != nil {
		_ = batch.Wait()
		batch.Release()
	}
	ps.release(reads)
	return nil
}

func (ps *packExperts) release(reads []*container.RecordRead) {
	for _, rd := range reads {
		if rd.Buf != nil {
			_ = ps.staging.Put(rd.Buf)
			rd.Buf = nil
		}
		ps.free = append(ps.free, rd)
	}
}

// newRead is a record read of expert e of layer into buf, reusing one
// done with.
func (ps *packExperts) newRead(layer, e int, buf *ioengine.Buffer) *container.RecordRead {
	if n := len(ps.free); n > 0 {
		rd := ps.free[n-1]
		ps.free = ps.free[:n-1]
		*rd = container.RecordRead{Layer: layer, Expert: e, Buf: buf}
		return rd
	}
	return &container.RecordRead{Layer: layer, Expert: e, Buf: buf}
}

func (ps *packExperts) Stats() SourceStats {
	s := ps.stats
	s.Evictions = ps.cache.evicted
	return s
}

func (ps *packExperts) Close() error {
	if ps.staging != nil {
		ps.dropAll()
	}
	var errs []error
	if ps.rr != nil {
		errs = append(errs, ps.rr.Close())
	}
	if ps.eng != nil {
		errs = append(errs, ps.eng.Close())
	}
	if ps.staging != nil {
		errs = append(errs, ps.staging.Close())
	}
	if ps.cache != nil {
		errs = append(errs, ps.cache.close())
	}
	return errors.Join(errs...)
}

// loadPackResident reads every expert of a pack into RAM, verifying each
// component: the pack's resident mode.
func loadPackResident(p *container.OpenPack, h *Hparams, mem *arena, lm *loadMeter) (*residentExperts, error) {
	layers, err := packComponents(p, h)
	if err != nil {
		return nil, err
	}
	r := &residentExperts{layers: make([]residentLayer, h.Layers), stats: SourceStats{Source: "resident"}}
	for il, pl := range layers {
		if !h.isMoE(il) {
			continue
		}
		if err := loadPackLayer(p.Containers[il], h, il, &pl, &r.layers[il], mem, lm); err != nil {
			return nil, fmt.Errorf("engine: layer %d: %w", il, err)
		}
	}
	return r, nil
}

// loadPackLayer reads one layer's expert components into rl.
func loadPackLayer(c *container.Reader, h *Hparams, il int, pl *packLayer, rl *residentLayer, mem *arena, lm *loadMeter) error {
	D, E := h.expertIn(), h.Experts
	F := h.expertFF(il)
	read := func(ci int) ([]byte, error) {
		bpe := int(c.Header.Components[ci].BytesPerExpert)
		data, err := mem.alloc(bpe * E)
		if err != nil {
			return nil, err
		}
		for e := range E {
			if _, err := c.ReadComponent(e, ci, data[e*bpe:e*bpe:(e+1)*bpe]); err != nil {
				return nil, fmt.Errorf("expert %d: %w", e, err)
			}
			if err := lm.add(bpe); err != nil {
				return nil, err
			}
		}
		return data, nil
	}
	load := func(ci, cols, rows int) (*matrix, error) {
		data, err := read(ci)
		if err != nil {
			return nil, err
		}
		comp := &c.Header.Components[ci]
		m, err := newMatrix(comp.Name, comp.Type, cols, rows*E, data)
		m.rows = rows
		return &m, err
	}
	var err error
	var m *matrix
	switch {
	case pl.gateUp >= 0:
		rl.gateUp, err = load(pl.gateUp, D, 2*F)
	case pl.gate >= 0:
		if rl.gate, err = load(pl.gate, D, F); err == nil {
			if m, err = load(pl.up, D, F); err == nil {
				rl.up = *m
			}
		}
	default:
		if m, err = load(pl.up, D, F); err == nil {
			rl.up = *m
		}
	}
	if err != nil {
		return err
	}
	if m, err = load(pl.down, F, D); err != nil {
		return err
	}
	rl.down, rl.ff = *m, F
	for b, ci := range pl.bias {
		if ci >= 0 {
			if rl.bias[b], err = read(ci); err != nil {
				return err
			}
		}
	}
	return nil
}
