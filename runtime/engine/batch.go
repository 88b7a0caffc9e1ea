package engine

import (
	"context"
	"fmt"
	"time"
)

// BatchItem is one session's next tokens in a batched step: a decoded
// token, or a chunk of a prompt.
type BatchItem struct {
	Session *Session
	Tokens  []int
}

// EvalBatch evaluates every item's tokens in one forward pass and returns,
// per item, the logits after its last token (in that item's session's
// buffer, valid until its next evaluation). The sessions' rows never mix:
// each session attends over its own positions and keeps its own state;
// what they share is each layer's routed experts, which are fetched once
// per step for every row routed to them (one read from the pack, one
// cache lookup), and the output head. The logits are the same bits as
// each session evaluating its tokens alone, whatever the batch holds.
//
// The rows together must be at most the model's BatchSize. A batch that
// fails or is cancelled part way leaves every session at its last
// complete position (abortStep). A batch of one, a model
// with residual attention (kimi-k3's blocks mix a session's layers in a
// way this pass does not batch) or a session recording a trace is
// evaluated session by session, with the same results.
func (m *Model) EvalBatch(ctx context.Context, items []BatchItem) ([][]float32, error) {
	if err := m.checkBatch(items); err != nil {
		return nil, err
	}
	batched := len(items) > 1 && m.Hparams.ResBlockSize == 0
	for _, it := range items {
		batched = batched && it.Session.Trace == nil
	}
	if !batched {
		out := make([][]float32, len(items))
		for i, it := range items {
			logits, err := it.Session.Eval(ctx, it.Tokens, false)
			if err != nil {
				return nil, err
			}
			out[i] = logits
		}
		return out, nil
	}
	m.passes.Lock()
	defer m.passes.Unlock()
	start := time.Now()
	for _, it := range items {
		if err := it.Session.beginStep(); err != nil {
			return nil, err
		}
	}
	out, err := m.forwardBatch(ctx, items)
	for _, it := range items {
		it.Session.stats.Forward += time.Since(start)
		if err != nil {
			it.Session.abortStep()
		}
	}
	return out, err
}

// checkBatch refuses a batch that cannot be evaluated: a session of
// another model or listed twice, no tokens, a token outside the
// vocabulary, more rows than the batch size, or a session whose context the
// tokens would overflow.
func (m *Model) checkBatch(items []BatchItem) error {
	if len(items) == 0 {
		return fmt.Errorf("engine: an empty batch")
	}
	rows := 0
	seen := map[*Session]bool{}
	for i, it := range items {
		s := it.Session
		switch {
		case s == nil || s.m != m:
			return fmt.Errorf("engine: batch item %d: a session of another model", i)
		case seen[s]:
			return fmt.Errorf("engine: batch item %d: the session is already in the batch", i)
		case len(it.Tokens) == 0:
			return fmt.Errorf("engine: batch item %d: nothing to evaluate", i)
		case s.n+len(it.Tokens) > s.ctxLen:
			return &ContextError{Have: s.n, Add: len(it.Tokens), Max: s.ctxLen}
		}
		seen[s] = true
		for j, t := range it.Tokens {
			if t < 0 || t >= m.Hparams.Vocab {
				return fmt.Errorf("engine: batch item %d: token %d (input position %d) is outside the vocabulary of %d", i, t, j, m.Hparams.Vocab)
			}
		}
		rows += len(it.Tokens)
	}
	if rows > m.batch {
		return fmt.Errorf("engine: a batch of %d rows; at most %d (the batch size)", rows, m.batch)
	}
	return nil
}

// forwardBatch is forward for several sessions: their rows stacked, each
// session's attention over its own rows, every feed-forward block (the
// routed experts included) over all rows at once in the first session's
// scratch, and the output head over each session's last row.
func (m *Model) forwardBatch(ctx context.Context, items []BatchItem) ([][]float32, error) {
	D := m.Hparams.Embd
	off := make([]int, len(items)+1)
	for i, it := range items {
		off[i+1] = off[i] + len(it.Tokens)
	}
	R := off[len(items)]
	lead := items[0].Session
	ar := lead.ownArena()
	ar.Reset()
	for _, it := range items {
		it.Session.step = ar // each session's part of the step uses the lead's scratch
	}
	x := ar.Tensor(R * D)
	for i, it := range items {
		if err := m.be.Embed(x.Rows(off[i], off[i+1], D), &m.tokEmbd, it.Tokens); err != nil {
			return nil, err
		}
	}
	buf := ar.Tensor(R * D)
	if c, ok := m.experts.(batchClock); ok {
		c.startBatch(R)
	}
	mark := ar.Mark()
	for il := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ar.Rewind(mark) // the last layer's activations are done with
		if L := &m.layers[il]; L.delta == nil && L.kda == nil {
			if err := lead.attentionMany(il, items, off, x, buf); err != nil {
				return nil, err
			}
		} else {
			for i, it := range items {
				if err := it.Session.attention(il, x.Rows(off[i], off[i+1], D), buf.Rows(off[i], off[i+1], D), off[i+1]-off[i]); err != nil {
					return nil, err
				}
			}
		}
		if err := lead.ffn(ctx, il, x, buf, R); err != nil {
			return nil, err
		}
		if err := checkBatchLayer(items, off, x, il); err != nil {
			return nil, err
		}
	}
	last := ar.Tensor(len(items) * D)
	for i := range items {
		m.be.Copy(last, i*D, D, x, (off[i+1]-1)*D, D, D, 1)
	}
	if pf, ok := m.experts.(Prefetcher); ok {
		if err := lead.guessAcross(ctx, pf, last, len(items)); err != nil {
			return nil, err
		}
	}
	logits := lead.outputRows(last, len(items))
	V := m.Hparams.Vocab
	out := make([][]float32, len(items))
	for i, it := range items {
		s := it.Session
		s.out = append(s.out[:0], logits[i*V:(i+1)*V]...)
		out[i] = s.out
		if err := s.checkLogits(out[i], s.n+off[i+1]-off[i]-1); err != nil {
			return nil, err
		}
	}
	if err := m.be.Err(); err != nil {
		return nil, err
	}
	// Only a complete step moves the positions.
	for i, it := range items {
		it.Session.n += off[i+1] - off[i]
		it.Session.stats.Positions += off[i+1] - off[i]
	}
	return out, nil
}

// checkBatchLayer is checkLayer over the stacked rows of every item,
// each session's rows at its own positions.
func checkBatchLayer(items []BatchItem, off []int, x Tensor, il int) error {
	D := items[0].Session.m.Hparams.Embd
	for i, it := range items {
		if err := it.Session.checkLayer(x.Rows(off[i], off[i+1], D), off[i+1]-off[i], il, it.Session.n); err != nil {
			return err
		}
	}
	return nil
}

// attentionMany adds a layer of attention (grouped-query or latent) to
// the stacked rows of every item: the norm and every projection over all
// rows at once (weights read once per step), each session's rotations,
// cache and attention over its own rows.
func (s *Session) attentionMany(il int, items []BatchItem, off []int, x, hbuf Tensor) error {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	D, R := h.Embd, off[len(items)]
	be.RMSNorm(hbuf, x, &L.attnNorm, h.RMSEps, R, D)
	in := be.Input(s.step, hbuf, D, R)
	var att Tensor
	var err error
	if L.mla != nil {
		att, err = s.mlaMany(il, in, items, off)
	} else {
		att, err = s.mhaMany(il, in, items, off)
	}
	if err != nil {
		return err
	}
	o := s.attnOutput(L, in, att, hbuf, R)
	be.Add(x, o, x, R*D)
	return nil
}

// perRows runs f for each item on its rows' slices of the stacked
// per-row tensors (a row of arrays[j] being widths[j] floats; an empty
// one stays empty) and stacks the out-wide rows f returns.
func (s *Session) perRows(items []BatchItem, off []int, out int, widths []int, arrays []Tensor,
	f func(it BatchItem, rows []Tensor, T int) (Tensor, error)) (Tensor, error) {
	res := s.step.Tensor(off[len(items)] * out)
	rows := make([]Tensor, len(arrays))
	for i, it := range items {
		lo, hi := off[i], off[i+1]
		for j, a := range arrays {
			rows[j] = Tensor{}
			if a.Len() > 0 {
				rows[j] = a.Rows(lo, hi, widths[j])
			}
		}
		r, err := f(it, rows, hi-lo)
		if err != nil {
			return Tensor{}, err
		}
		if out > 0 {
			s.be.Copy(res, lo*out, out, r, 0, out, out, hi-lo)
		}
	}
	return res, nil
}

// mhaMany is grouped-query attention over the rows of in, stacked from
// items: projections at once, each session's core apart.
func (s *Session) mhaMany(il int, in Input, items []BatchItem, off []int) (Tensor, error) {
	h := s.m.Hparams
	qDim, kvDim := h.Heads*h.HeadDim, h.HeadsKV*h.HeadDim
	q, k, v, gate := s.mhaProject(&s.m.layers[il], in, off[len(items)])
	return s.perRows(items, off, qDim, []int{qDim, kvDim, kvDim, qDim}, []Tensor{q, k, v, gate},
		func(it BatchItem, r []Tensor, T int) (Tensor, error) {
			return it.Session.mhaCore(il, r[0], r[1], r[2], r[3], T)
		})
}

// mlaMany is latent attention over the rows of in, stacked from items:
// the projections, the absorbed queries and the decompression at once;
// each session's rotations, cache and attention apart.
func (s *Session) mlaMany(il int, in Input, items []BatchItem, off []int) (Tensor, error) {
	h, a := s.m.Hparams, s.m.Hparams.MLA
	L := &s.m.layers[il]
	R, H := off[len(items)], h.Heads
	qRow, kvRow := L.mla.qRowFloats, a.KVLoraRank+a.RoPE
	q, kv := s.mlaProject(L, in, R)
	s.perRows(items, off, 0, []int{qRow, kvRow}, []Tensor{q, kv}, func(it BatchItem, r []Tensor, T int) (Tensor, error) {
		it.Session.mlaRope(L, r[0], r[1], T)
		return Tensor{}, nil
	})
	if h.MLA.Absorbed {
		qa := s.mlaAbsorbQueries(il, q, R)
		lat, err := s.perRows(items, off, H*a.KVLoraRank, []int{H * kvRow, kvRow}, []Tensor{qa, kv},
			func(it BatchItem, r []Tensor, T int) (Tensor, error) {
				return it.Session.mlaAttendLatent(il, r[0], r[1], T)
			})
		if err != nil {
			return Tensor{}, err
		}
		return s.mlaDecompress(il, lat, R), nil
	}
	k, v := s.mlaKeysValues(il, kv, R)
	qk := a.NoPE + a.RoPE
	return s.perRows(items, off, H*a.Value, []int{qRow, H * qk, H * a.Value}, []Tensor{q, k, v},
		func(it BatchItem, r []Tensor, T int) (Tensor, error) {
			return it.Session.mlaAttendLegacy(il, r[0], r[1], r[2], T)
		})
}
