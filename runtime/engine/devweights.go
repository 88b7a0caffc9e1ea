package engine

import (
	"context"
	"fmt"

	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// residentWeights lists every weight matrix and vector the forward pass
// applies itself — the tensors a device backend holds. The token
// embedding is not among them (Embed reads the rows a step needs on the
// host, as llama.cpp keeps it), nor are the routed experts' matrices,
// whose bytes the expert source supplies per fetch.
func (m *Model) residentWeights() ([]*matrix, []*vector) {
	var ms []*matrix
	var vs []*vector
	mat := func(xs ...*matrix) {
		for _, x := range xs {
			if x.data != nil {
				ms = append(ms, x)
			}
		}
	}
	vec := func(xs ...*vector) {
		for _, x := range xs {
			if x.present() {
				vs = append(vs, x)
			}
		}
	}
	for i := range m.layers {
		L := &m.layers[i]
		mat(&L.wq, &L.wk, &L.wv, &L.wo, &L.attnGate, &L.sharedGate, &L.router)
		vec(&L.attnNorm, &L.ffnNorm, &L.bq, &L.bk, &L.bv, &L.bo, &L.qNorm, &L.kNorm, &L.sinks,
			&L.attnRes, &L.ffnRes, &L.routerBias, &L.probsBias)
		for _, f := range []*ffnWeights{L.dense, L.shared} {
			if f != nil {
				mat(&f.gate, &f.up, &f.down)
			}
		}
		if a := L.mla; a != nil {
			// wkB and wvB are applied head by head, through the
			// per-head slices of their bytes (wkBH, wvBH).
			mat(&a.wqA, &a.wqB, &a.wkvA, &a.wkvB)
			for h := range a.wkBH {
				mat(&a.wkBH[h])
			}
			for h := range a.wvBH {
				mat(&a.wvBH[h])
			}
			vec(&a.qANorm, &a.kvANorm)
		}
		if d := L.delta; d != nil {
			mat(&d.wqkv, &d.wgate, &d.wbeta, &d.walph)
			vec(&d.conv, &d.dtBias, &d.a, &d.norm)
		}
		if k := L.kda; k != nil {
			mat(&k.wq, &k.wk, &k.wv, &k.fa, &k.fb, &k.wbeta, &k.wg)
			vec(&k.convQ, &k.convK, &k.convV, &k.a, &k.dtBias, &k.oNorm)
		}
		if p := L.latent; p != nil {
			mat(&p.down, &p.up)
			vec(&p.norm)
		}
	}
	mat(&m.output)
	vec(&m.outNorm, &m.outRes)
	return ms, vs
}

// toDevice moves the forward pass onto dev: it checks that the device
// runs every weight type and cache type the model needs and that the
// resident weights fit the VRAM budget (saying both sizes when they do
// not), uploads them, and then the routed experts where place and the
// budget allow.
func (m *Model) toDevice(ctx context.Context, dev *gpu.Device, place ExpertPlacement, lm *loadMeter) error {
	ms, vs := m.residentWeights()
	var need int64
	for _, x := range ms {
		if !gpu.CanMatMul(x.typ) {
			return &gpu.FeatureError{Device: dev.Info().Name, Feature: fmt.Sprintf("a kernel for %s weights (%s)", x.typ, x.name)}
		}
		need += int64(x.bytes())
	}
	for _, v := range vs {
		need += int64(4 * len(v.f))
	}
	for _, t := range []KVType{m.kvK, m.kvV} {
		if _, err := gpuKVType(t); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	if need > dev.Budget()-dev.Used() {
		return &gpu.BudgetError{Device: dev.Info().Name, What: "the resident weights", Need: need, Budget: dev.Budget(), Used: dev.Used()}
	}
	b := newGPUBackend(dev)
	b.weightBytes = need
	m.deviceWeights = func() {
		releaseDeviceWeights(ms, vs)
		for _, de := range b.experts {
			if de != nil {
				de.free()
			}
		}
		b.experts = nil
	}
	for _, x := range ms {
		if err := b.PrepareMatrix(x); err != nil {
			return err
		}
	}
	for _, v := range vs {
		if err := b.PrepareVector(v); err != nil {
			return err
		}
	}
	if err := m.expertsToDevice(ctx, b, place, lm); err != nil {
		return err
	}
	m.be = b
	if b.experts != nil {
		m.Notes = append(m.Notes, fmt.Sprintf("GPU: %s holds the resident weights (%s), the routed experts (%s) and the KV cache",
			dev.Info().Name, iostreams.HumanBytes(need), iostreams.HumanBytes(b.expertBytes)))
	} else {
		m.Notes = append(m.Notes, fmt.Sprintf("GPU: %s holds the resident weights (%s) and the KV cache; routed experts run on the CPU",
			dev.Info().Name, iostreams.HumanBytes(need)))
	}
	return nil
}

// Placement says where a model's parts run and what crossed between the
// host and the device, for a command's --json.
type Placement struct {
	Backend string `json:"backend"` // cpu, or vulkan
	Device  string `json:"device,omitempty"`
	// Where the resident weights, the KV cache and the routed experts
	// are: ram (and the CPU computes) or vram (the device does).
	Weights string `json:"weights"`
	KVCache string `json:"kv_cache"`
	Experts string `json:"experts"`
	// On the device: the resident weights' bytes, the most held at once
	// (weights, caches, activations), the budget, and the bytes uploaded
	// and read back so far.
	DeviceWeightBytes int64 `json:"device_weight_bytes,omitempty"`
	// DeviceExpertBytes is the routed experts' bytes in VRAM (0 when
	// they run on the CPU).
	DeviceExpertBytes int64 `json:"device_expert_bytes,omitempty"`
	// DeviceBytesPerToken is the weight bytes the device reads to decode
	// one token: every resident weight it holds, and the top-k experts of
	// each MoE layer when the experts are in VRAM.
	DeviceBytesPerToken int64 `json:"device_bytes_per_token,omitempty"`
	VRAMPeak            int64 `json:"vram_peak,omitempty"`
	VRAMBudget          int64 `json:"vram_budget,omitempty"`
	Uploaded            int64 `json:"uploaded_bytes,omitempty"`
	ReadBack            int64 `json:"read_back_bytes,omitempty"`
}

// Placement is where the model runs now.
func (m *Model) Placement() Placement {
	b, ok := m.be.(*gpuBackend)
	if !ok {
		return Placement{Backend: "cpu", Weights: "ram", KVCache: "ram", Experts: "ram"}
	}
	moved := b.dev.Moved()
	p := Placement{Backend: "vulkan", Device: b.dev.Info().Name, Weights: "vram", KVCache: "vram", Experts: "ram",
		DeviceWeightBytes: b.weightBytes, DeviceExpertBytes: b.expertBytes, DeviceBytesPerToken: b.weightBytes + b.expertBytesPerToken,
		VRAMPeak: b.dev.Peak(), VRAMBudget: b.dev.Budget(), Uploaded: moved.Up, ReadBack: moved.Down}
	if b.experts != nil {
		p.Experts = "vram"
	}
	return p
}

// DeviceCopyBandwidth measures the model's device's memory bandwidth
// (gpu.Device.CopyBandwidth: bytes read plus written per second) with
// copies of size bytes at most: no more than a quarter of the budget left
// or one storage buffer; 0 and an error without a device.
func (m *Model) DeviceCopyBandwidth(size int64) (float64, error) {
	b, ok := m.be.(*gpuBackend)
	if !ok {
		return 0, fmt.Errorf("engine: the model runs on the CPU")
	}
	size = min(size, (b.dev.Budget()-b.dev.Used())/4, int64(b.dev.Info().Limits.MaxStorageBufferRange))
	if size < 1<<20 {
		return 0, fmt.Errorf("engine: %s left of the VRAM budget: too little to measure the bandwidth", iostreams.HumanBytes(b.dev.Budget()-b.dev.Used()))
	}
	return b.dev.CopyBandwidth(size, 8)
}
