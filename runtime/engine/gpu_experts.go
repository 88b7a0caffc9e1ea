package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/trace"
)

// ExpertPlacement says where a model on a device keeps its routed
// experts (Options.GPUExperts).
type ExpertPlacement string

const (
	// ExpertsAuto puts the routed experts in VRAM when every one of them
	// fits the budget with expertHeadroom of it left for the KV caches
	// and activations, and leaves them on the CPU otherwise, saying so in
	// a note.
	ExpertsAuto ExpertPlacement = ""
	// ExpertsVRAM puts them in VRAM, or fails Open with both sizes.
	ExpertsVRAM ExpertPlacement = "vram"
	// ExpertsCPU leaves them with the expert source on the CPU
	// (llama.cpp's --cpu-moe).
	ExpertsCPU ExpertPlacement = "cpu"
)

// ParseExpertPlacement reads auto, vram or cpu.
func ParseExpertPlacement(s string) (ExpertPlacement, error) {
	switch s {
	case "auto", "":
		return ExpertsAuto, nil
	case "vram", "cpu":
		return ExpertPlacement(s), nil
	}
	return "", fmt.Errorf("%q: want auto, vram or cpu", s)
}

// expertHeadroom is the part of the VRAM budget ExpertsAuto leaves to
// what grows after Open: the sessions' KV caches and activations.
const expertHeadroom = 0.10

// devExperts is one MoE layer's routed experts on the device: the stacks
// of every expert's gate, up and down matrices in the file's types (the
// gate nil when the experts have none), their F32 bias stacks (nil
// without biases: experts × F, × F, × D), the experts' count and their
// hidden width.
type devExperts struct {
	gate, up, down *gpu.Weights
	bias           [3]*gpu.Buffer
	experts, ff    int
}

func (de *devExperts) free() {
	for _, w := range []*gpu.Weights{de.gate, de.up, de.down} {
		if w != nil {
			w.Free()
		}
	}
	for _, b := range de.bias {
		if b != nil {
			b.Free()
		}
	}
}

// expertStack is the size of one layer's experts on the device.
type expertStack struct {
	matrix [3]int64 // gate (0 without), up, down: all experts
	bias   [3]int64 // the bias stacks, 0 without
}

func (s expertStack) total() int64 {
	return s.matrix[0] + s.matrix[1] + s.matrix[2] + s.bias[0] + s.bias[1] + s.bias[2]
}

// expertStacks sizes every MoE layer's experts as the device would hold
// them (a stack larger than one storage buffer is split into buffers of
// whole experts), or says why the device cannot: a type without a kernel,
// one expert larger than a storage buffer, an expert of an odd byte count
// (the kernels address the weights in 16-bit words).
func (m *Model) expertStacks(dev *gpu.Device) ([]expertStack, int64, error) {
	h := m.Hparams
	limit := int64(dev.Info().Limits.MaxStorageBufferRange)
	stacks := make([]expertStack, len(m.layers))
	var all int64
	for il := range m.layers {
		if !h.isMoE(il) {
			continue
		}
		L := &m.layers[il]
		for i, x := range []*matrix{&L.gateExp, &L.upExp, &L.downExp} {
			if x.rows == 0 {
				continue // no gate
			}
			if !gpu.CanMatMul(x.typ) {
				return nil, 0, fmt.Errorf("no kernel for %s weights (%s)", x.typ, x.name)
			}
			per := int64(x.bytes())
			if per%2 != 0 {
				return nil, 0, fmt.Errorf("%s: one expert is %d bytes, not a whole number of 16-bit words", x.name, per)
			}
			if per > limit {
				return nil, 0, fmt.Errorf("%s: one expert is %s, more than one storage buffer holds (%s)",
					x.name, iostreams.HumanBytes(per), iostreams.HumanBytes(limit))
			}
			stacks[il].matrix[i] = per * int64(h.Experts)
			if L.layout.Biases {
				stacks[il].bias[i] = 4 * int64(x.rows) * int64(h.Experts)
			}
		}
		all += stacks[il].total()
	}
	return stacks, all, nil
}

// expertsToDevice uploads every routed expert when the placement and
// the budget allow, reading them once through the expert source (a
// pack's are read from disk here, with progress); otherwise it leaves
// them on the CPU, in a note saying why when they were asked for or
// left out by the budget.
func (m *Model) expertsToDevice(ctx context.Context, b *gpuBackend, place ExpertPlacement, lm *loadMeter) error {
	h, dev := m.Hparams, b.dev
	if place == ExpertsCPU || h.MoELayers() == 0 || h.Experts == 0 {
		return nil
	}
	stacks, need, err := m.expertStacks(dev)
	if err != nil {
		if place == ExpertsVRAM {
			return fmt.Errorf("engine: the routed experts cannot go to %s: %w", dev.Info().Name, err)
		}
		m.Notes = append(m.Notes, fmt.Sprintf("GPU: the routed experts run on the CPU: %v", err))
		return nil
	}
	left := dev.Budget() - dev.Used()
	if place == ExpertsAuto {
		room := left - int64(expertHeadroom*float64(dev.Budget()))
		if need > room {
			m.Notes = append(m.Notes, fmt.Sprintf("GPU: the routed experts (%s) run on the CPU: the VRAM budget has %s left after the resident weights, of which %.0f%% of the budget is kept for the KV cache and activations (--gpu-experts vram to try anyway)",
				iostreams.HumanBytes(need), iostreams.HumanBytes(left), 100*expertHeadroom))
			return nil
		}
	} else if need > left {
		return &gpu.BudgetError{Device: dev.Info().Name, What: "the routed experts", Need: need, Budget: dev.Budget(), Used: dev.Used()}
	}
	lm.total += need
	b.experts = make([]*devExperts, len(m.layers))
	for il, st := range stacks {
		if st.total() == 0 {
			continue
		}
		de, err := m.uploadExperts(ctx, dev, il, st, lm)
		if err != nil {
			return err
		}
		b.experts[il] = de
		b.expertBytes += st.total()
		b.expertBytesPerToken += st.total() / int64(h.Experts) * int64(h.ExpertsUsed)
	}
	return nil
}

// uploadExperts gathers one layer's experts from the expert source into
// host stacks, one expert at a time, and uploads them.
func (m *Model) uploadExperts(ctx context.Context, dev *gpu.Device, il int, st expertStack, lm *loadMeter) (*devExperts, error) {
	h, L := m.Hparams, &m.layers[il]
	E := h.Experts
	mats := []*matrix{&L.gateExp, &L.upExp, &L.downExp}
	var host [3][]byte
	var bias [3][]float32
	for i := range 3 {
		host[i] = make([]byte, st.matrix[i])
		bias[i] = make([]float32, st.bias[i]/4)
	}
	for e := range E {
		err := m.experts.Fetch(ctx, il, []int{e}, func(_ int, w Expert) error {
			for i, src := range [][]byte{w.Gate, w.Up, w.Down} {
				per := st.matrix[i] / int64(E)
				if per == 0 {
					continue
				}
				if int64(len(src)) != per {
					return fmt.Errorf("engine: layer %d expert %d: %s is %d bytes, want %d", il, e, mats[i].name, len(src), per)
				}
				copy(host[i][int64(e)*per:], src)
			}
			for i, src := range [][]byte{w.GateBias, w.UpBias, w.DownBias} {
				per := len(bias[i]) / E
				if per == 0 {
					continue
				}
				if len(src) != 4*per {
					return fmt.Errorf("engine: layer %d expert %d: a bias of %d bytes, want %d", il, e, len(src), 4*per)
				}
				for j := range per {
					bias[i][e*per+j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	de := &devExperts{experts: E, ff: L.upExp.rows}
	ws := []**gpu.Weights{&de.gate, &de.up, &de.down}
	for i, x := range mats {
		if st.matrix[i] == 0 {
			continue
		}
		w, err := dev.UploadWeights(x.name, x.typ, x.rows, x.cols, E, host[i])
		if err == nil && len(bias[i]) > 0 {
			de.bias[i], err = dev.Alloc(int64(4*len(bias[i])), "a bias stack of routed experts")
			if err == nil {
				err = dev.WriteFloats(de.bias[i], 0, bias[i])
			}
		}
		*ws[i] = w
		if err != nil {
			de.free()
			return nil, err
		}
		if err := lm.add(int(st.matrix[i] + st.bias[i])); err != nil {
			de.free()
			return nil, err
		}
	}
	return de, nil
}

// moeOnDevice is moe's routed-expert block with the layer's experts in
// VRAM: the router's choice is made on the device (or, where its routing
// kernel cannot, on the host and sent up), each of the T·K routed rows is
// multiplied by its expert's matrices in one dispatch per matrix, and each
// token's rows are summed in the router's order, plus the shared experts'
// output. With a Trace, the choice is read back to be recorded.
func (s *Session) moeOnDevice(b *gpuBackend, de *devExperts, il int, in Input, x, shared, out Tensor, T int) {
	h := s.m.Hparams
	K, D, F := h.ExpertsUsed, h.expertIn(), de.ff
	n := T * K
	var sel Tensor
	if j, ok := s.deviceRouteJob(il, T); ok {
		sel = s.routeOnDevice(b, il, in, j)
		if s.Trace != nil {
			s.readRoutes(b, sel, T)
		}
	} else {
		s.route(il, in, T)
		sel = s.hostSelection(b, T)
	}
	if s.Trace != nil {
		s.recordRoutes(il, T)
	}
	ids, weights := sel.Slice(0, n), sel.Slice(n, 2*n)

	xin := b.Input(s.step, x, D, T)
	up := s.step.Tensor(n * F)
	b.mulMatExperts(up, de.up, ids, xin, K)
	b.addExpertBias(up, de.bias[1], ids, de.experts, n, F)
	act := up
	if de.gate != nil {
		gate := s.step.Tensor(n * F)
		b.mulMatExperts(gate, de.gate, ids, xin, K)
		b.addExpertBias(gate, de.bias[0], ids, de.experts, n, F)
		b.GLU(s.expertGLU(), gate, gate, up, n, F)
		act = gate
	} else {
		b.SiLU(up, up, n, F)
	}
	down := s.step.Tensor(n * D)
	b.mulMatExperts(down, de.down, ids, b.Input(s.step, act, F, n), 1)
	b.addExpertBias(down, de.bias[2], ids, de.experts, n, D)
	b.do(func(bt *gpu.Batch) error { return bt.MoESum(span(out), span(down), span(weights), T, K, D) })
	if shared.Len() > 0 {
		b.Add(out, out, shared, T*D)
	}
}

// deviceRouteJob is layer il's routing as the device's kernel runs it,
// or false where it cannot (more experts per token or groups than it
// holds).
func (s *Session) deviceRouteJob(il, T int) (gpu.RouteJob, bool) {
	h, L := s.m.Hparams, &s.m.layers[il]
	j := gpu.RouteJob{Tokens: T, Experts: h.Experts, K: h.ExpertsUsed, Groups: max(h.ExpertGroups, 1), GroupsUsed: h.GroupsUsed,
		Normalize: h.weightsNorm, Scale: h.weightsScale}
	switch h.gating {
	case gateSoftmax:
		j.Gating = gpu.RouteSoftmax
	case gateSigmoid:
		j.Gating = gpu.RouteSigmoid
	case gateSoftmaxWeight:
		j.Gating = gpu.RouteSoftmaxWeight
	default:
		return j, false
	}
	if L.probsBias.present() {
		j.Bias = vspan(&L.probsBias)
	}
	return j, j.K <= gpu.MaxRouteK && j.Groups <= gpu.MaxRouteGroups && h.Experts%j.Groups == 0
}

// routeOnDevice runs the layer's router on in and chooses each token's
// experts on the device: ids, weights and margins (gpu.Batch.Route).
func (s *Session) routeOnDevice(b *gpuBackend, il int, in Input, j gpu.RouteJob) Tensor {
	L := &s.m.layers[il]
	lt := s.step.Tensor(j.Tokens * j.Experts)
	b.MulMat(lt, &L.router, in)
	b.AddBias(lt, &L.routerBias, j.Tokens)
	sel := s.step.Tensor(j.Tokens * (2*j.K + 1))
	scratch := s.step.Tensor(2 * j.Tokens * j.Experts)
	b.do(func(bt *gpu.Batch) error { return bt.Route(span(sel), span(lt), span(scratch), j) })
	return sel
}

// readRoutes reads the device's choice back into the scratch the trace
// records from.
func (s *Session) readRoutes(b *gpuBackend, sel Tensor, T int) {
	h, sc := s.m.Hparams, &s.scratch
	K := h.ExpertsUsed
	host := b.Read(sel)
	sc.ids = grow(sc.ids, T*K)
	sc.margins = grow(sc.margins, T)
	if len(sc.from) != h.Experts {
		sc.uses, sc.from = make([][]int, h.Experts), make([]trace.Level, h.Experts)
	}
	for i := range T * K {
		sc.ids[i] = int(math.Float32bits(host[i]))
		sc.from[sc.ids[i]] = trace.LevelVRAM
	}
	copy(sc.margins, host[2*T*K:2*T*K+T])
}

// hostSelection sends the host's choice (route) to the device, laid out
// as Route writes it: ids, then weights.
func (s *Session) hostSelection(b *gpuBackend, T int) Tensor {
	sc := &s.scratch
	n := T * s.m.Hparams.ExpertsUsed
	sc.devSel = grow(sc.devSel, 2*n)
	for i, e := range sc.ids[:n] {
		sc.devSel[i] = math.Float32frombits(uint32(e))
	}
	copy(sc.devSel[n:], sc.weights[:n])
	for _, e := range sc.experts {
		sc.from[e] = trace.LevelVRAM
	}
	sel := s.step.Tensor(2 * n)
	b.Write(sel, sc.devSel)
	return sel
}

// expertGLU is the routed experts' activation, as expertFFN applies it.
func (s *Session) expertGLU() GLU {
	h := s.m.Hparams
	switch {
	case h.oaiSwiGLU:
		return GLU{Kind: GLUSwiGLUOAI}
	case h.situ != nil:
		return GLU{Kind: GLUSiTU, Beta: h.situ.beta, LinearBeta: h.situ.linearBeta}
	}
	return GLU{Kind: GLUSwiGLU}
}

// mulMatExperts records, for each of the rows of dst (in's rows times
// xDiv), W[ids[r]]·in[r / xDiv].
func (b *gpuBackend) mulMatExperts(dst Tensor, w *gpu.Weights, ids Tensor, in Input, xDiv int) {
	x := in.(*gpuInput)
	xs := b.onGrid(x, w.Type)
	b.do(func(bt *gpu.Batch) error {
		return bt.MatMulExperts(w, span(ids), gpu.Columns{Buf: xs.Buf, Off: xs.Off, Stride: x.cols}, xDiv,
			gpu.Columns{Buf: span(dst).Buf, Off: dst.off, Stride: w.Rows}, ids.Len())
	})
}

// addExpertBias adds each routed row's expert bias (nothing without a
// bias stack).
func (b *gpuBackend) addExpertBias(y Tensor, bias *gpu.Buffer, ids Tensor, experts, rows, width int) {
	if bias == nil {
		return
	}
	b.do(func(bt *gpu.Batch) error {
		return bt.AddExpertBias(span(y), gpu.Span{Buf: bias}, span(ids), experts, rows, width)
	})
}

// deviceExperts is layer il's experts on the device, or nil.
func (s *Session) deviceExperts(il int) (*gpuBackend, *devExperts) {
	b, ok := s.be.(*gpuBackend)
	if !ok || b.experts == nil || b.experts[il] == nil {
		return nil, nil
	}
	return b, b.experts[il]
}
