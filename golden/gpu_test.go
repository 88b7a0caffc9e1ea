package golden

import (
	"context"
	"os"
	"testing"

	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/runtime/engine"
)

// gpuSlowFixtures are left out on lavapipe, where each takes minutes.
var gpuSlowFixtures = map[string]string{
	"qwen3moe-f32-d512-l8-e64-p512-seed7": "a 512-token prompt over 8 layers of width 512: 100 s on lavapipe (golden check --gpu on runs it)",
}

// TestGPUGoldens runs the engine on a Vulkan device (lavapipe, validation
// on) on every fixture and requires llama.cpp's CPU build's greedy ids and
// log-probabilities within the fixture's tolerance: the device's products
// read the activations on the CPU's grid (Q8_0, Q8_K, F16), so quantized
// models follow the CPU build too, but for the rounding flips GPUFlips
// names, held to what they measured (the engine's GPU tests hold streamed
// to resident).
func TestGPUGoldens(t *testing.T) {
	if os.Getenv("VK_DRIVER_FILES") == "" && os.Getenv("VK_ICD_FILENAMES") == "" {
		t.Setenv("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
	}
	o, _, err := gpu.Open(gpu.Options{Mode: gpu.ModeOn, Device: -1, Validate: true})
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		o.Close()
		for _, m := range o.Instance.Messages() {
			t.Errorf("validation layer: %s", m)
		}
	})
	ctx := context.Background()
	dir := t.TempDir()
	checked := map[string]int{}
	for _, s := range Fixtures {
		if why, slow := gpuSlowFixtures[s.Name()]; slow {
			t.Logf("%s: left out: %s", s.Name(), why)
			continue
		}
		t.Run(s.Name(), func(t *testing.T) {
			f, err := Read(Path(s))
			if err != nil {
				t.Fatal(err)
			}
			model, _, err := Build(ctx, s, dir)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Check(ctx, f, model, engine.Options{GPU: o.Device})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !r.OK:
				t.Errorf("greedy %v (%d of llama.cpp's), max |Δ log p| %.3g at %s (tolerance %g), median %.3g",
					r.Greedy, r.GreedyMatch, r.MaxLogprobDiff, r.Worst, r.Tolerance.LogprobAbs, r.MedianLogprobDiff)
			case r.GPUAllowance != "":
				t.Logf("held to GPUFlips (%s): greedy %d of llama.cpp's, max |Δ log p| %.3g at %s, median %.3g",
					r.GPUAllowance, r.GreedyMatch, r.MaxLogprobDiff, r.Worst, r.MedianLogprobDiff)
			}
			if s.DeviceNumerics() && f.Vulkan == nil {
				t.Fatal("a quantized fixture without llama.cpp's Vulkan reference (scripts/llamacpp/record-goldens.sh)")
			}
			checked[s.Arch]++
		})
	}
	for _, arch := range engine.Archs {
		if checked[arch] == 0 {
			t.Errorf("no fixture of %s was checked on the GPU", arch)
		}
	}
}
