package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/ioengine"
	"github.com/gguftool/gguftool/trace"
)

// Speculative prefetch. Before a layer's experts run, the session applies
// the next MoE layer's router to the hidden state it has (this layer's
// FFN input) and tells the expert source which experts that guess would
// pick. A pack source starts reading the guessed experts that are not
// cached into staging buffers, never into the cache, so a guess evicts
// nothing the current step needs. When the next layer's real router asks
// for its experts, a guessed expert it picks is served from the landed
// read (after its checksum, as any read); the rest of the guess is
// wasted bandwidth and is counted as such. The router stays
// authoritative, and the bytes served are the same bytes, so the logits
// do not change.
//
// Across tokens the same is done once per step: after the last layer, the
// first MoE layer's router is applied to the final hidden state (normed
// with that layer's FFN norm), and its guess is read while the output head
// runs, the token is sampled and the next token's layers before its first
// MoE layer compute. Its precision is tracked apart from the next-layer
// guesses', as it pauses by itself at a different quality.

// Prefetcher is an expert source that can start reading experts before
// the router asks for them.
type Prefetcher interface {
	// Prefetch starts reading experts of layer (a guess) that the source
	// does not hold; the next Fetch of that layer uses whichever it asks
	// for. A later Prefetch drops reads nobody used.
	Prefetch(ctx context.Context, layer int, experts []int) error
	// Speculating says whether guesses are read at all (they are still
	// scored when not, for the telemetry).
	Speculating() bool
}

// minPrecision is the share of guessed experts the router must go on to
// pick (a moving average) for guesses to be read: below it the reads
// spend more bandwidth than they save latency (at 42 % precision a
// quarter-cache decode measured at well under half speed), and
// prefetching pauses while the guesses are still scored, until they
// improve.
const minPrecision = 0.5

// The two kinds of guesses, each with its own precision.
const (
	guessNextLayer = iota // the next layer's, within a step
	guessNextToken        // the first MoE layer's, for the next step
)

// prefetchState is a pack source's guess for one layer and its reads.
type prefetchState struct {
	layer     int // the layer guessed; −1 for none
	kind      int // guessNextLayer or guessNextToken
	predicted []int
	batch     *ioengine.Batch
	reads     []*container.RecordRead
}

// Prefetch implements Prefetcher. Two guesses may be outstanding: the one
// for the layer about to be fetched, made during the layer before, and
// the one for the layer after it; each has a slot by layer parity.
func (ps *packExperts) Prefetch(ctx context.Context, layer int, experts []int) error {
	pf := &ps.pf[layer%2]
	ps.dropPrefetch(pf)
	pf.layer, pf.predicted, pf.kind = layer, pf.predicted[:0], guessNextLayer
	if layer <= ps.lastFetched {
		pf.kind = guessNextToken
	}
	for _, e := range experts {
		if !ps.cache.has(cacheKey(layer, e)) {
			pf.predicted = append(pf.predicted, e)
		}
	}
	ps.stats.PrefetchGuessed += uint64(len(pf.predicted))
	if !ps.prefetch || len(pf.predicted) == 0 || ps.precision[pf.kind] < minPrecision {
		return nil
	}
	// A third of the staging buffers at most for each of the two slots, so
	// demand reads always find some.
	n := min(len(pf.predicted), ps.staging.Count()/3)
	if n == 0 {
		return nil
	}
	for _, e := range pf.predicted[:n] {
		buf, err := ps.staging.Get(ctx) // only the other slot's reads hold buffers now: never blocks
		if err != nil {
			ps.release(pf.reads)
			pf.reads = nil
			return err
		}
		pf.reads = append(pf.reads, ps.newRead(layer, e, buf))
	}
	batch, err := ps.rr.Submit(ctx, pf.reads)
	if err != nil {
		ps.release(pf.reads)
		pf.reads = nil
		return err
	}
	pf.batch = batch
	ps.stats.Reads += uint64(n)
	ps.stats.PrefetchReads += uint64(n)
	if pf.kind == guessNextToken {
		ps.stats.PrefetchAcrossReads += uint64(n)
	}
	return nil
}

// Speculating implements Prefetcher.
func (ps *packExperts) Speculating() bool { return ps.prefetch }

// takePrefetch scores the guess for layer against the experts the router
// picked (misses: those not cached) and returns the reads started for it,
// which the caller must finish with usePrefetch. A stale guess in the
// layer's slot is dropped.
func (ps *packExperts) takePrefetch(layer int, misses []int) *prefetchState {
	ps.lastFetched = layer
	pf := &ps.pf[layer%2]
	if pf.layer != layer {
		ps.dropPrefetch(pf)
		return nil
	}
	used := 0
	for _, e := range pf.predicted {
		if slices.Contains(misses, e) {
			used++
		}
	}
	ps.stats.PrefetchGuessedUsed += uint64(used)
	ps.stats.PrefetchNeeded += uint64(len(misses))
	if len(pf.predicted) > 0 {
		ps.precision[pf.kind] = 0.8*ps.precision[pf.kind] + 0.2*float64(used)/float64(len(pf.predicted))
	}
	pf.layer = -1
	if pf.batch == nil {
		return nil
	}
	return pf
}

// usePrefetch waits for a layer's speculative reads and passes each
// landed expert the router picked to use, then caches it; the others are
// counted as wasted.
func (ps *packExperts) usePrefetch(layer int, pf *prefetchState, wanted []int, use func(int, Expert) error) error {
	defer func() {
		ps.release(pf.reads)
		pf.batch.Release() // every read returned (Next or Wait ran out)
		pf.reads, pf.batch = pf.reads[:0], nil
	}()
	for {
		wait := time.Now()
		req, ok := pf.batch.Next()
		ps.stats.IOWait += time.Since(wait)
		if !ok {
			return nil
		}
		rd := req.Tag.(*container.RecordRead)
		if !slices.Contains(wanted, rd.Expert) {
			// A guess nobody needs: counted, not verified (a bad one
			// fails when it is needed, read on demand).
			ps.wasted(rd)
			continue
		}
		err := rd.Err()
		if err == nil {
			err = rd.Verify()
		}
		if err != nil {
			_ = pf.batch.Wait()
			return fmt.Errorf("engine: layer %d expert %d: %w", layer, rd.Expert, err)
		}
		rec := rd.Record()
		ps.stats.BytesRead += uint64(len(rec))
		ps.stats.PrefetchUsed++
		if pf.kind == guessNextToken {
			ps.stats.PrefetchAcrossUsed++
		}
		if err := use(rd.Expert, ps.expert(layer, trace.LevelSSD, rec)); err != nil {
			_ = pf.batch.Wait()
			return err
		}
		ps.cache.put(cacheKey(layer, rd.Expert), rec)
	}
}

// dropPrefetch waits for a slot's reads nobody will use and frees their
// buffers.
func (ps *packExperts) dropPrefetch(pf *prefetchState) {
	pf.layer = -1
	if pf.batch == nil {
		return
	}
	_ = pf.batch.Wait()
	for _, rd := range pf.reads {
		ps.wasted(rd)
	}
	ps.release(pf.reads)
	pf.batch.Release()
	pf.reads, pf.batch = pf.reads[:0], nil
}

// guessNext applies the next layer's router to this layer's FFN input
// (in s.as) and returns the experts its top-k would pick for any of the T
// tokens, in id order: the guess a Prefetcher reads ahead. It is nil when
// the next layer routes nothing.
func (s *Session) guessNext(il int, in Input, T int) []int {
	next := il + 1
	if next >= s.m.Hparams.Layers || !s.m.Hparams.isMoE(next) {
		return nil
	}
	return s.guessWith(&s.m.layers[next], in, T)
}

// guessAcross guesses the next step's experts of the first MoE layer from
// n rows of final hidden state (x: each sequence's last), normed with that
// layer's FFN norm, and has the prefetcher read them; nothing when
// prefetch is off, so a run without it spends no time here.
func (s *Session) guessAcross(ctx context.Context, pf Prefetcher, x Tensor, n int) error {
	h := s.m.Hparams
	first := h.DenseLeading
	if !pf.Speculating() || first >= h.Layers {
		return nil
	}
	L := &s.m.layers[first]
	D := h.Embd
	across := s.step.Tensor(n * D)
	s.be.RMSNorm(across, x, &L.ffnNorm, h.RMSEps, n, D)
	return pf.Prefetch(ctx, first, s.guessWith(L, s.be.Input(s.step, across, D, n), n))
}

// guessWith applies layer L's router to the T rows in s.as and returns
// the experts its top-k would pick for any of them, in id order.
func (s *Session) guessWith(L *layer, in Input, T int) []int {
	h, be := s.m.Hparams, s.be
	E, K := h.Experts, h.ExpertsUsed
	sc := &s.scratch
	gt := s.step.Tensor(T * E)
	be.MulMat(gt, &L.router, in)
	be.AddBias(gt, &L.routerBias, T)
	sc.guess = be.Read(gt)
	sc.picked = grow(sc.picked, E)
	clear(sc.picked)
	sc.order = grow(sc.order, E)
	picked, order := sc.picked, sc.order
	for t := range T {
		row := sc.guess[t*E : (t+1)*E]
		if L.probsBias.present() {
			for i := range row {
				row[i] += L.probsBias.f[i]
			}
		}
		for i := range order {
			order[i] = i
		}
		// Softmax and sigmoid keep the logits' order: the top k of the
		// (biased) logits are the router's picks but for groups.
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(row[b], row[a]) })
		for _, e := range order[:K] {
			picked[e] = true
		}
	}
	guess := sc.guessed[:0]
	for e, p := range picked {
		if p {
			guess = append(guess, e)
		}
	}
	sc.guessed = guess
	return guess
}

// heldAhead is the staging buffers both slots' reads hold.
func (ps *packExperts) heldAhead() int { return len(ps.pf[0].reads) + len(ps.pf[1].reads) }

// dropAll drops both slots' reads.
func (ps *packExperts) dropAll() {
	ps.dropPrefetch(&ps.pf[0])
	ps.dropPrefetch(&ps.pf[1])
}

// wasted counts a landed read ahead that nobody used.
func (ps *packExperts) wasted(rd *container.RecordRead) {
	if rd.Err() == nil {
		n := uint64(len(rd.Record()))
		ps.stats.BytesRead += n
		ps.stats.PrefetchWastedBytes += n
	}
}
