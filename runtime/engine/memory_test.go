package engine

import (
	"slices"
	"testing"
)

func TestCgroupDirs(t *testing.T) {
	got := cgroupDirs("4:memory:/process_api/abc/bench\n3:cpuset:/\n0::/user.slice/x\n")
	want := []cgroupDir{
		{"/sys/fs/cgroup/memory/process_api/abc/bench", "memory.limit_in_bytes", "memory.usage_in_bytes"},
		{"/sys/fs/cgroup/memory/process_api/abc", "memory.limit_in_bytes", "memory.usage_in_bytes"},
		{"/sys/fs/cgroup/memory/process_api", "memory.limit_in_bytes", "memory.usage_in_bytes"},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"},
		{"/sys/fs/cgroup/user.slice/x", "memory.max", "memory.current"},
		{"/sys/fs/cgroup/user.slice", "memory.max", "memory.current"},
		{"/sys/fs/cgroup", "memory.max", "memory.current"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("%v", got)
	}
	if m, err := AvailableMemory(); err != nil || m.Available <= 0 {
		t.Errorf("AvailableMemory: %+v %v", m, err)
	}
}
