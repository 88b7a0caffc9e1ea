package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/trace"
)

// ExpertLayout is the types of one MoE layer's per-expert tensors.
// Gate is gguf.TypeCount when the layer has no gate (a llama expert then
// computes silu(up)). A fused ffn_gate_up_exps tensor is served as its
// gate and up halves, so it looks like separate ones here.
type ExpertLayout struct {
	Gate, Up, Down gguf.Type
	// Biases is true when each expert has F32 biases on its gate, up and
	// down outputs (gpt-oss).
	Biases bool
}

// Expert is one routed expert's weights: the bytes of its slices of the
// layer's gate [D, F], up [D, F] and down [F, D] tensors, in their file
// types, and of its biases [F], [F] and [D] (F32) when the layer has
// them. They are valid only during the call they are passed to.
type Expert struct {
	Gate, Up, Down []byte
	// GateBias, UpBias and DownBias are nil unless the layout has biases.
	GateBias, UpBias, DownBias []byte
	// From is where the bytes were served from.
	From trace.Level
}

// splitGateUp serves a fused gate_up slice ([D, 2F]: F gate rows, then F
// up rows) as its gate and up halves; quant blocks never cross rows, so
// each half is a whole [D, F] matrix.
func splitGateUp(b []byte) (gate, up []byte) { return b[:len(b)/2], b[len(b)/2:] }

// ExpertSource serves routed experts. It decides where an expert's bytes
// come from, never which experts run: the router has chosen them.
type ExpertSource interface {
	// Layout returns the types of a MoE layer's expert tensors.
	Layout(layer int) ExpertLayout
	// Fetch makes each of experts (distinct ids) of layer available and
	// calls use once for each, on the calling goroutine, in an order
	// that may depend on caching and I/O: cached experts first, then
	// misses as their reads land. It returns use's first error, or an
	// error naming the layer and expert whose bytes could not be read or
	// failed their checksum; no expert is passed to use unverified.
	Fetch(ctx context.Context, layer int, experts []int, use func(expert int, w Expert) error) error
	// Stats returns the counters since the source was opened.
	Stats() SourceStats
	// Close releases the source's files and memory.
	Close() error
}

// SourceStats count where routed experts were served from.
type SourceStats struct {
	Source    string        `json:"source"` // "resident" or "pack"
	Fetches   uint64        `json:"expert_fetches"`
	Hits      uint64        `json:"cache_hits"`   // served from RAM (every fetch, for resident)
	Misses    uint64        `json:"cache_misses"` // read from the pack
	Evictions uint64        `json:"evictions"`
	BytesRead uint64        `json:"bytes_read"`
	Reads     uint64        `json:"reads"`
	IOWait    time.Duration `json:"io_wait_ns"` // time spent waiting for reads with nothing to compute
	// Speculative prefetch (pack sources): the experts guessed for the
	// next layer that were not cached, how many of those the router then
	// picked, the picked experts that were not cached, the guesses read
	// ahead, how many of those were used, and the bytes read for guesses
	// nobody used (included in BytesRead).
	PrefetchGuessed     uint64 `json:"prefetch_guessed,omitempty"`
	PrefetchGuessedUsed uint64 `json:"prefetch_guessed_used,omitempty"`
	PrefetchNeeded      uint64 `json:"prefetch_needed,omitempty"`
	PrefetchReads       uint64 `json:"prefetch_reads,omitempty"`
	PrefetchUsed        uint64 `json:"prefetch_used,omitempty"`
	PrefetchWastedBytes uint64 `json:"prefetch_wasted_bytes,omitempty"`
	// Of the reads ahead, those guessed for the next step's first MoE
	// layer from the final hidden state, and how many of those were used.
	PrefetchAcrossReads uint64 `json:"prefetch_across_reads,omitempty"`
	PrefetchAcrossUsed  uint64 `json:"prefetch_across_used,omitempty"`
	// Cache geometry (pack sources).
	CacheSlots int    `json:"cache_slots,omitempty"`
	CacheBytes int64  `json:"cache_bytes,omitempty"`
	Policy     string `json:"cache_policy,omitempty"`
	RecordSize int64  `json:"record_bytes,omitempty"`
}

// residentExperts holds every expert in RAM: the oracle the streamed
// sources are compared with.
type residentExperts struct {
	layers []residentLayer
	stats  SourceStats
}

type residentLayer struct {
	gate *matrix // nil when the layer has no gate
	up   matrix
	down matrix
	// gateUp holds the fused gate_up tensor, when the file has one (gate
	// and up are then nil and empty).
	gateUp *matrix
	// bias holds the F32 gate, up and down bias tensors ([F, E], [F, E],
	// [D, E]), or nils.
	bias [3][]byte
	ff   int // F, the width of the gate and up biases
}

// loadResidentExperts reads every MoE layer's stacked expert tensors.
func loadResidentExperts(l *loader, h *Hparams) (*residentExperts, error) {
	r := &residentExperts{layers: make([]residentLayer, h.Layers), stats: SourceStats{Source: "resident"}}
	D, E := h.expertIn(), h.Experts
	for i := range r.layers {
		if !h.isMoE(i) {
			continue
		}
		F := h.expertFF(i)
		p := fmt.Sprintf("blk.%d.", i)
		rl := &r.layers[i]
		var err error
		if _, _, ok := l.tab.find(p + "ffn_gate_up_exps.weight"); ok {
			g, err := l.matrix(p+"ffn_gate_up_exps.weight", D, 2*F, E)
			if err != nil {
				return nil, err
			}
			rl.gateUp = &g
		} else {
			if _, _, ok := l.tab.find(p + "ffn_gate_exps.weight"); ok || h.Arch != "llama" {
				g, err := l.matrix(p+"ffn_gate_exps.weight", D, F, E)
				if err != nil {
					return nil, err
				}
				rl.gate = &g
			}
			if rl.up, err = l.matrix(p+"ffn_up_exps.weight", D, F, E); err != nil {
				return nil, err
			}
		}
		if rl.down, err = l.matrix(p+"ffn_down_exps.weight", F, D, E); err != nil {
			return nil, err
		}
		rl.ff = F
		if h.Arch == "gpt-oss" {
			for b, name := range []string{"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"} {
				n := F
				if b == 2 {
					n = D
				}
				if rl.bias[b], err = l.biasTensor(p+name, n, E); err != nil {
					return nil, err
				}
			}
		}
	}
	return r, nil
}

func (r *residentExperts) Layout(layer int) ExpertLayout {
	rl := &r.layers[layer]
	el := ExpertLayout{Gate: gguf.TypeCount, Up: rl.up.typ, Down: rl.down.typ, Biases: rl.bias[0] != nil}
	switch {
	case rl.gateUp != nil:
		el.Gate, el.Up = rl.gateUp.typ, rl.gateUp.typ
	case rl.gate != nil:
		el.Gate = rl.gate.typ
	}
	return el
}

func (r *residentExperts) Fetch(ctx context.Context, layer int, experts []int, use func(int, Expert) error) error {
	rl := &r.layers[layer]
	for _, e := range experts {
		w := Expert{Down: rl.down.slice(e).data, From: trace.LevelResident}
		switch {
		case rl.gateUp != nil:
			w.Gate, w.Up = splitGateUp(rl.gateUp.slice(e).data)
		case rl.gate != nil:
			w.Gate, w.Up = rl.gate.slice(e).data, rl.up.slice(e).data
		default:
			w.Up = rl.up.slice(e).data
		}
		if rl.bias[0] != nil {
			w.GateBias, w.UpBias, w.DownBias = biasSlice(rl.bias[0], rl.ff, e), biasSlice(rl.bias[1], rl.ff, e), biasSlice(rl.bias[2], rl.down.rows, e)
		}
		r.stats.Fetches++
		r.stats.Hits++
		if err := use(e, w); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// biasSlice is expert e's slice of a stacked [n, E] F32 bias tensor.
func biasSlice(b []byte, n, e int) []byte { return b[e*n*4 : (e+1)*n*4] }

func (r *residentExperts) Stats() SourceStats { return r.stats }
func (r *residentExperts) Close() error       { r.layers = nil; return nil }
