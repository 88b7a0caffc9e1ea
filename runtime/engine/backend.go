package engine

// A Backend runs the operations of a forward pass over tensors it holds.
// The engine composes every architecture's forward pass from them, once,
// for every backend: the CPU backend (cpu.go) computes in RAM with the
// kernels that are bit for bit llama.cpp's; a device backend holds its
// weights, activations and state in device memory. The engine reads back
// to the host only what it decides on — router probabilities, to choose
// experts; the input of a MoE block whose experts the expert source
// computes; a step's numeric check; logits — and writes back the experts'
// output. Everything else stays where the backend keeps it.
//
// Shapes are rows of floats: an operation on rows × width values reads
// and writes tensors of at least that many. A tensor from a step's arena
// lives until the arena is reset at the next step; a sequence's state
// (KVStore, RecurrentStore) lives until freed.
type Backend interface {
	// Name says which backend this is.
	Name() string
	// Err is the first error an operation met (a device lost or out of
	// memory), which stays; nil for the CPU backend, whose operations
	// cannot fail. A step whose backend has an error fails with it.
	Err() error
	// Prepare makes a weight matrix or vector usable by the operations:
	// the CPU backend uses the bytes where they are, a device backend
	// uploads them.
	PrepareMatrix(m *matrix) error
	PrepareVector(v *vector) error
	// NewArena makes the scratch a forward pass allocates from.
	NewArena() Arena
	// NewKV makes one layer's cache of rows of width values, in type t,
	// holding at most limit rows.
	NewKV(t KVType, width, limit int) KVStore
	// NewRecurrent makes a linear-attention layer's state: the
	// convolution's last inputs (conv floats) and the heads' matrices
	// (ssm floats), zeroed.
	NewRecurrent(conv, ssm int) (RecurrentStore, error)

	// Read returns t's values on the host, valid until t's arena is reset
	// (for the CPU backend, t's own memory); Write sets them.
	Read(t Tensor) []float32
	Write(t Tensor, src []float32)

	// Embed writes the rows of the embedding matrix for tokens to dst.
	Embed(dst Tensor, emb *matrix, tokens []int) error
	// Input prepares rows × cols activations x for products with weight
	// matrices: the conversion each matrix's dot product takes is made
	// once and shared, as ggml shares it between q, k and v. It is valid
	// until x changes or the arena is reset.
	Input(a Arena, x Tensor, cols, rows int) Input
	// MulMat writes w·x for each row of in to dst (rows × w.rows).
	MulMat(dst Tensor, w *matrix, in Input)
	// AddBias adds b to each row of y (rows × len(b)).
	AddBias(y Tensor, b *vector, rows int)
	// Add sets dst = a + b elementwise over n values; dst may be a or b.
	Add(dst, a, b Tensor, n int)
	// Mul sets dst = a · b elementwise over n values; dst may be a or b.
	Mul(dst, a, b Tensor, n int)
	// Copy copies rows of width values: src's row r, at srcOff +
	// r·srcStride, to dst's at dstOff + r·dstStride.
	Copy(dst Tensor, dstOff, dstStride int, src Tensor, srcOff, srcStride, width, rows int)
	// Sigmoid sets x = σ(x) over n values.
	Sigmoid(x Tensor, n int)
	// GateSigmoid sets x *= σ(g) elementwise over n values.
	GateSigmoid(x, g Tensor, n int)
	// ScaleRowsSigmoid multiplies row r of x (rows × width) by σ(g[r]).
	ScaleRowsSigmoid(x, g Tensor, rows, width int)
	// RMSNorm writes each row of x (rows × width), RMS-normalised and
	// weighted by w, to dst; dst may be x.
	RMSNorm(dst, x Tensor, w *vector, eps float32, rows, width int)
	// L2Norm scales each row of x (rows × width) to unit length.
	L2Norm(x Tensor, eps float32, rows, width int)
	// GLU writes act(gate, up) to dst, row by row (rows × width).
	GLU(act GLU, dst, gate, up Tensor, rows, width int)
	// SiLU writes silu(x) to dst, row by row (rows × width).
	SiLU(dst, x Tensor, rows, width int)
	// Rope rotates each head of each row of x in place at the row's
	// position.
	Rope(a Arena, x Tensor, r RopeJob)
	// KVAppend appends rows of x to a cache.
	KVAppend(c KVStore, x Tensor, rows int) error
	// Attend writes softmax(q·k·scale)·v for rows new positions to dst
	// (rows × heads × vDim): row t is at position pos0+t and attends over
	// the cache's rows up to it (or the window before it). v may be k.
	Attend(a Arena, dst, q Tensor, k, v KVStore, g AttnGeom, pos0, rows int)
	// ConvSiLU runs a causal convolution of taps per channel over rows of
	// channels, after the taps−1 rows state keeps (and then keeps the
	// last of), then SiLU: dst is rows × channels.
	ConvSiLU(a Arena, dst, state Tensor, kernel *vector, x Tensor, channels, taps, rows int)
	// DeltaGates turns β and α logits (rows × heads) into the delta
	// rule's β = σ(β) and decay g = softplus(α + dtBias)·a, per head.
	DeltaGates(beta, alpha Tensor, dtBias, a *vector, rows, heads int)
	// DeltaNet runs the gated delta rule over rows tokens, in order, for
	// each value head, as DeltaJob lays out its inputs.
	DeltaNet(a Arena, state Tensor, j DeltaJob)
	// KDADecay turns the decay gate's projection g (rows × heads·dim)
	// into Kimi delta attention's per-channel decay.
	KDADecay(g Tensor, dtBias, a *vector, lowerBound float32, rows, heads, dim int)
	// KDA runs Kimi delta attention's rule (a decay per channel) over
	// rows tokens for each head.
	KDA(a Arena, state Tensor, j DeltaJob)
	// ResMix writes Kimi-K3's residual mix of the checkpoints and the
	// running sum cur (rows × width each) to dst.
	ResMix(a Arena, dst, cur Tensor, checkpoints []Tensor, score *vector, eps float32, rows, width int)
	// CheckFinite finds the first value of rows × width that is NaN,
	// infinite, or too large for the next RMSNorm to square in float32;
	// i is −1 when there is none.
	CheckFinite(x Tensor, n int) (i int, v float32)
}

// Arena is a forward pass's scratch: tensors that live until Reset, or
// until a Rewind to a mark taken before them. A pass marks the arena
// after the tensors that cross layers (the residual stream) and rewinds
// to the mark as each layer begins, so the scratch holds one layer's
// activations, whatever the depth of the model.
type Arena interface {
	// Tensor returns n zeroed floats.
	Tensor(n int) Tensor
	// Mark is the point Rewind goes back to.
	Mark() ArenaMark
	// Rewind releases every tensor handed out since mark.
	Rewind(mark ArenaMark)
	// Reset lets the next step reuse everything.
	Reset()
	// Free returns the arena's memory.
	Free()
}

// ArenaMark is a point in an arena's hand-outs (Arena.Mark).
type ArenaMark struct{ buf, used, total, inputs int }

// Input is activations prepared for matrix products (Backend.Input).
type Input interface{ rows() int }

// KVStore is one layer's cached keys or values of one sequence.
type KVStore interface {
	// Len is the rows held.
	Len() int
	// Reserve makes room for n rows: exactly, or with room to grow.
	Reserve(n int, exact bool) error
	// Truncate drops the rows past the first n.
	Truncate(n int)
	// Clone copies the first n rows into a store of their exact size.
	Clone(n int) (KVStore, error)
	// Bytes is the memory held.
	Bytes() int64
	Free()
	// Type is the cache's type.
	Type() KVType
	// SetLimit bounds the rows (a clone resumed into a new context).
	SetLimit(n int)
}

// RecurrentStore is a linear-attention layer's state of one sequence,
// with the copy that undoes a step that did not complete.
type RecurrentStore interface {
	// Conv and SSM are the state, as tensors the operations update.
	Conv() Tensor
	SSM() Tensor
	// Save keeps a copy of the state; Restore puts it back.
	Save() error
	Restore()
	Clone() (RecurrentStore, error)
	Bytes() int64
	Free()
}

// Tensor is a run of float32 values a backend holds: n values from off in
// its buffer.
type Tensor struct {
	buf    *tbuf
	off, n int
}

// tbuf is a backend's buffer: host memory for the CPU backend, a device
// allocation for another.
type tbuf struct {
	host []float32
	dev  any
}

// Len is the number of values.
func (t Tensor) Len() int { return t.n }

// Slice is values [lo, hi) of t.
func (t Tensor) Slice(lo, hi int) Tensor {
	if lo < 0 || hi > t.n || lo > hi {
		panic("engine: tensor slice out of range")
	}
	return Tensor{buf: t.buf, off: t.off + lo, n: hi - lo}
}

// Rows is rows [lo, hi) of t, a row being width values.
func (t Tensor) Rows(lo, hi, width int) Tensor { return t.Slice(lo*width, hi*width) }

// f32 is the values, for the CPU backend.
func (t Tensor) f32() []float32 { return t.buf.host[t.off : t.off+t.n : t.off+t.n] }

// hostTensor wraps host memory as a tensor of the CPU backend.
func hostTensor(f []float32) Tensor { return Tensor{buf: &tbuf{host: f}, n: len(f)} }

// vector is a weight vector (a norm's weights, a bias, a convolution
// kernel) with the backend's copy of it.
type vector struct {
	f   []float32
	dev any
}

func (v *vector) present() bool { return v != nil && v.f != nil }

// GLU is a gated activation: SwiGLU (silu(gate)·up), gpt-oss's clamped
// SwiGLU, or Kimi-K3's situ with its two scales.
type GLU struct {
	Kind             GLUKind
	Beta, LinearBeta float32 // situ's
}

// GLUKind names a gated activation.
type GLUKind uint8

// The gated activations.
const (
	GLUSwiGLU GLUKind = iota
	GLUSwiGLUOAI
	GLUSiTU
)

// RopeJob says where RoPE turns the values of x: rows of rowStride
// floats, each holding heads heads headStride apart, whose first dims
// values from offset are rotated (in pairs, NEOX or normal style), at
// position pos0+row.
type RopeJob struct {
	Rows, RowStride, Heads, HeadStride, Offset int
	Dims                                       int
	Pos0                                       int
	Base                                       float32
	Scaling                                    *ropeScaling
	Neox                                       bool
	Sections                                   []int // multi-section RoPE, or nil
}

// DeltaJob lays out a delta rule's inputs: rows tokens; per head, the
// query, key and value (state-size vectors) at q/k/vOff + head·size in
// row t of conv (convStride floats a row), the value head h pairing with
// key head h mod keyHeads; its decay (one per head in g, or per channel
// for KDA: g has rows × heads·size) and β (rows × heads); its output at
// t·outStride + head·size.
type DeltaJob struct {
	Conv, G, Beta, Out           Tensor
	Rows, Heads, KeyHeads, Size  int
	ConvStride, QOff, KOff, VOff int
	OutStride                    int
}

// AttnGeom is the shape of one attention: how queries find their keys
// and values in the cache.
type AttnGeom struct {
	Heads, Group int // query heads, and query heads per key-value head
	KDim, VDim   int // one head's key and value widths
	QStride      int // floats of one row of queries
	Scale        float32
	Window       int     // attend to the last Window positions only; 0 for all
	Sinks        *vector // per query head sink logits, or nil
}
