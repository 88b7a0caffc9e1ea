package planner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/ioengine"
)

// DiskPoint is the disk's throughput at one queue depth: waves of
// QueueDepth expert records, each wave submitted together and waited for
// to its last read, as the runtime reads one layer's misses.
type DiskPoint struct {
	QueueDepth int     `json:"queue_depth"`
	Reads      int     `json:"reads"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	GBps       float64 `json:"gb_per_s"`
}

// Disk is the queue-depth curve of a pack's disk.
type Disk struct {
	Backend     string      `json:"backend"`
	Direct      bool        `json:"o_direct"`
	RecordBytes int64       `json:"record_bytes"`
	Points      []DiskPoint `json:"points"` // by queue depth, ascending
}

// DefaultDepths are the queue depths MeasureDisk tries by default.
var DefaultDepths = []int{1, 2, 4, 8, 16, 32}

// MeasureDisk reads random expert records of the pack in dir with
// O_DIRECT (where the file system allows it) at each queue depth of
// depths, about perDepth bytes each (at least 16 waves, at most 10 s),
// and returns the curve. The records are drawn from a generator seeded
// with seed over every layer and expert.
func MeasureDisk(ctx context.Context, dir string, depths []int, perDepth int64, seed uint64) (Disk, error) {
	if len(depths) == 0 {
		return Disk{}, fmt.Errorf("planner: no queue depths to measure")
	}
	p, err := container.OpenDir(dir)
	if err != nil {
		return Disk{}, err
	}
	defer p.Close()
	maxDepth := slices.Max(depths)
	eng, err := ioengine.New(ioengine.Options{Backend: ioengine.Auto, QueueDepth: maxDepth, Direct: true})
	if err != nil {
		return Disk{}, err
	}
	defer eng.Close()
	rr, err := p.NewRecordReader(eng)
	if err != nil {
		return Disk{}, err
	}
	defer rr.Close()
	stride := p.MaxStride()
	pool, err := ioengine.NewPool(int(stride), maxDepth)
	if err != nil {
		return Disk{}, err
	}
	defer pool.Close()
	layers := make([]int, 0, len(p.Containers))
	for l := range p.Containers {
		layers = append(layers, l)
	}
	sort.Ints(layers)
	d := Disk{Backend: eng.Backend().String(), Direct: rr.File(layers[0]).Direct(), RecordBytes: stride}
	rng := rand.New(rand.NewPCG(seed, 0x706c616e))
	draw := func() (int, int) {
		l := layers[rng.IntN(len(layers))]
		return l, rng.IntN(p.Containers[l].Header.Experts)
	}
	for _, qd := range depths {
		if qd < 1 {
			return Disk{}, fmt.Errorf("planner: queue depth %d: want at least 1", qd)
		}
		pt, err := measureDepth(ctx, rr, pool, qd, perDepth, draw)
		if err != nil {
			return Disk{}, err
		}
		d.Points = append(d.Points, pt)
	}
	slices.SortFunc(d.Points, func(a, b DiskPoint) int { return a.QueueDepth - b.QueueDepth })
	return d, nil
}

// measureDepth reads waves of qd random records until it has read about
// budget bytes (at least 16 waves) or 10 s have passed.
func measureDepth(ctx context.Context, rr *container.RecordReader, pool *ioengine.Pool, qd int, budget int64,
	draw func() (int, int)) (DiskPoint, error) {
	pt := DiskPoint{QueueDepth: qd}
	reads := make([]*container.RecordRead, qd)
	start := time.Now()
	for waves := 0; waves < 16 || (pt.Bytes < budget && time.Since(start) < 10*time.Second); waves++ {
		for i := range reads {
			b, err := pool.Get(ctx)
			if err != nil {
				return pt, err
			}
			l, e := draw()
			reads[i] = &container.RecordRead{Layer: l, Expert: e, Buf: b}
		}
		batch, err := rr.Submit(ctx, reads)
		if err == nil {
			err = batch.Wait()
		}
		for _, rd := range reads {
			if err == nil {
				err = rd.Err()
			}
			if err == nil {
				pt.Bytes += int64(len(rd.Record()))
			}
			_ = pool.Put(rd.Buf)
		}
		if err != nil {
			return pt, err
		}
		pt.Reads += qd
	}
	pt.Seconds = time.Since(start).Seconds()
	pt.GBps = float64(pt.Bytes) / pt.Seconds / 1e9
	return pt, nil
}

// WaveSeconds is the time a wave of n reads of size bytes each takes: n ×
// size at the bandwidth measured at queue depth n, interpolated linearly
// between the measured depths and held at the ends (a wave deeper than
// the deepest measured goes no faster). Zero reads take no time.
func (d Disk) WaveSeconds(n int, size int64) float64 {
	if n <= 0 || len(d.Points) == 0 {
		return 0
	}
	return float64(int64(n)*size) / (d.GBpsAt(n) * 1e9)
}

// GBpsAt is the bandwidth at queue depth n, interpolated.
func (d Disk) GBpsAt(n int) float64 {
	pts := d.Points
	if n <= pts[0].QueueDepth {
		return pts[0].GBps
	}
	for i := 1; i < len(pts); i++ {
		if n <= pts[i].QueueDepth {
			a, b := pts[i-1], pts[i]
			f := float64(n-a.QueueDepth) / float64(b.QueueDepth-a.QueueDepth)
			return a.GBps + f*(b.GBps-a.GBps)
		}
	}
	return pts[len(pts)-1].GBps
}
