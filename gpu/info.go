package gpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gguftool/gguftool/gpu/vk"
)

// DeviceInfo is what a device offers, read before it is opened.
type DeviceInfo struct {
	Index      int          `json:"index"`
	Name       string       `json:"name"`
	Type       string       `json:"type"` // discrete, integrated, virtual, cpu, other
	VendorID   uint32       `json:"vendor_id"`
	DeviceID   uint32       `json:"device_id"`
	API        string       `json:"api_version"`
	Driver     string       `json:"driver"`
	DriverInfo string       `json:"driver_info"`
	Heaps      []Heap       `json:"heaps"`
	Types      []MemoryType `json:"memory_types"`
	Limits     Limits       `json:"limits"`
	Features   Features     `json:"features"`
	// Unusable says why gguftool cannot run on the device ("" when it can).
	Unusable string `json:"unusable,omitempty"`

	apiVersion   uint32
	computeQueue int // a queue family with compute, or −1
	cacheUUID    [16]byte
}

// Heap is one memory heap.
type Heap struct {
	Size        uint64 `json:"size"`
	Budget      uint64 `json:"budget,omitempty"` // VK_EXT_memory_budget's, when the device reports one
	DeviceLocal bool   `json:"device_local"`
}

// MemoryType is one memory type: the heap it draws from and its
// properties.
type MemoryType struct {
	Heap         int  `json:"heap"`
	DeviceLocal  bool `json:"device_local"`
	HostVisible  bool `json:"host_visible"`
	HostCoherent bool `json:"host_coherent"`
	HostCached   bool `json:"host_cached"`
}

// Limits are the device limits the kernels are sized by.
type Limits struct {
	MaxStorageBufferRange    uint64 `json:"max_storage_buffer_range"`
	MaxComputeSharedMemory   uint32 `json:"max_compute_shared_memory"`
	MaxWorkgroupInvocations  uint32 `json:"max_workgroup_invocations"`
	MaxWorkgroupCount        uint32 `json:"max_workgroup_count_x"`
	MaxPushConstants         uint32 `json:"max_push_constants"`
	MaxMemoryAllocationCount uint32 `json:"max_memory_allocations"`
	SubgroupSize             uint32 `json:"subgroup_size"`
}

// Features are the capabilities kernel variants are chosen by.
type Features struct {
	Storage16          bool `json:"storage_buffer_16bit"` // required
	Storage8           bool `json:"storage_buffer_8bit"`
	Float16            bool `json:"shader_float16"`
	Int8               bool `json:"shader_int8"`
	Int16              bool `json:"shader_int16"`
	Int64              bool `json:"shader_int64"`
	SubgroupArithmetic bool `json:"subgroup_arithmetic"` // subgroupAdd in compute shaders
	SubgroupSizeCtl    bool `json:"subgroup_size_control"`
	TimelineSemaphore  bool `json:"timeline_semaphore"`
	IntegerDotProduct  bool `json:"integer_dot_product"`
	MemoryBudget       bool `json:"memory_budget"`        // VK_EXT_memory_budget
	ExternalMemoryHost bool `json:"external_memory_host"` // VK_EXT_external_memory_host
}

// RequiredFeature names what a device must have and lacks ("" when it
// has everything).
func (d DeviceInfo) RequiredFeature() string {
	switch {
	case d.apiVersion < vk.MakeAPIVersion(0, 1, 2, 0):
		return "Vulkan 1.2 (the device offers " + d.API + ")"
	case d.computeQueue < 0:
		return "a compute queue"
	case !d.Features.Storage16:
		return "storageBuffer16BitAccess"
	}
	return ""
}

func (in *Instance) readDevices() error {
	var n uint32
	if err := vk.Check("vkEnumeratePhysicalDevices", in.cmd.EnumeratePhysicalDevices(in.handle, &n, nil)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	in.physical = make([]vk.PhysicalDevice, n)
	if err := vk.Check("vkEnumeratePhysicalDevices", in.cmd.EnumeratePhysicalDevices(in.handle, &n, &in.physical[0])); err != nil {
		return err
	}
	in.physical = in.physical[:n]
	for i, pd := range in.physical {
		info := in.describe(pd)
		info.Index = i
		if why := info.RequiredFeature(); why != "" {
			info.Unusable = "lacks " + why
		}
		in.devices = append(in.devices, info)
	}
	return nil
}

var deviceTypes = map[vk.PhysicalDeviceType]string{
	vk.PhysicalDeviceTypeDiscreteGpu: "discrete", vk.PhysicalDeviceTypeIntegratedGpu: "integrated",
	vk.PhysicalDeviceTypeVirtualGpu: "virtual", vk.PhysicalDeviceTypeCpu: "cpu", vk.PhysicalDeviceTypeOther: "other",
}

// describe reads one device's properties, features, memory and queues.
func (in *Instance) describe(pd vk.PhysicalDevice) DeviceInfo {
	var pin runtime.Pinner
	defer pin.Unpin()
	p11 := &vk.PhysicalDeviceVulkan11Properties{SType: vk.StructureTypePhysicalDeviceVulkan11Properties}
	p12 := &vk.PhysicalDeviceVulkan12Properties{SType: vk.StructureTypePhysicalDeviceVulkan12Properties, PNext: unsafe.Pointer(p11)}
	props := &vk.PhysicalDeviceProperties2{SType: vk.StructureTypePhysicalDeviceProperties2, PNext: unsafe.Pointer(p12)}
	pin.Pin(p11)
	pin.Pin(p12)
	in.cmd.GetPhysicalDeviceProperties2(pd, props)
	pr := props.Properties
	d := DeviceInfo{
		Name: vk.GoString(pr.DeviceName[:]), Type: deviceTypes[pr.DeviceType],
		VendorID: pr.VendorID, DeviceID: pr.DeviceID, API: vk.APIVersionString(pr.ApiVersion),
		Driver: vk.GoString(p12.DriverName[:]), DriverInfo: vk.GoString(p12.DriverInfo[:]),
		apiVersion: pr.ApiVersion, cacheUUID: pr.PipelineCacheUUID, computeQueue: -1,
		Limits: Limits{
			MaxStorageBufferRange: uint64(pr.Limits.MaxStorageBufferRange), MaxComputeSharedMemory: pr.Limits.MaxComputeSharedMemorySize,
			MaxWorkgroupInvocations: pr.Limits.MaxComputeWorkGroupInvocations, MaxWorkgroupCount: pr.Limits.MaxComputeWorkGroupCount[0],
			MaxPushConstants: pr.Limits.MaxPushConstantsSize, MaxMemoryAllocationCount: pr.Limits.MaxMemoryAllocationCount,
			SubgroupSize: p11.SubgroupSize,
		},
	}
	if p11.SubgroupSupportedStages&vk.ShaderStageFlags(vk.ShaderStageComputeBit) != 0 &&
		p11.SubgroupSupportedOperations&vk.SubgroupFeatureFlags(vk.SubgroupFeatureArithmeticBit) != 0 {
		d.Features.SubgroupArithmetic = true
	}
	exts := in.deviceExtensions(pd)
	d.Features.MemoryBudget = exts["VK_EXT_memory_budget"]
	d.Features.ExternalMemoryHost = exts["VK_EXT_external_memory_host"]
	in.readFeatures(pd, &d)
	in.readMemory(pd, &d)
	in.readQueues(pd, &d)
	return d
}

func (in *Instance) readFeatures(pd vk.PhysicalDevice, d *DeviceInfo) {
	var pin runtime.Pinner
	defer pin.Unpin()
	f11 := &vk.PhysicalDeviceVulkan11Features{SType: vk.StructureTypePhysicalDeviceVulkan11Features}
	f12 := &vk.PhysicalDeviceVulkan12Features{SType: vk.StructureTypePhysicalDeviceVulkan12Features, PNext: unsafe.Pointer(f11)}
	f13 := &vk.PhysicalDeviceVulkan13Features{SType: vk.StructureTypePhysicalDeviceVulkan13Features}
	if d.apiVersion >= vk.MakeAPIVersion(0, 1, 3, 0) {
		f13.PNext = unsafe.Pointer(f12)
	}
	head := unsafe.Pointer(f12)
	if d.apiVersion >= vk.MakeAPIVersion(0, 1, 3, 0) {
		head = unsafe.Pointer(f13)
	}
	feats := &vk.PhysicalDeviceFeatures2{SType: vk.StructureTypePhysicalDeviceFeatures2, PNext: head}
	pin.Pin(f11)
	pin.Pin(f12)
	pin.Pin(f13)
	in.cmd.GetPhysicalDeviceFeatures2(pd, feats)
	f := &d.Features
	f.Storage16 = f11.StorageBuffer16BitAccess == vk.True
	f.Storage8 = f12.StorageBuffer8BitAccess == vk.True
	f.Float16 = f12.ShaderFloat16 == vk.True
	f.Int8 = f12.ShaderInt8 == vk.True
	f.TimelineSemaphore = f12.TimelineSemaphore == vk.True
	f.Int16 = feats.Features.ShaderInt16 == vk.True
	f.Int64 = feats.Features.ShaderInt64 == vk.True
	f.SubgroupSizeCtl = f13.SubgroupSizeControl == vk.True
	f.IntegerDotProduct = f13.ShaderIntegerDotProduct == vk.True
}

func (in *Instance) readMemory(pd vk.PhysicalDevice, d *DeviceInfo) {
	var pin runtime.Pinner
	defer pin.Unpin()
	budget := &vk.PhysicalDeviceMemoryBudgetPropertiesEXT{SType: vk.StructureTypePhysicalDeviceMemoryBudgetPropertiesEXT}
	mem := &vk.PhysicalDeviceMemoryProperties2{SType: vk.StructureTypePhysicalDeviceMemoryProperties2}
	if d.Features.MemoryBudget {
		mem.PNext = unsafe.Pointer(budget)
		pin.Pin(budget)
	}
	in.cmd.GetPhysicalDeviceMemoryProperties2(pd, mem)
	m := mem.MemoryProperties
	for i := uint32(0); i < m.MemoryHeapCount && i < uint32(len(m.MemoryHeaps)); i++ {
		h := m.MemoryHeaps[i]
		d.Heaps = append(d.Heaps, Heap{Size: uint64(h.Size), Budget: uint64(budget.HeapBudget[i]),
			DeviceLocal: h.Flags&vk.MemoryHeapFlags(vk.MemoryHeapDeviceLocalBit) != 0})
	}
	for i := uint32(0); i < m.MemoryTypeCount && i < uint32(len(m.MemoryTypes)); i++ {
		t := m.MemoryTypes[i]
		has := func(b vk.MemoryPropertyFlagBits) bool { return t.PropertyFlags&vk.MemoryPropertyFlags(b) != 0 }
		d.Types = append(d.Types, MemoryType{Heap: int(t.HeapIndex), DeviceLocal: has(vk.MemoryPropertyDeviceLocalBit),
			HostVisible: has(vk.MemoryPropertyHostVisibleBit), HostCoherent: has(vk.MemoryPropertyHostCoherentBit),
			HostCached: has(vk.MemoryPropertyHostCachedBit)})
	}
}

func (in *Instance) readQueues(pd vk.PhysicalDevice, d *DeviceInfo) {
	var n uint32
	in.cmd.GetPhysicalDeviceQueueFamilyProperties(pd, &n, nil)
	if n == 0 {
		return
	}
	qs := make([]vk.QueueFamilyProperties, n)
	in.cmd.GetPhysicalDeviceQueueFamilyProperties(pd, &n, &qs[0])
	for i, q := range qs[:n] {
		if q.QueueFlags&vk.QueueFlags(vk.QueueComputeBit) != 0 && q.QueueCount > 0 {
			d.computeQueue = i
			return
		}
	}
}

func (in *Instance) deviceExtensions(pd vk.PhysicalDevice) map[string]bool {
	var n uint32
	out := map[string]bool{}
	if in.cmd.EnumerateDeviceExtensionProperties(pd, nil, &n, nil) < 0 || n == 0 {
		return out
	}
	props := make([]vk.ExtensionProperties, n)
	if in.cmd.EnumerateDeviceExtensionProperties(pd, nil, &n, &props[0]) < 0 {
		return out
	}
	for _, p := range props[:n] {
		out[vk.GoString(p.ExtensionName[:])] = true
	}
	return out
}

// FeatureError says a device lacks what gguftool needs.
type FeatureError struct {
	Device  string
	Feature string
}

func (e *FeatureError) Error() string {
	return fmt.Sprintf("Vulkan device %q lacks %s, which gguftool's kernels need", e.Device, e.Feature)
}
