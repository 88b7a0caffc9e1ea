package cachelab

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gguftool/gguftool/trace"
)

// build makes Accesses from groups of expert ids, one layer per group,
// as Load would (distinct keys, Next linked).
func build(layers, experts int, groups [][2][]int) *Accesses {
	a := &Accesses{Header: trace.Header{Layers: layers, Experts: experts, TopK: 1}}
	for step, g := range groups {
		layer := g[0][0]
		grp := Group{Step: step, Layer: layer}
		for _, e := range g[1] {
			if k := Key(layer, e); !slices.Contains(grp.Keys, k) {
				grp.Keys = append(grp.Keys, k)
				grp.Recorded = append(grp.Recorded, trace.LevelSSD)
			}
		}
		a.Groups = append(a.Groups, grp)
	}
	a.linkNext()
	return a
}

// randomTrace draws n groups over layers × experts, each of up to k
// experts, with a skew towards a few hot experts so that caching pays.
func randomTrace(r *rand.Rand, layers, experts, k, n int) *Accesses {
	var gs [][2][]int
	for step := range n {
		l := step % layers
		var es []int
		for range 1 + r.IntN(k) {
			e := r.IntN(experts)
			if r.IntN(3) == 0 {
				e = r.IntN(max(1, experts/4))
			}
			es = append(es, e)
		}
		gs = append(gs, [2][]int{{l}, es})
	}
	return build(layers, experts, gs)
}

// bruteForce is the most hits any sequence of cache states reaches when
// after each group the cache may hold any capacity keys of what it held
// and what the group looked up (which covers every policy, Belady's
// declining included), by trying every choice.
func bruteForce(a *Accesses, capacity int) int64 {
	var best int64
	var walk func(gi int, cached []uint64, hits int64)
	walk = func(gi int, cached []uint64, hits int64) {
		if gi == len(a.Groups) {
			best = max(best, hits)
			return
		}
		pool := slices.Clone(cached)
		for _, k := range a.Groups[gi].Keys {
			if slices.Contains(cached, k) {
				hits++
			} else {
				pool = append(pool, k)
			}
		}
		keep := min(capacity, len(pool))
		var choose func(from int, chosen []uint64)
		choose = func(from int, chosen []uint64) {
			if len(chosen) == keep {
				walk(gi+1, slices.Clone(chosen), hits)
				return
			}
			for i := from; i < len(pool); i++ {
				choose(i+1, append(chosen, pool[i]))
			}
		}
		choose(0, nil)
	}
	walk(0, nil, 0)
	return best
}

// TestBeladyEqualsBruteForce: on tiny traces Belady reaches exactly the
// optimum found by trying every eviction.
func TestBeladyEqualsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		a := randomTrace(r, 1+r.IntN(2), 2+r.IntN(4), 3, 4+r.IntN(5))
		for capacity := 1; capacity <= 4; capacity++ {
			got, err := a.Replay("belady", capacity, false, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			if want := bruteForce(a, capacity); got.Hits != want {
				t.Fatalf("trace %d %+v, capacity %d: belady %d hits, brute force %d", i, a.Groups, capacity, got.Hits, want)
			}
		}
	}
}

// adversarial are traces built against the online policies: a cyclic
// scan one longer than the cache (LRU's worst case), a hot set that goes
// cold (LFU's), one-off scans through a working set (LFRU's and
// window's), and a key whose reuse interval changes (stale's).
func adversarial() map[string]*Accesses {
	var scan, shift, mixed, drift [][2][]int
	for i := range 400 {
		scan = append(scan, [2][]int{{0}, {i % 9}})
		if i < 200 {
			shift = append(shift, [2][]int{{0}, {i % 4}})
		} else {
			shift = append(shift, [2][]int{{0}, {4 + i%4}})
		}
		mixed = append(mixed, [2][]int{{i % 2}, {i % 3, 10 + (i*7)%50}})
		gap := 1 + (i/50)%5*3
		drift = append(drift, [2][]int{{0}, {(i / gap) % 6, 6 + i%5}})
	}
	return map[string]*Accesses{"scan": build(1, 9, scan), "shift": build(1, 8, shift), "mixed": build(2, 60, mixed), "drift": build(1, 11, drift)}
}

// TestBeladyNeverBeaten: no policy, global or per layer, scores more hits
// than Belady at any capacity, on random and adversarial traces.
func TestBeladyNeverBeaten(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	traces := adversarial()
	for i := range 40 {
		traces[string(rune('A'+i%26))+string(rune('a'+i/26))] = randomTrace(r, 1+r.IntN(4), 4+r.IntN(30), 6, 50+r.IntN(300))
	}
	for name, a := range traces {
		for _, perLayer := range []bool{false, true} {
			for _, capacity := range []int{1, 2, 3, 5, 8, 13, 40} {
				opt, err := a.Replay("belady", capacity, perLayer, DefaultOptions)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range Policies {
					for _, o := range []Options{DefaultOptions, {Window: 1, HalfLife: 0.5}, {Window: 50, HalfLife: 100}} {
						got, err := a.Replay(p, capacity, perLayer, o)
						if err != nil {
							t.Fatal(err)
						}
						if got.Hits > opt.Hits || got.Lookups != opt.Lookups {
							t.Errorf("%s, capacity %d, per-layer %v: %s %d hits beats belady %d", name, capacity, perLayer, p, got.Hits, opt.Hits)
						}
					}
				}
			}
		}
	}
}

// TestPoliciesDiffer guards against a policy silently running as
// another: on the adversarial traces every pair of policies differs
// somewhere, except lfu and lfru, which evict alike whenever lfru's
// once-seen part is never empty at an eviction.
func TestPoliciesDiffer(t *testing.T) {
	hits := map[string][]int64{}
	for _, name := range []string{"scan", "shift", "mixed", "drift"} {
		a := adversarial()[name]
		for _, p := range Policies {
			for _, capacity := range []int{2, 3, 5, 8} {
				res, err := a.Replay(p, capacity, false, DefaultOptions)
				if err != nil {
					t.Fatal(err)
				}
				hits[p] = append(hits[p], res.Hits)
			}
		}
	}
	for i, p := range Policies {
		for _, q := range Policies[i+1:] {
			if !(p == "lfu" && q == "lfru") && slices.Equal(hits[p], hits[q]) {
				t.Errorf("%s and %s score the same everywhere: %v", p, q, hits[p])
			}
		}
	}
}

// TestDeterministic: a replay gives the same counts every time, whatever
// the order maps are walked in.
func TestDeterministic(t *testing.T) {
	a := randomTrace(rand.New(rand.NewPCG(5, 6)), 3, 20, 5, 500)
	for _, p := range Policies {
		first, err := a.Replay(p, 10, false, DefaultOptions)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		// Two failed or empty replays would be equal too: the counts must
		// be those of a replay that looked experts up and both hit and
		// missed.
		if first.Lookups == 0 || first.Hits == 0 || first.Hits == first.Lookups {
			t.Fatalf("%s: %+v is not a replay of the trace", p, first)
		}
		for range 5 {
			again, err := a.Replay(p, 10, false, DefaultOptions)
			if err != nil {
				t.Fatalf("%s, replayed again: %v", p, err)
			}
			if again != first {
				t.Fatalf("%s: %+v then %+v", p, first, again)
			}
		}
	}
}

func TestParse(t *testing.T) {
	caps, err := ParseCapacities("5%, 12.5%,512")
	if err != nil || !slices.Equal(caps, []Capacity{{Percent: 5}, {Percent: 12.5}, {Slots: 512}}) {
		t.Fatalf("%v %v", caps, err)
	}
	if got := []int{caps[0].For(1000), caps[1].For(8), caps[2].For(100)}; !slices.Equal(got, []int{50, 1, 100}) {
		t.Errorf("slots %v, want [50 1 100]", got)
	}
	for _, bad := range []string{"", "0", "-3", "0%", "101%", "NaN%", "x", "5%%", "1e3"} {
		if _, err := ParseCapacities(bad); err == nil {
			t.Errorf("capacity %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "lru,,lfu", "arc", "belady,opt"} {
		if _, err := ParsePolicies(bad); err == nil {
			t.Errorf("policy list %q accepted", bad)
		}
	}
}

// FuzzParse: the capacity and policy parsers never panic, and what they
// accept is in range and prints back to something they accept again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"5%,10%,25%,50%", "512", "lru,lfu,belady", "all", "12.5%", "1e2%", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if caps, err := ParseCapacities(s); err == nil {
			for _, c := range caps {
				if n := c.For(64); n < 1 || n > 64 {
					t.Fatalf("%q: %v gives %d slots of 64", s, c, n)
				}
				if again, err := ParseCapacities(c.String()); err != nil || len(again) != 1 || again[0] != c {
					t.Fatalf("%q: %v prints as %q, parsed %v %v", s, c, c.String(), again, err)
				}
			}
		}
		if ps, err := ParsePolicies(s); err == nil {
			for _, p := range ps {
				if !slices.Contains(Policies, p) {
					t.Fatalf("%q: policy %q", s, p)
				}
			}
		}
	})
}

// TestMissesAgreeWithReplay: the per-group misses sum to Replay's misses
// for every policy, and a group's misses never exceed its keys.
func TestMissesAgreeWithReplay(t *testing.T) {
	a := randomTrace(rand.New(rand.NewPCG(7, 8)), 4, 30, 6, 800)
	for _, p := range Policies {
		for _, c := range []int{0, 1, 12, 60, 120} {
			res, err := a.Replay(p, c, false, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			per, err := a.Misses(p, c, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for gi, m := range per {
				if m < 0 || m > len(a.Groups[gi].Keys) {
					t.Fatalf("%s/%d: group %d: %d misses of %d keys", p, c, gi, m, len(a.Groups[gi].Keys))
				}
				sum += int64(m)
			}
			if want := res.Lookups - res.Hits; sum != want {
				t.Errorf("%s at %d slots: per-group misses sum to %d, Replay counts %d", p, c, sum, want)
			}
		}
	}
	if _, err := a.Misses("lru", -1, DefaultOptions); err == nil {
		t.Error("a negative capacity was accepted")
	}
}
