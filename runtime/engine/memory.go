package engine

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Memory is how much memory this process may still use, and where that
// figure comes from.
type Memory struct {
	Available int64  `json:"available_bytes"`
	Source    string `json:"source"`
}

// AvailableMemory returns the smaller of the kernel's MemAvailable and
// the tightest headroom (limit − usage) of this process's memory cgroup
// and its ancestors, cgroup v2 or v1.
func AvailableMemory() (Memory, error) {
	m := Memory{Available: -1}
	if avail, ok := memAvailable(); ok {
		m = Memory{Available: avail, Source: "MemAvailable"}
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	for _, cg := range cgroupDirs(string(self)) {
		limit, ok1 := readInt(filepath.Join(cg.dir, cg.limit))
		usage, ok2 := readInt(filepath.Join(cg.dir, cg.usage))
		// v1 reports "no limit" as a huge number, v2 as "max".
		if !ok1 || !ok2 || limit <= 0 || limit >= 1<<60 {
			continue
		}
		if head := max(0, limit-usage); m.Available < 0 || head < m.Available {
			m = Memory{Available: head, Source: fmt.Sprintf("cgroup %s (limit %d)", cg.dir, limit)}
		}
	}
	if m.Available < 0 {
		return m, fmt.Errorf("engine: cannot tell how much memory is available (no /proc/meminfo or cgroup limit)")
	}
	return m, nil
}

type cgroupDir struct{ dir, limit, usage string }

// cgroupDirs lists the memory cgroup directories of this process and its
// ancestors, from /proc/self/cgroup: "N:memory:/path" (v1) or "0::/path"
// (v2).
func cgroupDirs(self string) []cgroupDir {
	var out []cgroupDir
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var root, limit, usage string
		switch {
		case parts[0] == "0" && parts[1] == "":
			root, limit, usage = "/sys/fs/cgroup", "memory.max", "memory.current"
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			root, limit, usage = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			out = append(out, cgroupDir{filepath.Join(root, p), limit, usage})
			if p == "/" {
				break
			}
		}
	}
	return out
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
	return max(0, min(mem.Available-residentBytes-autoCacheMargin, allExperts))
}

// autoCacheMargin is the memory AutoCacheBytes leaves for activations, the
// KV cache and the read buffers.
const autoCacheMargin = 512 << 20
