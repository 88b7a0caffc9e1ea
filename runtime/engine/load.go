package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gguftool/gguftool/container"
)

// loadChunk is the most Open reads between two looks at its context and
// two progress reports: a tensor of experts can be gigabytes, and Ctrl-C
// should stop a load within a fraction of a second.
const loadChunk = 16 << 20

// loadMeter counts the bytes Open reads into RAM against what it will
// read, reports them, and stops the load once its context is done.
type loadMeter struct {
	ctx         context.Context
	report      func(done, total int64)
	done, total int64
}

// add counts n bytes read; it fails with the context's error when the
// load is cancelled.
func (lm *loadMeter) add(n int) error {
	lm.done += int64(n)
	if lm.report != nil {
		lm.report(lm.done, max(lm.done, lm.total))
	}
	return lm.cancelled()
}

func (lm *loadMeter) cancelled() error {
	if err := context.Cause(lm.ctx); err != nil {
		return fmt.Errorf("engine: loading stopped after %d of %d bytes: %w", lm.done, lm.total, err)
	}
	return nil
}

// finish makes the last report say the load is complete: a file can
// hold tensors the forward pass never reads, not counted in the total only
// when tableBytes knows them.
func (lm *loadMeter) finish() {
	if lm.report != nil && lm.done != lm.total {
		lm.report(lm.done, lm.done)
	}
}

// readChunked fills b from r at off in chunks of loadChunk, counting each.
func (lm *loadMeter) readChunked(r io.ReaderAt, off int64, b []byte) error {
	for lo := 0; lo < len(b); lo += loadChunk {
		hi := min(lo+loadChunk, len(b))
		// A ReaderAt may say io.EOF with the last byte it fills.
		if n, err := r.ReadAt(b[lo:hi], off+int64(lo)); err != nil && (n < hi-lo || !errors.Is(err, io.EOF)) {
			return err
		}
		if err := lm.add(hi - lo); err != nil {
			return err
		}
	}
	return nil
}

// readsTensor says whether Open reads the tensor name, of a model of
// layers blocks: all but those of the next-token prediction blocks after
// them (GLM's), which the forward pass does not run.
func readsTensor(name string, layers int) bool {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return true
	}
	num, _, _ := strings.Cut(rest, ".")
	b, err := strconv.Atoi(num)
	return err != nil || b < layers
}

// isRoutedExpert says whether a tensor is a stack of routed experts
// (ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_gate_up_exps and their
// biases): what a pack keeps in its containers rather than its resident
// file.
func isRoutedExpert(name string) bool { return strings.Contains(name, "_exps.") }

// tableBytes is the size of the tensors of tab that Open reads for a
// model of layers blocks, the routed experts' or (experts false) the
// others'.
func tableBytes(tab tensorTable, layers int, experts bool) int64 {
	var n int64
	for name := range tab.names() {
		if readsTensor(name, layers) && isRoutedExpert(name) == experts {
			if _, r, ok := tab.find(name); ok {
				n += r.Size()
			}
		}
	}
	return n
}

// containerBytes is the size of the expert components of a pack's first
// layers blocks.
func containerBytes(p *container.OpenPack, layers int) int64 {
	var n int64
	for il, c := range p.Containers {
		if il >= layers {
			continue
		}
		for _, comp := range c.Header.Components {
			n += int64(comp.BytesPerExpert) * int64(c.Header.Experts)
		}
	}
	return n
}
