package planner

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gguftool/gguftool/internal/fixturetest"
)

var update = flag.Bool("update", false, "rewrite the format fixtures in testdata/")

const planFixture = "testdata/v1.plan.json"

// fixturePlan is a plan of two tiers, the second chosen: with a resident
// tier's manifest, prefetch on, a two-point disk curve.
func fixturePlan() *Plan {
	pack := Tier{Label: "pack", ResidentBytes: 150_000_000}
	q4 := Tier{Label: "Q4_K_M", Manifest: "/models/q.pack.resident/Q4_K_M.resident.json", ResidentBytes: 48_000_000}
	return &Plan{
		Schema: Schema, Created: "2026-12-02T04:30:00Z", Pack: "/models/q.pack", PackDigest: "0123456789abcdef0123456789abcdef",
		RAM: 1 << 30,
		Choice: Choice{ResidentTier: q4.Manifest, TierLabel: q4.Label, ExpertCacheBytes: 805_306_368, Policy: "lfru", Prefetch: true,
			Threads: 8, Candidate: 1, PredictedTokPerS: 41.5, BeladyTokPerS: 47.25, ComputeBoundTokPerS: 52},
		Compute:  Compute{Threads: 8, PromptTokens: 64, Tokens: 32, DecodeTokPerS: 38.5, SecondsPerToken: 0.019},
		Prefetch: PrefetchTest{Pairs: 3, OffTokPerS: 38.5, OnTokPerS: 42.75, Gains: true, MinGain: 1.0625, Precision: 0.625},
		Trace:    TraceInfo{Source: "measuring run", Steps: 96, DecodeSteps: 32},
		Disk: Disk{Backend: "uring", Direct: true, RecordBytes: 1 << 20, Points: []DiskPoint{
			{QueueDepth: 1, Reads: 64, Bytes: 64 << 20, Seconds: 0.5, GBps: 0.134217728},
			{QueueDepth: 8, Reads: 512, Bytes: 512 << 20, Seconds: 0.25, GBps: 2.147483648},
		}},
		Candidates: []Candidate{
			{Tier: pack, CacheSlots: 700, CacheBytes: 734_003_200, Policy: "lfru", HitRate: 0.75, BeladyHitRate: 0.875,
				MissBytesPerToken: 2_621_440, IOSecondsPerToken: 0.00125, PredictedTokPerS: 39, BeladyTokPerS: 45},
			{Tier: q4, CacheSlots: 768, CacheBytes: 805_306_368, Policy: "lfru", HitRate: 0.8125, BeladyHitRate: 0.9,
				MissBytesPerToken: 1_966_080, IOSecondsPerToken: 0.001, PredictedTokPerS: 41.5, BeladyTokPerS: 47.25},
		},
	}
}

// TestPlanFixture: Write still writes, byte for byte, the plan checked in,
// and Read still reads it to the plan written.
func TestPlanFixture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.plan.json")
	if err := fixturePlan().Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fixturetest.Check(t, planFixture, got, *update)

	p, err := Read(planFixture)
	if err != nil {
		t.Fatal(err)
	}
	if want := fixturePlan(); !reflect.DeepEqual(p, want) {
		t.Errorf("read %+v\nwant %+v", p, want)
	}
}
