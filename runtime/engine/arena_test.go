package engine

import "testing"

// TestCPUArenaRewinds: a rewind hands the same memory out again, cleared;
// tensors taken before the mark keep their values; a step that spilled
// leaves, after Reset, one buffer of the most it held at once, which the
// same step then fits in without a new mapping.
func TestCPUArenaRewinds(t *testing.T) {
	a := (&cpuBackend{}).NewArena().(*cpuArena)
	defer a.Free()
	step := func() (kept, first Tensor) {
		a.Reset()
		kept = a.Tensor(100)
		kept.f32()[0] = 42
		mark := a.Mark()
		for layer := range 4 {
			a.Rewind(mark)
			x := a.Tensor(1 << 16) // more than the first buffer holds
			if layer == 0 {
				first = x
			} else if x.buf != first.buf || x.off != first.off {
				t.Fatalf("layer %d: the rewound arena handed out other memory", layer)
			}
			for i, v := range x.f32() {
				if v != 0 {
					t.Fatalf("layer %d: value %d is %v after a rewind, want 0", layer, i, v)
				}
			}
			for i := range x.f32() {
				x.f32()[i] = float32(layer + 1)
			}
			a.bytes(1000)[999] = 7
		}
		if kept.f32()[0] != 42 {
			t.Fatal("a rewind cleared a tensor taken before the mark")
		}
		return kept, first
	}
	step()
	if len(a.bufs) < 2 {
		t.Fatalf("the first step did not spill (%d buffers)", len(a.bufs))
	}
	peak := a.peak
	step()
	if len(a.bufs) != 1 || len(a.bufs[0].host) != peak {
		t.Errorf("after a spilled step: %d buffers, the first of %d floats; want one of the step's peak, %d",
			len(a.bufs), len(a.bufs[0].host), peak)
	}
	if want := 100 + 1<<16 + 250; peak != want {
		t.Errorf("peak %d floats, want %d (what was held at once, not what was handed out)", peak, want)
	}
}
