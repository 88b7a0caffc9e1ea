package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gguftool/gguftool/gguf"
)

// TestCacheSize: a cache asked for by slots or by bytes is clamped the
// same way, with a note, to the pack's records and to the memory
// available; a size below one record is rounded up to one slot; an
// automatic cache with no room says so; only a cache asked to be empty is
// empty without a note.
func TestCacheSize(t *testing.T) {
	const stride, records, resident = 1 << 20, 48, 1 << 30
	plenty := func() (Memory, error) { return Memory{Available: 1 << 40, Source: "MemAvailable"}, nil }
	tight := func() (Memory, error) {
		return Memory{Available: resident + autoCacheMargin + 10*stride, Source: "cgroup /x (limit 2)"}, nil
	}
	none := func() (Memory, error) { return Memory{Available: resident, Source: "MemAvailable"}, nil }
	unknown := func() (Memory, error) { return Memory{}, errors.New("no /proc/meminfo") }
	for _, tc := range []struct {
		name     string
		o        CacheOptions
		memory   func() (Memory, error)
		want     int64
		wantNote string
	}{
		{"slots that fit", CacheOptions{Slots: 5}, plenty, 5, ""},
		{"bytes that fit", CacheOptions{Bytes: 5*stride + 7}, plenty, 5, ""},
		{"slots beyond the pack", CacheOptions{Slots: 10_000_000}, plenty, records,
			"expert cache of 10000000 slots is more than the pack's 48 expert records: clamped to 48 slots"},
		{"bytes beyond the pack", CacheOptions{Bytes: 1 << 40}, plenty, records,
			"expert cache of 1099511627776 bytes (1.0 TiB) is more than the pack's 48 expert records: clamped to 48 slots"},
		{"slots beyond memory", CacheOptions{Slots: 40}, tight, 10,
			"expert cache of 40 slots is more than the memory available allows"},
		{"bytes beyond memory", CacheOptions{Bytes: 40 * stride}, tight, 10,
			"is more than the memory available allows"},
		{"at least one slot when memory is short", CacheOptions{Slots: 40}, none, 1, "clamped to 1 slot ("},
		{"memory unknown: only the pack bounds", CacheOptions{Slots: 100}, unknown, records, "clamped to 48 slots"},
		{"smaller than a record", CacheOptions{Bytes: 1}, plenty, 1,
			"expert cache of 1 byte is smaller than one expert record (1048576 bytes (1.0 MiB)): rounded up to 1 slot"},
		{"auto", CacheOptions{Auto: true}, tight, 10, ""},
		{"auto with no room", CacheOptions{Auto: true}, none, 0, "automatic expert cache: no room for one expert record"},
		{"no cache asked for", CacheOptions{}, plenty, 0, ""},
		{"slots win over auto", CacheOptions{Slots: 3, Auto: true}, none, 1, "memory available"},
	} {
		got, note, err := cacheSize(tc.o, stride, records, resident, tc.memory)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want || (tc.wantNote == "") != (note == "") || !strings.Contains(note, tc.wantNote) {
			t.Errorf("%s: %d slots, note %q; want %d slots, a note containing %q", tc.name, got, note, tc.want, tc.wantNote)
		}
	}
	if _, _, err := cacheSize(CacheOptions{Auto: true}, stride, records, resident, unknown); err == nil {
		t.Error("auto with no way to tell the memory: no error")
	}
}

// TestOpenClampsTheCache: a pack opened with more slots, or more bytes,
// than it has expert records gets a cache of every record and a note
// saying so; one byte gets one slot.
func TestOpenClampsTheCache(t *testing.T) {
	_, pack := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil) // 3 layers × 16 experts
	for _, tc := range []struct {
		o         CacheOptions
		wantSlots int
		wantNote  string
	}{
		{CacheOptions{Slots: 100_000}, 48, "expert cache of 100000 slots is more than the pack's 48 expert records: clamped to 48 slots"},
		{CacheOptions{Bytes: 1 << 40}, 48, "is more than the pack's 48 expert records: clamped to 48 slots"},
		{CacheOptions{Bytes: 1}, 1, "rounded up to 1 slot"},
		{CacheOptions{Slots: 2}, 2, ""},
	} {
		m := open(t, pack, Options{Threads: 1, Cache: tc.o})
		got := m.Experts().Stats().CacheSlots
		notes := strings.Join(m.Notes, "\n")
		if got != tc.wantSlots || len(m.Notes) > 1 || (tc.wantNote == "") != (notes == "") || !strings.Contains(notes, tc.wantNote) {
			t.Errorf("%+v: %d slots, notes %q; want %d slots, one note containing %q", tc.o, got, m.Notes, tc.wantSlots, tc.wantNote)
		}
	}
	if _, err := Open(context.Background(), pack, Options{Cache: CacheOptions{Slots: -1}}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative cache: %v", err)
	}
}

// TestNegativeContext: a negative context length is refused, not taken
// for the default.
func TestNegativeContext(t *testing.T) {
	src, _ := testModel(t, "qwen3moe", gguf.TypeQ8_0, nil)
	m := open(t, src, Options{Threads: 1})
	if _, err := m.Generate(context.Background(), testPrompt, GenerateOptions{MaxTokens: 1, Context: -1}); err == nil ||
		!strings.Contains(err.Error(), "a context of -1 positions") {
		t.Errorf("Generate: %v", err)
	}
	if _, err := m.NewSession(-1); err == nil || !strings.Contains(err.Error(), "a context of -1 positions") {
		t.Errorf("NewSession: %v", err)
	}
}
