package trace

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/runtime/cachelab"
	"github.com/gguftool/gguftool/trace"
)

// allocated is the bytes f allocates on the heap: an upper bound of its
// peak heap that does not depend on when the collector runs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// peakHeap is the most heap f's objects occupied at once above what was
// live before it, sampled while it runs with the collector set to run
// often (so the heap follows what is live, not what awaits collection).
// Sampling can only miss a peak, never invent one.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				done <- peak
				return
			default:
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	f()
	close(stop)
	peak := <-done
	if peak < base {
		return 0
	}
	return peak - base
}

func replayOpts(t *testing.T, path, capacities string, perLayer bool) *TraceReplayOptions {
	t.Helper()
	caps, err := cachelab.ParseCapacities(capacities)
	if err != nil {
		t.Fatal(err)
	}
	ios, _, _ := iostreams.Test()
	return &TraceReplayOptions{IO: ios, Path: path, Policies: cachelab.Policies, Capacities: caps, PerLayer: perLayer, Lab: cachelab.DefaultOptions}
}

// TestReplayHostileHeaderSmall: an 80-byte trace whose header declares
// 65534 layers × 65535 experts and which routes one expert replays, at
// the default capacities (5 % to 50 % of 4.3 billion pairs) and with one
// cache per layer, allocating a small bound of memory: caches and
// per-layer tables follow the records present, not the geometry
// declared. (It used to take more than 3 GB.)
func TestReplayHostileHeaderSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostile.trace")
	tf, err := trace.Create(path, trace.Header{Layers: 0xFFFE, Experts: 0xFFFF, TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.Step(0, []trace.Record{{Layer: 0xFFFD, Expert: 0xFFFE}}); err != nil {
		t.Fatal(err)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 80 {
		t.Fatalf("the hostile trace: %v, %d bytes, want 80", err, st.Size())
	}
	const bound = 4 << 20
	for _, perLayer := range []bool{false, true} {
		opts := replayOpts(t, path, "5%,10%,25%,50%", perLayer)
		var r *Replay
		n := allocated(func() { r, err = RunReplay(context.Background(), opts) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("per-layer %v: %d bytes allocated", perLayer, n)
		if n > bound {
			t.Errorf("per-layer %v: replaying an 80-byte trace allocated %d bytes, want at most %d", perLayer, n, bound)
		}
		if r.Lookups != 1 || len(r.Rows) != 4 || r.Rows[3].Slots != 0xFFFE*0xFFFF/2 {
			t.Errorf("per-layer %v: %d lookups, rows %+v", perLayer, r.Lookups, r.Rows)
		}
	}
}

// writeDecodeTrace writes steps decoded positions of a 4-layer, 32-expert,
// top-2 model, each expert drawn from a fixed seed, compressed.
func writeDecodeTrace(t *testing.T, path string, steps int) {
	t.Helper()
	tf, err := trace.Create(path, trace.Header{Layers: 4, Experts: 32, TopK: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Abort()
	r := rand.New(rand.NewPCG(1, 2))
	recs := make([]trace.Record, 0, 8)
	for step := range steps {
		recs = recs[:0]
		for l := range 4 {
			a := r.IntN(32)
			b := (a + 1 + r.IntN(31)) % 32
			recs = append(recs, trace.Record{Layer: uint16(l), Expert: uint16(a), From: trace.LevelSSD},
				trace.Record{Layer: uint16(l), Expert: uint16(b), Rank: 1, From: trace.LevelSSD})
		}
		if err := tf.Step(step, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReplayMemoryFlat: replay streams the trace, so a trace eight times
// longer replays (every policy, Belady included, global and per layer)
// in about the same peak heap, instead of holding every record (it used
// to take ~370 B per record: tens of MB more here).
func TestReplayMemoryFlat(t *testing.T) {
	dir := t.TempDir()
	short, long := filepath.Join(dir, "short.trace.zst"), filepath.Join(dir, "long.trace.zst")
	writeDecodeTrace(t, short, 4000)
	writeDecodeTrace(t, long, 32000)
	for _, perLayer := range []bool{false, true} {
		peak := map[string]uint64{}
		lookups := map[string]int64{}
		for _, path := range []string{short, long} {
			opts := replayOpts(t, path, "10%,50%", perLayer)
			var err error
			var r *Replay
			peak[path] = peakHeap(func() { r, err = RunReplay(context.Background(), opts) })
			if err != nil {
				t.Fatal(err)
			}
			lookups[path] = r.Lookups
		}
		t.Logf("per-layer %v: %d lookups: peak heap %d bytes; %d lookups: %d bytes", perLayer, lookups[short], peak[short], lookups[long], peak[long])
		if lookups[long] != 8*lookups[short] {
			t.Fatalf("%d and %d lookups, want 8×", lookups[short], lookups[long])
		}
		if grown := int64(peak[long]) - int64(peak[short]); grown > 4<<20 {
			t.Errorf("per-layer %v: 8× the trace took %d more bytes of heap at its peak (%d, then %d)", perLayer, grown, peak[short], peak[long])
		}
	}
}
