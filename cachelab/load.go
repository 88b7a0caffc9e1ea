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
// forward pass (engine.MaxBatch): a run of prefill steps is grouped into
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

// Load reads a whole trace and groups it. Errors are the reader's (a
// *trace.FormatError for a malformed trace) or ctx's.
func Load(ctx context.Context, tr *trace.Reader) (*Accesses, error) {
	a := &Accesses{Header: tr.Header}
	var batch [][]trace.Record // the positions of the batch being gathered
	var batchStep int
	var batchPrefill bool
	flush := func() {
		if len(batch) > 0 {
			a.addBatch(batchStep, batch)
		}
		batch = batch[:0]
	}
	var recs []trace.Record
	for {
		if a.Steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		step, got, err := tr.Next(recs)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		recs = got
		a.Steps++
		a.Records += int64(len(got))
		prefill := len(got) > 0 && got[0].Prefill
		// A decode position is a batch of its own; prefill positions join
		// the batch before them until it holds PrefillBatch.
		if !prefill || !batchPrefill || len(batch) == PrefillBatch {
			flush()
		}
		if len(batch) == 0 {
			batchStep, batchPrefill = step, prefill
		}
		batch = append(batch, slices.Clone(got))
	}
	flush()
	a.linkNext()
	return a, nil
}

// addBatch appends one group per layer the batch routed to.
func (a *Accesses) addBatch(step int, batch [][]trace.Record) {
	var all []trace.Record
	for pos, recs := range batch {
		for _, r := range recs {
			r.Step = uint32(pos) // position within the batch, for ordering
			all = append(all, r)
		}
	}
	slices.SortStableFunc(all, func(x, y trace.Record) int {
		return cmp.Or(cmp.Compare(x.Layer, y.Layer), cmp.Compare(x.Step, y.Step), cmp.Compare(x.Rank, y.Rank))
	})
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].Layer == all[i].Layer {
			j++
		}
		g := Group{Step: step, Layer: int(all[i].Layer), Prefill: all[i].Prefill}
		seen := map[uint16]bool{}
		for _, r := range all[i:j] {
			if !seen[r.Expert] {
				seen[r.Expert] = true
				g.Keys = append(g.Keys, Key(int(r.Layer), int(r.Expert)))
				g.Recorded = append(g.Recorded, r.From)
			}
		}
		a.Groups = append(a.Groups, g)
		i = j
	}
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
