package synth

import (
	"fmt"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gguf/quant"
)

// Tensors is the model's tensor table in file order (names, shapes and
// types, no offsets), without generating anything: what a caller needs to
// choose per-tensor types (Config.TensorTypes) before writing.
func (c *Config) Tensors() ([]gguf.TensorInfo, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	specs := c.tensors()
	infos := make([]gguf.TensorInfo, len(specs))
	for i, s := range specs {
		infos[i] = gguf.TensorInfo{Name: s.name, Shape: s.shape, Type: s.typ}
	}
	return infos, nil
}

// Hparams is the model's hyper-parameters as gguf.ReadHparams reads
// back the ones a quantization mix's rules look at (architecture, block
// count, heads, kv heads, experts), without writing the model; the other
// fields are the configured geometry.
func (c *Config) Hparams() gguf.Hparams {
	h := gguf.Hparams{
		Arch: c.Arch, Name: c.name(), Layers: c.Layers + c.NextN, Embd: c.Embd, Heads: c.Heads, HeadsKV: c.HeadsKV,
		HeadDim: c.HeadDim, Context: c.Context, Vocab: c.Vocab, Experts: c.Experts, ExpertsUsed: c.ExpertsUsed,
		ExpertFF: c.ExpertFF, SharedExperts: c.SharedExperts, DenseLeading: c.DenseLayers, NextN: c.NextN,
	}
	if c.Arch == "kimi-k3" && c.isRecurrent(0) {
		// kimi-k3 writes kv heads per layer; a reader takes the first
		// layer's, and a KDA layer's 0 reads as "every head".
		h.HeadsKV = c.Heads
	}
	return h
}

// validateTensorTypes checks Config.TensorTypes against the tensor list:
// every name one of the model's tensors, every type one synth can write
// whose block divides the tensor's rows.
func (c *Config) validateTensorTypes(specs []tensorSpec) error {
	if len(c.TensorTypes) == 0 {
		return nil
	}
	byName := make(map[string]*tensorSpec, len(specs))
	for i := range specs {
		byName[specs[i].name] = &specs[i]
	}
	for name, t := range c.TensorTypes {
		s, ok := byName[name]
		if !ok {
			return fmt.Errorf("synth: a type is given for %s, which is not a tensor of this model", name)
		}
		if !quant.CanQuantize(t) {
			return fmt.Errorf("synth: tensor %s: type %s cannot be quantized by gguftool", name, t)
		}
		if s.shape[0]%t.BlockSize() != 0 {
			return fmt.Errorf("synth: tensor %s: rows of %d values are not whole %s blocks of %d", name, s.shape[0], t, t.BlockSize())
		}
	}
	return nil
}
