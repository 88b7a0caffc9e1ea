package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

// TestRowsCoversEachRowOnce: every row is visited exactly once, for
// counts below, at and above the number of parts.
func TestRowsCoversEachRowOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 3, 64} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 5, 16, 17, 100, 1001} {
			seen := make([]atomic.Int32, n)
			err := Rows(n, func(lo, hi int) error {
				if lo >= hi {
					return fmt.Errorf("empty part [%d, %d)", lo, hi)
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("GOMAXPROCS %d, n %d: %v", procs, n, err)
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("GOMAXPROCS %d, n %d: row %d visited %d times", procs, n, i, c)
				}
			}
		}
	}
}

// TestMapPartsInRowOrder: results come back in row order, in at most 16
// contiguous parts, whatever the processor count.
func TestMapPartsInRowOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	const n = 1000
	spans, err := Map(n, func(lo, hi int) ([2]int, error) { return [2]int{lo, hi}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) > maxParts {
		t.Fatalf("%d parts, want at most %d", len(spans), maxParts)
	}
	next := 0
	for _, s := range spans {
		if s[0] != next || s[1] <= s[0] {
			t.Fatalf("parts %v are not contiguous runs in order", spans)
		}
		next = s[1]
	}
	if next != n {
		t.Fatalf("parts %v end at %d, want %d", spans, next, n)
	}
}

// TestMapFirstError: the error of the first failing part in row order is
// returned, whichever finishes first, and no results with it.
func TestMapFirstError(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	errLow, errHigh := errors.New("low"), errors.New("high")
	got, err := Map(8, func(lo, hi int) (int, error) {
		switch lo {
		case 2:
			return 0, errLow
		case 6:
			return 0, errHigh
		}
		return lo, nil
	})
	if !errors.Is(err, errLow) || got != nil {
		t.Fatalf("got %v, %v; want nil, %v", got, err, errLow)
	}
	sums, err := Map(8, func(lo, hi int) (int, error) { return lo, nil })
	if err != nil || !slices.Equal(sums, []int{0, 2, 4, 6}) {
		t.Fatalf("got %v, %v; want [0 2 4 6]", sums, err)
	}
}
