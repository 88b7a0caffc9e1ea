package engine

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/gguftool/gguftool/gguf"
	"github.com/gguftool/gguftool/gpu"
)

// The forward pass on a Vulkan device (lavapipe here, with the
// validation layer on; a real GPU when GGUFTOOL_TEST_GPU_DEVICE names
// one): the same model through the CPU and the GPU backends. The device
// sums in other orders, so logits are close, not equal: within
// gpuLogitTolerance of the largest logit's magnitude, with the same
// greedy tokens. Where bits are promised on one backend they are tested
// as bits: run to run, and streamed against resident.

// gpuLogitTolerance bounds |GPU − CPU| over a transcript, relative to the
// largest |logit|: float32 sums in another order through a few layers of
// a small random model stay far inside it.
const gpuLogitTolerance = 2e-3

const lavapipeICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"

// testGPU opens the test device with the validation layer; a message
// from the layer fails the test.
func testGPU(t *testing.T) *gpu.Device {
	t.Helper()
	return testGPUBudget(t, 0)
}

// testGPUBudget is testGPU with a VRAM budget (0: the device's).
func testGPUBudget(t *testing.T, budget int64) *gpu.Device {
	t.Helper()
	if os.Getenv("VK_DRIVER_FILES") == "" && os.Getenv("VK_ICD_FILENAMES") == "" {
		if _, err := os.Stat(lavapipeICD); err == nil {
			t.Setenv("VK_DRIVER_FILES", lavapipeICD)
		}
	}
	index := -1
	if s := os.Getenv("GGUFTOOL_TEST_GPU_DEVICE"); s != "" {
		fmt.Sscan(s, &index)
	}
	o, _, err := gpu.Open(gpu.Options{Mode: gpu.ModeOn, Device: index, Validate: true, Budget: budget})
	if err != nil {
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
		for _, m := range o.Instance.Messages() {
			t.Errorf("validation layer: %s", m)
		}
	})
	return o.Device
}

// closeLogits requires got within tol × max|want| of want everywhere and
// the same argmax at every position.
func closeLogits(t *testing.T, what string, got, want []float32, vocab int, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	var scale, worst float64
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i])-float64(want[i])))
		if math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: logit %d is NaN", what, i)
		}
	}
	if worst > tol*scale {
		t.Errorf("%s: logits differ by up to %.3g, more than %.0e × %.3g", what, worst, tol, scale)
	}
	for p := 0; p < len(want)/vocab; p++ {
		if g, w := Argmax(got[p*vocab:(p+1)*vocab]), Argmax(want[p*vocab:(p+1)*vocab]); g != w {
			t.Errorf("%s: position %d's greedy token is %d, the CPU's %d", what, p, g, w)
		}
	}
	t.Logf("%s: max |Δ| %.3g (%.2g of the largest logit)", what, worst, worst/scale)
}

// TestGPUArchs: every architecture on the device, resident and streamed,
// with the routed experts in VRAM (where a small model's go by default)
// and on the CPU, against the CPU.
func TestGPUArchs(t *testing.T) {
	dev := testGPU(t)
	for _, arch := range Archs {
		t.Run(arch, func(t *testing.T) {
			src, pack := testModel(t, arch, gguf.TypeF32, nil)
			cpu := open(t, src, Options{})
			want := transcript(t, cpu, 3)
			for _, place := range []ExpertPlacement{ExpertsAuto, ExpertsCPU} {
				m := open(t, src, Options{GPU: dev, GPUExperts: place})
				if m.be.Name() == "cpu" {
					t.Fatal("the model runs on the CPU")
				}
				where := "vram"
				if place == ExpertsCPU {
					where = "ram"
				}
				if p := m.Placement(); p.Experts != where {
					t.Fatalf("GPUExperts %q: the experts are in %s, want %s (%+v)", place, p.Experts, where, p)
				}
				got := transcript(t, m, 3)
				closeLogits(t, "GPU vs CPU, experts in "+where, got, want, m.Hparams.Vocab, gpuLogitTolerance)
				sameBits(t, "GPU, a second run", transcript(t, m, 3), got)
				streamed := open(t, pack, Options{GPU: dev, GPUExperts: place, Cache: CacheOptions{Slots: 3, Policy: "lru"}})
				if p := streamed.Placement(); p.Experts != where {
					t.Fatalf("streamed, GPUExperts %q: the experts are in %s, want %s", place, p.Experts, where)
				}
				sameBits(t, "GPU, streamed from the pack, experts in "+where, transcript(t, streamed, 3), got)
			}
		})
	}
}

// The bits the engine promises on one backend, on the device: batched
// equals alone, every batch size the same logits, a cancelled step
// leaves no trace.
func TestGPUBatchedEqualsAlone(t *testing.T) { batchedEqualsAlone(t, Options{GPU: testGPU(t)}) }

func TestGPUBatchSizeGivesTheSameBits(t *testing.T) {
	batchSizeGivesTheSameBits(t, Options{GPU: testGPU(t)})
}

// Cancelled with the experts in VRAM (as each layer begins) and on the
// CPU (also as the expert source is asked for a layer's experts).
func TestGPUCancelledStepLeavesNoTrace(t *testing.T) {
	dev := testGPU(t)
	t.Run("experts-vram", func(t *testing.T) { cancelledStepLeavesNoTrace(t, Options{GPU: dev, GPUExperts: ExpertsVRAM}) })
	t.Run("experts-cpu", func(t *testing.T) { cancelledStepLeavesNoTrace(t, Options{GPU: dev, GPUExperts: ExpertsCPU}) })
}
