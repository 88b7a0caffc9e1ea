package gpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/gguftool/gguftool/gpu/vk"
)

// The tests run on one device, with the Khronos validation layer on:
// lavapipe where Mesa's driver is installed (VK_DRIVER_FILES points the
// loader at it unless set), a real GPU when GGUFTOOL_TEST_GPU_DEVICE
// names one. Without Vulkan they skip, unless GGUFTOOL_REQUIRE_GPU=1 (CI)
// makes that a failure.

const lavapipeICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"

var (
	testInstance *Instance
	testErr      error
)

func TestMain(m *testing.M) {
	if os.Getenv("VK_DRIVER_FILES") == "" && os.Getenv("VK_ICD_FILENAMES") == "" {
		if _, err := os.Stat(lavapipeICD); err == nil {
			os.Setenv("VK_DRIVER_FILES", lavapipeICD)
		}
	}
	testInstance, testErr = OpenInstance(InstanceOptions{Validate: true})
	code := m.Run()
	if testInstance != nil {
		testInstance.Close()
	}
	os.Exit(code)
}

// testDeviceIndex is the device the tests run on.
func testDeviceIndex(t testing.TB) int {
	if s := os.Getenv("GGUFTOOL_TEST_GPU_DEVICE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("GGUFTOOL_TEST_GPU_DEVICE=%q: %v", s, err)
		}
		return n
	}
	for _, d := range testInstance.Devices() {
		if d.Unusable == "" {
			return d.Index
		}
	}
	return 0
}

// openTestDevice opens the test device with opts, or skips; it fails the
// test if the validation layer reported anything by the end of it.
func openTestDevice(t testing.TB, opts DeviceOptions) *Device {
	t.Helper()
	if testErr != nil || len(testInstance.Devices()) == 0 {
		why := fmt.Sprint("no Vulkan device (install Debian's mesa-vulkan-drivers, libvulkan1 and vulkan-validationlayers): ", testErr)
		if os.Getenv("GGUFTOOL_REQUIRE_GPU") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	d, err := testInstance.OpenDevice(testDeviceIndex(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		for _, m := range testInstance.Messages() {
			t.Errorf("validation layer: %s", m)
		}
	})
	return d
}

func TestDevicesDescribed(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	info := d.Info()
	if info.Name == "" || info.API == "" || len(info.Heaps) == 0 || len(info.Types) == 0 {
		t.Fatalf("device described poorly: %+v", info)
	}
	if info.Limits.SubgroupSize == 0 || info.Limits.MaxStorageBufferRange == 0 {
		t.Errorf("limits: %+v", info.Limits)
	}
	if !info.Features.Storage16 {
		t.Error("an opened device lacks the required 16-bit storage")
	}
	t.Logf("%s (%s, driver %s %s), API %s, subgroup %d, features %+v", info.Name, info.Type, info.Driver, info.DriverInfo, info.API, info.Limits.SubgroupSize, info.Features)
}

func TestOpenDeviceOutOfRange(t *testing.T) {
	openTestDevice(t, DeviceOptions{}) // skips without Vulkan
	_, err := testInstance.OpenDevice(len(testInstance.Devices()), DeviceOptions{})
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("opening a device past the last: %v", err)
	}
}

func TestBudget(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{Budget: 1 << 20})
	a, err := d.Alloc(768<<10, "first")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Alloc(512<<10, "second")
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrBudget) {
		t.Fatalf("over the budget: %v", err)
	}
	if be.Need != 512<<10 || be.Budget != 1<<20 || be.Used != 768<<10 {
		t.Errorf("budget error says %+v", be)
	}
	t.Log(err)
	a.Free()
	if d.Used() != 0 {
		t.Errorf("after freeing everything, %d bytes are counted", d.Used())
	}
	b, err := d.Alloc(1<<20, "all of it")
	if err != nil {
		t.Fatalf("the whole budget after a free: %v", err)
	}
	b.Free()
	if d.Peak() != 1<<20 {
		t.Errorf("peak %d, want %d", d.Peak(), 1<<20)
	}
	if _, err := testInstance.OpenDevice(testDeviceIndex(t), DeviceOptions{Budget: 1 << 62}); !errors.Is(err, ErrBudget) {
		t.Errorf("a budget larger than the device: %v", err)
	}
}

// TestWriteRead round-trips bytes at odd offsets and lengths, in place and
// through staging, across the staging buffer's size.
func TestWriteRead(t *testing.T) {
	for _, staging := range []bool{false, true} {
		d := openTestDevice(t, DeviceOptions{Staging: staging})
		n := int64(stagingBytes + stagingBytes/2 + 7)
		b, err := d.Alloc(n+16, "round trip")
		if err != nil {
			t.Fatal(err)
		}
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i>>9)
		}
		if err := d.Write(b, 3, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := d.Read(b, 3, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != src[i] {
				t.Fatalf("staging=%v: byte %d is %d, wrote %d", staging, i, got[i], src[i])
			}
		}
		if err := d.Write(b, n, make([]byte, 17)); err == nil {
			t.Error("a write past the end gave no error")
		}
		if m := d.Moved(); m.Up != n || m.Down != n {
			t.Errorf("moved %+v, want %d each way", m, n)
		}
		b.Free()
	}
}

func TestPipelineCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	d := openTestDevice(t, DeviceOptions{PipelineCacheDir: dir})
	if _, err := d.Kernel("matmul_q8_0", 4, matmulPushBytes, matmulWorkgroup, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	path := d.pipelineCachePath()
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		t.Fatalf("no pipeline cache written: %v", err)
	}
	// A corrupt cache is dropped, not fatal.
	if err := os.WriteFile(path, []byte("not a pipeline cache"), 0o644); err != nil {
		t.Fatal(err)
	}
	d2 := openTestDevice(t, DeviceOptions{PipelineCacheDir: dir})
	if _, err := d2.Kernel("matmul_q8_0", 4, matmulPushBytes, matmulWorkgroup, 1, 0); err != nil {
		t.Fatal(err)
	}
}

// TestValidationLayerReports makes an invalid call (a buffer of size 0)
// and requires the layer's message to reach Messages: the check every
// other test ends with would otherwise pass for want of a messenger.
func TestValidationLayerReports(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	info := &vk.BufferCreateInfo{SType: vk.StructureTypeBufferCreateInfo, Size: 0,
		Usage: vk.BufferUsageFlags(vk.BufferUsageStorageBufferBit), SharingMode: vk.SharingModeExclusive}
	var buf vk.Buffer
	d.cmd.CreateBuffer(d.handle, info, nil, &buf)
	if buf != 0 {
		d.cmd.DestroyBuffer(d.handle, buf, nil)
	}
	msgs := testInstance.Messages()
	if len(msgs) == 0 {
		t.Fatal("an invalid vkCreateBuffer gave no validation message")
	}
	t.Logf("the layer said: %.200s", msgs[0])
}

// TestZeroAndCopy: recorded fills and copies land where they are asked
// to, after what came before them in the batch.
func TestZeroAndCopy(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	b1, _ := d.Alloc(4*64, "a")
	b2, _ := d.Alloc(4*64, "b")
	defer b1.Free()
	defer b2.Free()
	src := make([]float32, 64)
	for i := range src {
		src[i] = float32(i + 1)
	}
	d.WriteFloats(b1, 0, src)
	poison(t, d, b2, 64)
	b, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b.Zero(Span{b1, 10}, 5)
	b.CopyFloats(Span{b2, 3}, Span{b1, 8}, 20)
	if err := b.Submit(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 64)
	d.ReadFloats(b2, 0, got)
	for i := 3; i < 23; i++ {
		want := src[i+5]
		if i+5 >= 10 && i+5 < 15 {
			want = 0
		}
		if got[i] != want {
			t.Fatalf("b2[%d] = %v, want %v", i, got[i], want)
		}
	}
}

// TestCopyBandwidth: the probe runs, gives a positive rate and leaves the
// device as it found it; a bad size is an error.
func TestCopyBandwidth(t *testing.T) {
	d := openTestDevice(t, DeviceOptions{})
	used := d.Used()
	bw, err := d.CopyBandwidth(4<<20, 4)
	if err != nil || bw <= 0 || math.IsInf(bw, 0) {
		t.Fatalf("CopyBandwidth: %v, %v", bw, err)
	}
	if d.Used() != used {
		t.Errorf("after the probe %d bytes are in use, before %d", d.Used(), used)
	}
	if _, err := d.CopyBandwidth(0, 4); err == nil {
		t.Error("CopyBandwidth of 0 bytes: no error")
	}
	t.Logf("lavapipe copies at %.2f GB/s (read + written)", bw/1e9)
}
