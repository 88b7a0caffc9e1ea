package cachelab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gguftool/gguftool/trace"
)

// Scratch is where ReplayStream keeps Belady's table of next uses: an
// entry of entryBytes per lookup, written once, rewritten once from the
// end back, then read once from the start. A temporary file (*os.File)
// is one; the caller makes it, so this package opens no file.
type Scratch interface {
	io.ReaderAt
	io.WriterAt
}

// StreamStats is what ReplayStream read.
type StreamStats struct {
	Steps, Records, Lookups int64
}

// ReplayStream replays every run over the trace tr reads, in one pass
// over the trace, without holding it: memory is that of the runs' caches
// and policies (bounded by the (layer, expert) pairs the trace routes to,
// whatever the capacity asked) and one batch of records. The results,
// in the order of runs, are those Load followed by Replay gives.
//
// Belady reads the future. For it the pass also writes each lookup's key
// to scratch, a second pass over scratch from the end back fills in each
// lookup's next use, and a third replays the Belady runs from it; scratch
// may be nil when no run is Belady.
func ReplayStream(ctx context.Context, tr *trace.Reader, runs []Run, perLayer bool, o Options, scratch Scratch) ([]Result, StreamStats, error) {
	var st StreamStats
	runners := make([]*runner, len(runs))
	var belady []int // indexes into runs
	for i, run := range runs {
		r, err := newRunner(run, tr.Header.Layers, perLayer, o)
		if err != nil {
			return nil, st, err
		}
		if run.Policy == "belady" {
			belady = append(belady, i)
		}
		runners[i] = r
	}
	if len(belady) > 0 && scratch == nil {
		return nil, st, errors.New("cachelab: Belady's replay needs a scratch file for its next uses")
	}
	nw := &nextWriter{s: scratch}
	gr := NewGrouper(tr)
	for {
		g, err := gr.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, st, err
		}
		st.Lookups += int64(len(g.Keys))
		for i, r := range runners {
			if runs[i].Policy != "belady" {
				if _, err := r.feed(g.Layer, int64(g.Step), g.Keys, nil); err != nil {
					return nil, st, err
				}
			}
		}
		if len(belady) > 0 {
			if err := nw.group(g.Keys); err != nil {
				return nil, st, err
			}
		}
	}
	st.Steps, st.Records = gr.Steps, gr.Records
	if len(belady) > 0 {
		if err := nw.flush(); err != nil {
			return nil, st, err
		}
		if err := linkScratch(ctx, scratch, nw.entries, nw.groups); err != nil {
			return nil, st, err
		}
		bs := make([]*runner, len(belady))
		for j, i := range belady {
			bs[j] = runners[i]
		}
		if err := replayScratch(ctx, scratch, nw.entries, bs); err != nil {
			return nil, st, err
		}
	}
	out := make([]Result, len(runs))
	for i, r := range runners {
		out[i] = r.result()
	}
	return out, st, nil
}

// A scratch entry is a lookup: its key as layer<<16 | expert (both fit 16
// bits in a trace), then a word holding its next use (a group index, or
// nextNever) with the top bit set on the first lookup of each group.
const (
	entryBytes   = 12
	firstOfGroup = 1 << 63
	nextNever    = firstOfGroup - 1
	chunkEntries = 1 << 13 // 96 KiB of entries per read or write
)

func packKey(k uint64) uint32   { return uint32(KeyLayer(k))<<16 | uint32(uint16(k)) }
func unpackKey(k uint32) uint64 { return Key(int(k>>16), int(k&0xFFFF)) }

// nextWriter appends lookups to the scratch, a chunk at a time.
type nextWriter struct {
	s       Scratch
	buf     []byte
	entries int64
	groups  int64
}

func (w *nextWriter) group(keys []uint64) error {
	for i, k := range keys {
		var word uint64
		if i == 0 {
			word = firstOfGroup
		}
		w.buf = binary.LittleEndian.AppendUint32(w.buf, packKey(k))
		w.buf = binary.LittleEndian.AppendUint64(w.buf, word)
		if len(w.buf) >= chunkEntries*entryBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	if len(keys) > 0 {
		w.groups++
	}
	return nil
}

func (w *nextWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.s.WriteAt(w.buf, w.entries*entryBytes); err != nil {
		return fmt.Errorf("cachelab: writing Belady's scratch: %w", err)
	}
	w.entries += int64(len(w.buf) / entryBytes)
	w.buf = w.buf[:0]
	return nil
}

// linkScratch fills in every entry's next use, walking the entries from
// the last back with the group each key was last seen in: the same
// indexes Accesses.linkNext gives. Its memory is one chunk and a map of
// the distinct keys.
func linkScratch(ctx context.Context, s Scratch, entries, groups int64) error {
	nextOf := map[uint32]int64{}
	buf := make([]byte, chunkEntries*entryBytes)
	gi := groups - 1
	for hi := entries; hi > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		lo := max(0, hi-chunkEntries)
		b := buf[:(hi-lo)*entryBytes]
		if _, err := s.ReadAt(b, lo*entryBytes); err != nil {
			return fmt.Errorf("cachelab: reading Belady's scratch: %w", err)
		}
		for e := len(b)/entryBytes - 1; e >= 0; e-- {
			ent := b[e*entryBytes : (e+1)*entryBytes]
			k := binary.LittleEndian.Uint32(ent)
			first := binary.LittleEndian.Uint64(ent[4:]) & firstOfGroup
			n, ok := nextOf[k]
			if !ok {
				n = nextNever
			}
			binary.LittleEndian.PutUint64(ent[4:], uint64(n)|first)
			nextOf[k] = gi
			if first != 0 {
				gi--
			}
		}
		if _, err := s.WriteAt(b, lo*entryBytes); err != nil {
			return fmt.Errorf("cachelab: writing Belady's scratch: %w", err)
		}
		hi = lo
	}
	return nil
}

// replayScratch feeds the Belady runs every group of the scratch, with
// its next uses, in order.
func replayScratch(ctx context.Context, s Scratch, entries int64, runs []*runner) error {
	buf := make([]byte, chunkEntries*entryBytes)
	var keys []uint64
	var next []int
	feed := func() error {
		if len(keys) == 0 {
			return nil
		}
		for _, r := range runs {
			// Belady ignores the clock: its order is the next uses'.
			if _, err := r.feed(KeyLayer(keys[0]), 0, keys, next); err != nil {
				return err
			}
		}
		keys, next = keys[:0], next[:0]
		return nil
	}
	for lo := int64(0); lo < entries; lo += chunkEntries {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunkEntries, entries-lo)
		b := buf[:n*entryBytes]
		if _, err := s.ReadAt(b, lo*entryBytes); err != nil {
			return fmt.Errorf("cachelab: reading Belady's scratch: %w", err)
		}
		for e := range int(n) {
			ent := b[e*entryBytes : (e+1)*entryBytes]
			word := binary.LittleEndian.Uint64(ent[4:])
			if word&firstOfGroup != 0 {
				if err := feed(); err != nil {
					return err
				}
			}
			nx := int(word &^ firstOfGroup)
			if uint64(nx) == nextNever {
				nx = never
			}
			keys = append(keys, unpackKey(binary.LittleEndian.Uint32(ent)))
			next = append(next, nx)
		}
	}
	return feed()
}
