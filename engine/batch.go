package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gguftool/gguftool/gguf/quant"
)

// BatchItem is one session's next tokens in a batched step: a decoded
// token, or a chunk of a prompt.
type BatchItem struct {
	Session *Session
	Tokens  []int
}

// EvalBatch evaluates every item's tokens in one forward pass and returns,
// per item, the logits after its last token. The sessions' rows never mix:
// each session attends over its own positions and keeps its own state;
// what they share is each layer's routed experts, which are fetched once
// per step for every row routed to them (one read from the pack, one
// cache lookup), and the output head. The logits are the same bits as
// each session evaluating its tokens alone, whatever the batch holds.
//
// The rows together must be at most MaxBatch. A batch of one, a model
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
	start := time.Now()
	out, err := m.forwardBatch(ctx, items)
	for _, it := range items {
		it.Session.stats.Forward += time.Since(start)
	}
	return out, err
}

// checkBatch refuses a batch that cannot be evaluated: a session of
// another model or listed twice, no tokens, a token outside the
// vocabulary, more rows than MaxBatch, or a session whose context the
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
	if rows > MaxBatch {
		return fmt.Errorf("engine: a batch of %d rows; at most %d (MaxBatch)", rows, MaxBatch)
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
	x := make([]float32, R*D)
	for i, it := range items {
		for t, tok := range it.Tokens {
			row := (off[i] + t) * D
			if _, err := quant.Dequantize(x[row:row], m.tokEmbd.typ, m.tokEmbd.row(tok)); err != nil {
				return nil, err
			}
		}
	}
	buf := make([]float32, R*D)
	lead := items[0].Session
	if c, ok := m.experts.(batchClock); ok {
		c.startBatch(R)
	}
	for il := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if L := &m.layers[il]; L.delta == nil && L.kda == nil && L.mla == nil && L.attnGate.rows == 0 {
			lead.attentionMany(il, items, off, x, buf)
		} else {
			for i, it := range items {
				it.Session.attention(il, x[off[i]*D:off[i+1]*D], buf[off[i]*D:off[i+1]*D], off[i+1]-off[i])
			}
		}
		if err := lead.ffn(ctx, il, x, buf, R); err != nil {
			return nil, err
		}
	}
	last := make([]float32, len(items)*D)
	for i := range items {
		copy(last[i*D:(i+1)*D], x[(off[i+1]-1)*D:off[i+1]*D])
	}
	if pf, ok := m.experts.(Prefetcher); ok {
		if err := lead.guessAcross(ctx, pf, last, len(items)); err != nil {
			return nil, err
		}
	}
	for i, it := range items {
		it.Session.n += off[i+1] - off[i]
		it.Session.stats.Positions += off[i+1] - off[i]
	}
	logits := lead.outputRows(last, len(items))
	V := m.Hparams.Vocab
	out := make([][]float32, len(items))
	for i := range items {
		out[i] = logits[i*V : (i+1)*V : (i+1)*V]
	}
	return out, nil
}

// attentionMany adds a layer of grouped-query attention to the stacked
// rows of every item: the norm and the query, key, value and output
// projections over all rows at once (weights read once per step), each
// session's rotations, cache and attention over its own rows.
func (s *Session) attentionMany(il int, items []BatchItem, off []int, x, hbuf []float32) {
	m, h := s.m, s.m.Hparams
	L := &m.layers[il]
	D, R := h.Embd, off[len(items)]
	qDim, kvDim := h.Heads*h.HeadDim, h.HeadsKV*h.HeadDim
	for t := range R {
		rmsNorm(hbuf[t*D:(t+1)*D], x[t*D:(t+1)*D], L.attnNorm, h.RMSEps)
	}
	s.as.reset(hbuf, D, R)
	q, k, v, gate := s.mhaProject(L, R)
	att := make([]float32, R*qDim)
	for i, it := range items {
		lo, hi := off[i], off[i+1]
		var g []float32
		if gate != nil {
			g = gate[lo*qDim : hi*qDim]
		}
		a := it.Session.mhaCore(il, q[lo*qDim:hi*qDim], k[lo*kvDim:hi*kvDim], v[lo*kvDim:hi*kvDim], g, hi-lo)
		copy(att[lo*qDim:hi*qDim], a)
	}
	s.as.reset(att, L.wo.cols, R)
	o := hbuf[:R*D]
	m.work.mulMat(&L.wo, s.as.get(L.wo.vt), o)
	addBias(o, L.bo)
	for i := range x[:R*D] {
		x[i] = o[i] + x[i]
	}
}
