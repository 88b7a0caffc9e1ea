package quantize

import (
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/synth"
)

// TestTensorTypesEqualsPlan: for models not yet written, TensorTypes
// gives every tensor the type MakePlan gives it once the model is on
// disk, for each mix and for architectures whose rules differ (Mixtral's
// 8 experts, many experts, a tied head, dense layers, gpt-oss's fallbacks
// on 2880-wide rows).
func TestTensorTypesEqualsPlan(t *testing.T) {
	qwen := synth.Defaults("qwen3moe")
	qwen.Layers, qwen.Embd, qwen.Heads, qwen.HeadDim, qwen.ExpertFF, qwen.Experts = 16, 256, 4, 64, 256, 16
	mixtral := synth.Defaults("llama")
	mixtral.Layers, mixtral.Embd, mixtral.Heads, mixtral.HeadDim, mixtral.ExpertFF = 8, 256, 4, 64, 256
	oss := synth.Defaults("gpt-oss")
	oss.Embd, oss.Heads, oss.HeadsKV, oss.HeadDim = 2880, 4, 2, 64 // rows of 2880 are not whole K-quant blocks
	glm := synth.Defaults("glm4moe")
	glm.Embd, glm.HeadDim, glm.ExpertFF, glm.DenseFF = 256, 64, 256, 512
	for _, c := range []synth.Config{qwen, mixtral, oss, glm} {
		s := openModel(t, c)
		infos, err := c.Tensors()
		if err != nil {
			t.Fatal(err)
		}
		for _, ft := range []FType{FTypeQ4_K_M, FTypeQ5_K_M, FTypeQ6_K, FTypeQ8_0, FTypeQ3_K_M, FTypeMXFP4MoE, FTypeQ4_0} {
			p, err := MakePlan(s, DefaultOptions(ft))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]gguf.Type{}
			for _, tg := range p.Targets {
				want[tg.Name] = tg.Type
			}
			got, err := TensorTypes(c.Hparams(), infos, DefaultOptions(ft))
			if err != nil {
				t.Fatal(err)
			}
			differ, bigger := 0, 0
			for i, ti := range infos {
				if got[i] != want[ti.Name] {
					t.Errorf("%s %s: %s is %s, MakePlan says %s", c.Arch, ft, ti.Name, got[i], want[ti.Name])
				}
				if def, _ := ft.DefaultType(); got[i] != def && got[i] != ti.Type {
					differ++
				}
				if got[i] == gguf.TypeQ6_K || got[i] == gguf.TypeQ8_0 {
					bigger++
				}
			}
			// The comparison is only worth something where the rules
			// chose some tensors' types apart from the mix's default.
			if ft == FTypeQ4_K_M && (differ == 0 || bigger == 0) {
				t.Errorf("%s %s: every quantized tensor got the default type; the rules were not exercised", c.Arch, ft)
			}
		}
	}
	if _, err := TensorTypes(qwen.Hparams(), nil, Options{FType: FType(9999)}); err == nil {
		t.Error("an invalid file type was accepted")
	}
}
