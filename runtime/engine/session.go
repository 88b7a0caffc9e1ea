package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gguftool/gguftool/trace"
)

// DefaultBatchSize is the most positions one forward pass evaluates
// unless Options.BatchSize says otherwise: longer inputs are evaluated in
// batches of it (llama.cpp's default n_ubatch), which bounds the
// activations' memory. MaxBatchSize bounds Options.BatchSize.
const (
	DefaultBatchSize = 512
	MaxBatchSize     = 8192
)

// Session is one sequence being evaluated: its position, and per layer
// its KV cache (in the model's cache types) or recurrent state.
type Session struct {
	m      *Model
	ctxLen int
	n      int // positions evaluated
	state  []layerState

	// Trace, if set, is called once per position with that position's
	// routing decisions, ordered by layer and rank, after the forward
	// pass that made them.
	Trace  func(pos int, events []RouteEvent) error
	events []RouteEvent

	stats   EvalStats
	scratch moeScratch

	out  []float32 // the logits Eval and EvalBatch return
	be   Backend   // the model's
	ar   Arena     // the session's scratch, made on its first step
	step Arena     // the scratch of the step under way: ar, or a batch's lead's
}

// RouteEvent is one routed expert of one position in one layer: its rank
// in the router's order, and where it was served from.
type RouteEvent struct {
	Pos     int
	Layer   int
	Expert  int
	Rank    int
	Prefill bool
	From    trace.Level
	// Margin is the router's top-k margin in this layer at this position:
	// the k-th probability minus the (k+1)-th (1 when every expert is
	// used). A tiny margin means a near-tie that rounding could flip.
	Margin float32
}

// TraceTo adapts a trace writer to GenerateOptions.Trace: one trace step
// per position, its records in the order of the events.
func TraceTo(w *trace.Writer) func(int, []RouteEvent) error {
	var recs []trace.Record
	return func(pos int, ev []RouteEvent) error {
		recs = recs[:0]
		for _, e := range ev {
			recs = append(recs, trace.Record{Layer: uint16(e.Layer), Expert: uint16(e.Expert), Rank: uint8(e.Rank), Prefill: e.Prefill, From: e.From})
		}
		return w.Step(pos, recs)
	}
}

// EvalStats are a session's compute counters.
type EvalStats struct {
	Positions int           `json:"positions"`
	Forward   time.Duration `json:"forward_ns"`
}

// NewSession starts a sequence that can hold up to ctxLen positions
// (the model's context length when 0).
func (m *Model) NewSession(ctxLen int) (*Session, error) {
	if ctxLen < 0 {
		return nil, fmt.Errorf("engine: a context of %d positions (0 means the model's)", ctxLen)
	}
	if ctxLen == 0 {
		ctxLen = m.Hparams.Context
	}
	if ctxLen > m.Hparams.Context {
		return nil, fmt.Errorf("engine: a context of %d positions is longer than the model's %d", ctxLen, m.Hparams.Context)
	}
	s := &Session{m: m, ctxLen: ctxLen, state: make([]layerState, m.Hparams.Layers), be: m.be}
	for il := range s.state {
		k, v := m.kvWidths(il)
		s.state[il].k = m.be.NewKV(m.kvK, k, ctxLen)
		s.state[il].v = m.be.NewKV(m.kvV, v, ctxLen)
	}
	s.scratch.use = s.runExpert
	return s, nil
}

// Pos is the number of positions evaluated so far.
func (s *Session) Pos() int { return s.n }

// ContextLen is the most positions the session holds.
func (s *Session) ContextLen() int { return s.ctxLen }

// Stats returns the session's compute counters.
func (s *Session) Stats() EvalStats { return s.stats }

// ContextError reports input that does not fit the context.
type ContextError struct {
	Have, Add, Max int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("engine: %d more tokens after %d do not fit the context of %d", e.Add, e.Have, e.Max)
}

// Eval appends tokens to the sequence and returns the logits after each
// of them (all true: len(tokens) × vocab values) or after the last only.
// The logits are the session's own buffer, valid until its next
// evaluation (as llama.cpp's llama_get_logits): a caller that keeps them
// copies them. Decoding a token allocates nothing. Sessions of one model
// may be evaluated from several goroutines: their passes take turns.
func (s *Session) Eval(ctx context.Context, tokens []int, all bool) ([]float32, error) {
	h := s.m.Hparams
	if len(tokens) == 0 {
		return nil, fmt.Errorf("engine: nothing to evaluate")
	}
	if s.n+len(tokens) > s.ctxLen {
		return nil, &ContextError{Have: s.n, Add: len(tokens), Max: s.ctxLen}
	}
	for i, t := range tokens {
		if t < 0 || t >= h.Vocab {
			return nil, fmt.Errorf("engine: token %d (input position %d) is outside the vocabulary of %d", t, i, h.Vocab)
		}
	}
	start := time.Now()
	defer func() { s.stats.Forward += time.Since(start) }()
	if err := s.grow(s.n+len(tokens), len(tokens) > 1); err != nil {
		return nil, err
	}
	s.m.passes.Lock()
	defer s.m.passes.Unlock()
	s.out = s.out[:0]
	B := s.m.batch
	for lo := 0; lo < len(tokens); lo += B {
		hi := min(lo+B, len(tokens))
		logits, err := s.runStep(ctx, tokens[lo:hi], all || hi == len(tokens), all)
		if err != nil {
			return nil, err
		}
		s.out = append(s.out, logits...)
	}
	return s.out, nil
}

// Reserve makes room in the session's cache for n positions at once (at
// most its context), so that evaluating up to them never grows it: a
// caller that knows the prompt and the tokens it will generate reserves
// exactly what they take.
func (s *Session) Reserve(n int) error { return s.grow(min(n, s.ctxLen), true) }

// grow makes room for n positions in every layer's cache: exactly n, or,
// for a decoded token, by a quarter more than held.
func (s *Session) grow(n int, exact bool) error {
	for i := range s.state {
		st := &s.state[i]
		if err := st.k.Reserve(n, exact); err != nil {
			return err
		}
		if err := st.v.Reserve(n, exact); err != nil {
			return err
		}
	}
	return nil
}

// runStep runs one forward pass as one step of the sequence: complete, or,
// when it fails or is cancelled part way, undone (abortStep), so that the
// session stays at its last complete position.
func (s *Session) runStep(ctx context.Context, tokens []int, last, all bool) ([]float32, error) {
	if err := s.beginStep(); err != nil {
		return nil, err
	}
	logits, err := s.forward(ctx, tokens, last, all)
	if err != nil {
		s.abortStep()
	}
	return logits, err
}

// forward runs one batch; it returns logits for every position (all) or
// the last (last), or none.
func (s *Session) forward(ctx context.Context, tokens []int, last, all bool) ([]float32, error) {
	m, h, be := s.m, s.m.Hparams, s.be
	T, D := len(tokens), h.Embd
	s.beginArena(s.ownArena())
	x := s.step.Tensor(T * D)
	if err := be.Embed(x, &m.tokEmbd, tokens); err != nil {
		return nil, err
	}
	buf := s.step.Tensor(T * D)
	if c, ok := m.experts.(batchClock); ok {
		c.startBatch(T)
	}
	if err := s.layers(ctx, x, buf, T); err != nil {
		return nil, err
	}
	if s.Trace != nil {
		if err := s.flushTrace(T); err != nil {
			return nil, err
		}
	}
	if pf, ok := m.experts.(Prefetcher); ok {
		if err := s.guessAcross(ctx, pf, x.Rows(T-1, T, D), 1); err != nil {
			return nil, err
		}
	}
	var logits []float32
	switch {
	case all:
		logits = s.outputRows(x, T)
		if err := s.checkLogits(logits, s.n); err != nil {
			return nil, err
		}
	case last:
		logits = s.outputRows(x.Rows(T-1, T, D), 1)
		if err := s.checkLogits(logits, s.n+T-1); err != nil {
			return nil, err
		}
	}
	if err := be.Err(); err != nil {
		return nil, err
	}
	// Only a complete step moves the position: abortStep undoes one that
	// failed before here.
	s.n += T
	s.stats.Positions += T
	return logits, nil
}

// ownArena is the session's scratch, made on its first step.
func (s *Session) ownArena() Arena {
	if s.ar == nil {
		s.ar = s.be.NewArena()
	}
	return s.ar
}

// beginArena starts a step on arena a (the session's own, or a batch's
// lead's): everything the previous step allocated from it is released.
func (s *Session) beginArena(a Arena) {
	a.Reset()
	s.step = a
}

// outputRows is the output head over n rows of final hidden state: the
// output norm, then the logits, n × vocab, read back to the host (valid
// until the step's arena is reset).
func (s *Session) outputRows(x Tensor, n int) []float32 {
	m, h, be := s.m, s.m.Hparams, s.be
	D := h.Embd
	hn := s.step.Tensor(n * D)
	be.RMSNorm(hn, x, &m.outNorm, h.RMSEps, n, D)
	logits := s.step.Tensor(n * h.Vocab)
	be.MulMat(logits, &m.output, be.Input(s.step, hn, D, n))
	return be.Read(logits)
}

func addBias(y, b []float32) {
	if b == nil {
		return
	}
	for i := range y {
		y[i] += b[i%len(b)]
	}
}

// moeScratch is the routed-expert block's working memory. The session
// keeps it so that every layer of every step reuses the same buffers
// instead of allocating its own: a decode step runs this block once per
// layer, and each allocation would be garbage a few microseconds later.
type moeScratch struct {
	logits  []float32 // T × E router probabilities
	order   []int     // E expert ids, sorted per token
	sel     []float32 // E selection scores (biased, group-masked)
	guess   []float32 // T × E next-layer router logits, for prefetch
	picked  []bool    // per expert: guessed for some row
	guessed []int     // the guess: its experts in id order
	across  []float32 // the final hidden state's last row, normed, for prefetch across steps

	groupScore []float32
	groupOrder []int
	ids        []int         // T × K chosen experts, best first
	weights    []float32     // T × K mixing weights
	margins    []float32     // T top-k margins
	experts    []int         // the distinct chosen experts, in router order
	uses       [][]int       // per expert id: t·K+slot of each use
	from       []trace.Level // per expert id: where it was served from
	contrib    []float32     // T × K × D weighted expert outputs
	devSel     []float32     // T × K expert ids (as float bits), then their weights, for a device

	stack []Tensor // kimi-k3's residual checkpoints

	in, up, gate, act, down []float32
	sub                     actSet
	// The fetched expert's matrices, here rather than on the stack
	// because the matrix products' workers keep pointers to them.
	upM, gateM, downM matrix

	// The layer being computed, for runExpert, which the expert source
	// calls back; use is s.runExpert, bound once so that passing it
	// allocates nothing.
	layer *layer
	hbuf  []float32 // the layer's normalised input, T × D
	use   func(expert int, w Expert) error
}

// layers runs every layer over the T rows of x, leaving in x what the
// output norm reads.
func (s *Session) layers(ctx context.Context, x, buf Tensor, T int) error {
	if s.m.Hparams.ResBlockSize > 0 {
		return s.residualLayers(ctx, x, buf, T)
	}
	mark := s.step.Mark()
	for il := range s.m.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.step.Rewind(mark) // the last layer's activations are done with
		if err := s.attention(il, x, buf, T); err != nil {
			return err
		}
		if err := s.ffn(ctx, il, x, buf, T); err != nil {
			return err
		}
		if err := s.checkLayer(x, T, il, s.n); err != nil {
			return err
		}
	}
	return nil
}

// ffn adds one layer's feed-forward block to x: a dense FFN, or the
// routed experts plus any shared experts.
func (s *Session) ffn(ctx context.Context, il int, x, hbuf Tensor, T int) error {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	D := h.Embd
	be.RMSNorm(hbuf, x, &L.ffnNorm, h.RMSEps, T, D)
	out, err := s.ffnOut(ctx, il, hbuf, T)
	if err != nil {
		return err
	}
	be.Add(x, out, x, T*D)
	return nil
}

// ffnOut is one layer's feed-forward block over the normalised input hbuf
// (T rows of D): a dense FFN, or the routed experts plus any shared
// experts.
func (s *Session) ffnOut(ctx context.Context, il int, hbuf Tensor, T int) (Tensor, error) {
	be, h := s.be, s.m.Hparams
	L := &s.m.layers[il]
	D := h.Embd
	in := be.Input(s.step, hbuf, D, T)
	if L.dense != nil {
		return s.denseFFN(L.dense, in, T), nil
	}
	var shared Tensor
	if L.shared != nil {
		shared = s.denseFFN(L.shared, in, T)
	}
	if L.sharedGate.rows > 0 {
		// qwen35moe scales the shared expert by sigmoid(gate·h) per token.
		g := s.step.Tensor(T)
		be.MulMat(g, &L.sharedGate, in)
		be.ScaleRowsSigmoid(shared, g, T, D)
	}
	if L.latent != nil {
		return s.latentMoE(ctx, il, in, hbuf, shared, T)
	}
	out := s.step.Tensor(T * D)
	return out, s.moe(ctx, il, in, hbuf, shared, out, T)
}

// denseFFN computes down(silu(gate·h)·up·h) for the T rows of in, as
// llama.cpp's build_ffn with LLM_FFN_SILU and LLM_FFN_PAR.
func (s *Session) denseFFN(f *ffnWeights, in Input, T int) Tensor {
	be := s.be
	F, D := f.up.rows, f.down.rows
	up, gate := s.step.Tensor(T*F), s.step.Tensor(T*F)
	be.MulMat(up, &f.up, in)
	be.MulMat(gate, &f.gate, in)
	act := GLU{Kind: GLUSwiGLU}
	if st := s.m.Hparams.situ; st != nil {
		act = GLU{Kind: GLUSiTU, Beta: st.beta, LinearBeta: st.linearBeta}
	}
	be.GLU(act, gate, gate, up, T, F)
	out := s.step.Tensor(T * D)
	be.MulMat(out, &f.down, be.Input(s.step, gate, F, T))
	return out
}

// moe writes one layer's routed-expert block (plus the shared experts'
// output, when not empty) to out: the router reads in (the normalised
// input), the experts read x (T rows of the expert input width: the same
// input, or kimi-k3's latent projection of it), on the device when it
// holds them, else on the host, whose weighted sum goes back to the
// backend.
func (s *Session) moe(ctx context.Context, il int, in Input, x, shared, out Tensor, T int) error {
	h, be := s.m.Hparams, s.be
	sc := &s.scratch
	if b, de := s.deviceExperts(il); de != nil {
		s.moeOnDevice(b, de, il, in, x, shared, out, T)
		return nil
	}
	s.route(il, in, T)
	if pf, ok := s.m.experts.(Prefetcher); ok {
		if guess := s.guessNext(il, in, T); guess != nil {
			if err := pf.Prefetch(ctx, il+1, guess); err != nil {
				return err
			}
		}
	}
	sc.layer, sc.hbuf = &s.m.layers[il], be.Read(x)
	sc.contrib = grow(sc.contrib, T*h.ExpertsUsed*h.expertIn())
	if err := s.m.experts.Fetch(ctx, il, sc.experts, sc.use); err != nil {
		return err
	}
	if s.Trace != nil {
		s.recordRoutes(il, T)
	}
	var sh []float32
	if shared.Len() > 0 {
		sh = be.Read(shared)
	}
	host := be.Read(out)
	s.addExperts(host, sh, T)
	be.Write(out, host)
	return nil
}

// route runs the router on the normalised input in, chooses each token's
// experts on the host, and lists which tokens use each chosen expert.
func (s *Session) route(il int, in Input, T int) {
	m, h, be := s.m, s.m.Hparams, s.be
	L := &m.layers[il]
	E, K := h.Experts, h.ExpertsUsed
	sc := &s.scratch
	lt := s.step.Tensor(T * E)
	be.MulMat(lt, &L.router, in)
	be.AddBias(lt, &L.routerBias, T)
	sc.logits = be.Read(lt)

	sc.order = grow(sc.order, E)
	sc.ids = grow(sc.ids, T*K)
	sc.weights = grow(sc.weights, T*K)
	sc.margins = grow(sc.margins, T)
	if len(sc.uses) != E {
		sc.uses, sc.from = make([][]int, E), make([]trace.Level, E)
	}
	for e := range sc.uses {
		sc.uses[e] = sc.uses[e][:0]
	}
	sc.experts = sc.experts[:0]
	for t := range T {
		ids := sc.ids[t*K : (t+1)*K]
		sc.margins[t] = s.pickExperts(L, sc.logits[t*E:(t+1)*E], ids, sc.weights[t*K:(t+1)*K])
		for slot, e := range ids {
			if len(sc.uses[e]) == 0 {
				sc.experts = append(sc.experts, e)
			}
			sc.uses[e] = append(sc.uses[e], t*K+slot)
		}
	}
}

// runExpert is called by the expert source with each chosen expert's
// weights: it computes the expert for every token that chose it and stores
// each output, scaled by its routing weight, at that use's place in
// contrib.
func (s *Session) runExpert(e int, w Expert) error {
	sc := &s.scratch
	D, K := s.m.Hparams.expertIn(), s.m.Hparams.ExpertsUsed
	sc.from[e] = w.From
	uses := sc.uses[e]
	n := len(uses)
	sc.in = grow(sc.in, n*D)
	for i, u := range uses {
		t := u / K
		copy(sc.in[i*D:(i+1)*D], sc.hbuf[t*D:(t+1)*D])
	}
	if err := s.expertFFN(w, n); err != nil {
		return err
	}
	for i, u := range uses {
		wt := sc.weights[u]
		dst := sc.contrib[u*D : (u+1)*D]
		for d := range dst {
			dst[d] = sc.down[i*D+d] * wt
		}
	}
	return nil
}

// expertFFN runs one expert's feed-forward network over the n rows of
// scratch.in, leaving the outputs in scratch.down: down(swiglu(gate, up)),
// or down(silu(up)) for an expert without a gate.
func (s *Session) expertFFN(w Expert, n int) error {
	m, sc, L := s.m, &s.scratch, s.scratch.layer
	D, F := m.Hparams.expertIn(), L.upExp.rows
	var err error
	sc.sub.reset(sc.in, D, n)
	if sc.upM, err = L.upExp.with(w.Up); err != nil {
		return err
	}
	sc.up = grow(sc.up, n*F)
	m.work.mulMat(&sc.upM, sc.sub.get(sc.upM.vt), sc.up)
	if w.UpBias != nil {
		addBiasBytes(sc.up, w.UpBias)
	}
	sc.act = grow(sc.act, n*F)
	if w.Gate != nil {
		if sc.gateM, err = L.gateExp.with(w.Gate); err != nil {
			return err
		}
		sc.gate = grow(sc.gate, n*F)
		m.work.mulMat(&sc.gateM, sc.sub.get(sc.gateM.vt), sc.gate)
		if w.GateBias != nil {
			addBiasBytes(sc.gate, w.GateBias)
		}
		act := swiglu
		switch {
		case m.Hparams.oaiSwiGLU:
			act = swigluOAI
		case m.Hparams.situ != nil:
			act = m.Hparams.situ.apply
		}
		for i := range n {
			act(sc.act[i*F:(i+1)*F], sc.gate[i*F:(i+1)*F], sc.up[i*F:(i+1)*F])
		}
	} else {
		for i := range n {
			siluInto(sc.act[i*F:(i+1)*F], sc.up[i*F:(i+1)*F])
		}
	}
	if sc.downM, err = L.downExp.with(w.Down); err != nil {
		return err
	}
	sc.sub.reset(sc.act, F, n)
	sc.down = grow(sc.down, n*D)
	m.work.mulMat(&sc.downM, sc.sub.get(sc.downM.vt), sc.down)
	if w.DownBias != nil {
		addBiasBytes(sc.down, w.DownBias)
	}
	return nil
}

// recordRoutes adds the layer's routing decisions to the trace events,
// token by token in rank order.
func (s *Session) recordRoutes(il, T int) {
	sc := &s.scratch
	K := s.m.Hparams.ExpertsUsed
	for t := range T {
		for rank, e := range sc.ids[t*K : (t+1)*K] {
			s.events = append(s.events, RouteEvent{Pos: s.n + t, Layer: il, Expert: e, Rank: rank, Prefill: T > 1, From: sc.from[e], Margin: sc.margins[t]})
		}
	}
}

// addExperts writes to out each token's weighted expert outputs, summed
// in the router's order whatever order the experts arrived in, plus the
// shared experts' output when there is one.
func (s *Session) addExperts(out, shared []float32, T int) {
	D, K := s.m.Hparams.expertIn(), s.m.Hparams.ExpertsUsed
	contrib := s.scratch.contrib
	for t := range T {
		acc := contrib[t*K*D : t*K*D+D]
		for slot := 1; slot < K; slot++ {
			c := contrib[(t*K+slot)*D : (t*K+slot+1)*D]
			for d := range acc {
				acc[d] += c[d]
			}
		}
		if shared != nil {
			sh := shared[t*D : (t+1)*D]
			for d := range acc {
				acc[d] += sh[d]
			}
		}
		copy(out[t*D:(t+1)*D], acc)
	}
}

// grow returns b with length n, reusing its memory when it is big enough
// and otherwise making room for twice what it held, so that a buffer
// sized by a growing sequence is not made again at every position; the
// contents are not kept.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n, max(n, 2*cap(b)))
	}
	return b[:n]
}

// flushTrace hands the batch's routing decisions to Trace, position by
// position; within a layer they were recorded in rank order.
func (s *Session) flushTrace(T int) error {
	ev := s.events
	s.events = s.events[:0]
	slices.SortStableFunc(ev, func(a, b RouteEvent) int { return cmp.Or(a.Pos-b.Pos, a.Layer-b.Layer, a.Rank-b.Rank) })
	for lo := 0; lo < len(ev); {
		hi := lo
		for hi < len(ev) && ev[hi].Pos == ev[lo].Pos {
			hi++
		}
		if err := s.Trace(ev[lo].Pos, ev[lo:hi]); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}
