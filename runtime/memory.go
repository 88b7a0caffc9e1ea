package runtime

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is how much memory this process may still use, and where that
// figure comes from.
type Memory struct {
	Available int64  `json:"available_bytes"`
	Source    string `json:"source"`
}

// AvailableMemory returns the smaller of the cgroup's headroom (limit −
// usage, cgroup v2 or v1) and the kernel's MemAvailable.
func AvailableMemory() (Memory, error) {
	m := Memory{Available: -1}
	if avail, ok := memAvailable(); ok {
		m = Memory{Available: avail, Source: "MemAvailable"}
	}
	for _, cg := range []struct{ limit, usage, name string }{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "cgroup v2 memory.max"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes", "cgroup v1 memory.limit_in_bytes"},
	} {
		limit, ok1 := readInt(cg.limit)
		usage, ok2 := readInt(cg.usage)
		// v1 reports "no limit" as a huge number.
		if !ok1 || !ok2 || limit <= 0 || limit >= 1<<60 {
			continue
		}
		if head := max(0, limit-usage); m.Available < 0 || head < m.Available {
			m = Memory{Available: head, Source: cg.name}
		}
		break
	}
	if m.Available < 0 {
		return m, fmt.Errorf("runtime: cannot tell how much memory is available (no /proc/meminfo or cgroup limit)")
	}
	return m, nil
}

func memAvailable() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// AutoCacheBytes sizes an expert cache from the memory available: what is
// left after the resident weights and a margin for activations, the KV
// cache and the read buffers, and no more than every expert.
func AutoCacheBytes(mem Memory, residentBytes, allExperts int64) int64 {
	const margin = 512 << 20
	return max(0, min(mem.Available-residentBytes-margin, allExperts))
}
