package cachelab

import (
	"cmp"
	"context"
	"errors"
	"io"
	"math"
	"slices"

	"github.com/gguftool/gguftool/trace"
)

// PrefillBatch is the most prefill positions the engine evaluates in one
// forward pass (engine.DefaultBatchSize): a run of prefill steps is grouped into
// batches of this many, as the engine fetched them.
const PrefillBatch = 512

// Key packs a (layer, expert) pair as the engine's cache does.
func Key(layer, expert int) uint64 { return uint64(layer)<<32 | uint64(uint32(expert)) }

// KeyLayer is the layer of a key.
func KeyLayer(k uint64) int { return int(k >> 32) }

// never is the next use of a key that is not used again.
const never = math.MaxInt

// Group is the experts one batch routed to in one layer: the engine's
// unit of lookup and insertion.
type Group struct {
	Step    int      // the trace step of the batch's first position: the policies' clock
	Layer   int      // the MoE layer
	Prefill bool     // the batch was part of a prompt (not one decoded position)
	Keys    []uint64 // distinct keys, in order of first use (position, then rank)
	// Next is, per key, the index of the next group that uses it, or
	// never; Belady reads it.
	Next []int
	// Recorded is, per key, where the engine served it from when it
	// recorded the trace (meaningless for an imported trace).
	Recorded []trace.Level
}

// Accesses is a whole trace, grouped as the engine fetched it.
type Accesses struct {
	Header  trace.Header
	Steps   int64
	Records int64
	Groups  []Group
}

// Pairs is the number of (layer, expert) pairs of the model.
func (a *Accesses) Pairs() int { return a.Header.Layers * a.Header.Experts }

// Lookups is the number of lookups a replay makes: one per distinct
// expert of a group.
func (a *Accesses) Lookups() int64 {
	var n int64
	for i := range a.Groups {
		n += int64(len(a.Groups[i].Keys))
	}
	return n
}

// RecordedHits counts the lookups the engine served from its RAM cache
// when it recorded the trace.
func (a *Accesses) RecordedHits() int64 {
	var n int64
	for i := range a.Groups {
		for _, l := range a.Groups[i].Recorded {
			if l == trace.LevelRAM {
				n++
			}
		}
	}
	return n
}

// Load reads a whole trace and groups it, keeping every group: what a
// planner that replays the same trace many times wants. ReplayStream
// replays without keeping the trace. Errors are the reader's (a
// *trace.FormatError for a malformed trace) or ctx's.
func Load(ctx context.Context, tr *trace.Reader) (*Accesses, error) {
	a := &Accesses{Header: tr.Header}
	gr := NewGrouper(tr)
	for {
		g, err := gr.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		a.Groups = append(a.Groups, Group{Step: g.Step, Layer: g.Layer, Prefill: g.Prefill,
			Keys: slices.Clone(g.Keys), Recorded: slices.Clone(g.Recorded)})
	}
	a.Steps, a.Records = gr.Steps, gr.Records
	a.linkNext()
	return a, nil
}

// Grouper reads a trace and hands out its groups as the engine fetched
// them (a decode position, or a run of at most PrefillBatch prefill
// positions, split by layer), one at a time. It holds one batch of
// records, never the trace, so its memory is bounded by the largest
// batch the trace holds, whatever its length.
type Grouper struct {
	tr *trace.Reader
	// Steps and Records count what was read so far.
	Steps, Records int64

	recs         []trace.Record // the step just read (tr.Next's buffer)
	batch        []trace.Record // the batch being gathered; Step is the position in it
	positions    int
	batchStep    int
	batchPrefill bool
	done         bool

	ready     []Group // the groups of the last batch, handed out in order
	at        int
	keys      []uint64 // their keys and levels, end to end
	levels    []trace.Level
	seen      map[uint16]bool
	bounds    []int // where each ready group's keys start, and the end
	sortedBuf []trace.Record
}

// NewGrouper groups tr's steps.
func NewGrouper(tr *trace.Reader) *Grouper { return &Grouper{tr: tr, seen: map[uint16]bool{}} }

// Next returns the next group, or io.EOF after the last. The group and
// its slices are valid until the next call; its Next is nil, since the
// future is not read yet.
func (gr *Grouper) Next(ctx context.Context) (*Group, error) {
	for gr.at == len(gr.ready) {
		if gr.done {
			return nil, io.EOF
		}
		if err := gr.readStep(ctx); err != nil {
			return nil, err
		}
	}
	g := &gr.ready[gr.at]
	gr.at++
	return g, nil
}

// readStep reads one step into the batch, first handing the batch out
// when the step does not join it (a decode position is a batch of its
// own; prefill positions join the batch before them until it holds
// PrefillBatch), or the last batch at the end of the trace.
func (gr *Grouper) readStep(ctx context.Context) error {
	if gr.Steps%4096 == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	step, got, err := gr.tr.Next(gr.recs)
	if errors.Is(err, io.EOF) {
		gr.flush()
		gr.done = true
		return nil
	}
	if err != nil {
		return err
	}
	gr.recs = got
	gr.Steps++
	gr.Records += int64(len(got))
	prefill := len(got) > 0 && got[0].Prefill
	if !prefill || !gr.batchPrefill || gr.positions == PrefillBatch {
		gr.flush()
	}
	if gr.positions == 0 {
		gr.batchStep, gr.batchPrefill = step, prefill
	}
	for _, r := range got {
		r.Step = uint32(gr.positions) // position within the batch, for ordering
		gr.batch = append(gr.batch, r)
	}
	gr.positions++
	return nil
}

// flush makes the gathered batch's groups ready, one per layer it routed
// to: the layer's distinct experts in order of first use (position, then
// rank), each with where the engine served its first use from.
func (gr *Grouper) flush() {
	gr.ready, gr.at = gr.ready[:0], 0
	gr.keys, gr.levels, gr.bounds = gr.keys[:0], gr.levels[:0], gr.bounds[:0]
	if gr.positions == 0 {
		return
	}
	all := append(gr.sortedBuf[:0], gr.batch...)
	slices.SortStableFunc(all, func(x, y trace.Record) int {
		return cmp.Or(cmp.Compare(x.Layer, y.Layer), cmp.Compare(x.Step, y.Step), cmp.Compare(x.Rank, y.Rank))
	})
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].Layer == all[i].Layer {
			j++
		}
		gr.ready = append(gr.ready, Group{Step: gr.batchStep, Layer: int(all[i].Layer), Prefill: all[i].Prefill})
		gr.bounds = append(gr.bounds, len(gr.keys))
		lo := len(gr.keys)
		// A decode group has at most top-k records: a linear search
		// of its keys beats hashing. A prefill group can have thousands.
		small := j-i <= 64
		if !small {
			clear(gr.seen)
		}
		for _, r := range all[i:j] {
			k := Key(int(r.Layer), int(r.Expert))
			if small && slices.Contains(gr.keys[lo:], k) || !small && gr.seen[r.Expert] {
				continue
			}
			if !small {
				gr.seen[r.Expert] = true
			}
			gr.keys = append(gr.keys, k)
			gr.levels = append(gr.levels, r.From)
		}
		i = j
	}
	gr.bounds = append(gr.bounds, len(gr.keys))
	for gi := range gr.ready {
		lo, hi := gr.bounds[gi], gr.bounds[gi+1]
		gr.ready[gi].Keys, gr.ready[gi].Recorded = gr.keys[lo:hi:hi], gr.levels[lo:hi:hi]
	}
	gr.sortedBuf = all
	gr.batch, gr.positions = gr.batch[:0], 0
}

// linkNext fills every group's Next from the end of the trace back.
func (a *Accesses) linkNext() {
	nextOf := map[uint64]int{}
	for gi := len(a.Groups) - 1; gi >= 0; gi-- {
		g := &a.Groups[gi]
		g.Next = make([]int, len(g.Keys))
		for i, k := range g.Keys {
			if n, ok := nextOf[k]; ok {
				g.Next[i] = n
			} else {
				g.Next[i] = never
			}
			nextOf[k] = gi
		}
	}
}
