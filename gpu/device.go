package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gguftool/gguftool/gpu/vk"
	"github.com/gguftool/gguftool/internal/atomicfile"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// DeviceOptions say how to open a device.
type DeviceOptions struct {
	// Budget bounds the device-local bytes this process allocates; 0 is
	// the device-local heap's budget (or its size, without
	// VK_EXT_memory_budget).
	Budget int64
	// PipelineCacheDir keeps the compiled pipelines between runs; "" keeps
	// them for the process only.
	PipelineCacheDir string
	// Staging sends every upload and read-back through a staging buffer
	// and a copy, as on a device without host-visible VRAM, even where
	// device memory is mapped (the tests run both paths on lavapipe).
	Staging bool
	// MaxBuffer bounds one buffer below the device's storage-buffer range
	// (the tests split small matrices as lavapipe's 128 MiB splits large
	// ones); 0 is the device's limit.
	MaxBuffer int64
	// Plain runs the plain variant of every kernel, whatever features the
	// device has (the tests run both).
	Plain bool
}

// Device is an opened device: one compute queue, its memory and the
// pipelines built on it. Its methods are safe for concurrent use: each
// batch records into its own command buffer, and the queue takes one
// submission at a time.
type Device struct {
	in     *Instance
	info   DeviceInfo
	opts   DeviceOptions
	cmd    *vk.Commands
	handle vk.Device
	queue  vk.Queue

	qmu      sync.Mutex // the queue: one submission at a time
	smu      sync.Mutex // the staging buffer
	cmu      sync.Mutex // the execution contexts
	free     []*execContext
	contexts []*execContext
	pcache   vk.PipelineCache
	kmu      sync.Mutex // kernels
	kernels  map[string]*Kernel
	staging  *Buffer
	dummy    *Buffer // bound where a kernel's optional binding is unused

	deviceType   int // memory type for device-local buffers
	uploadType   int // host-visible, coherent
	readbackType int // host-visible, cached where there is one
	mappedVRAM   bool

	amu    sync.Mutex // the accounting below
	live   map[*Buffer]struct{}
	budget int64
	used   int64
	peak   int64
	moved  Traffic
}

// Traffic counts the bytes moved each way.
type Traffic struct {
	Up   int64 `json:"uploaded"`
	Down int64 `json:"read_back"`
}

// descriptorsPerPool bounds the dispatches of one batch: the pool is
// reset after each batch completes.
const (
	setsPerPool        = 4096
	buffersPerPool     = setsPerPool * 8
	stagingBytes       = 32 << 20
	pipelineCacheLimit = 256 << 20 // a larger cache file is ignored, never read
)

// OpenDevice opens device index of the instance.
func (in *Instance) OpenDevice(index int, opts DeviceOptions) (*Device, error) {
	if index < 0 || index >= len(in.devices) {
		return nil, fmt.Errorf("%w: device %d does not exist (the loader sees %d, through %s)", ErrNoDevice, index, len(in.devices), driverFilesHint())
	}
	info := in.devices[index]
	if why := info.RequiredFeature(); why != "" {
		return nil, &FeatureError{Device: info.Name, Feature: why}
	}
	if opts.MaxBuffer > 0 && uint64(opts.MaxBuffer) < info.Limits.MaxStorageBufferRange {
		info.Limits.MaxStorageBufferRange = uint64(opts.MaxBuffer)
	}
	d := &Device{in: in, info: info, opts: opts, cmd: in.cmd, kernels: map[string]*Kernel{}, live: map[*Buffer]struct{}{}}
	if err := d.create(in.physical[index]); err != nil {
		return nil, err
	}
	if err := d.setup(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// create makes the logical device with the features the kernels use.
func (d *Device) create(pd vk.PhysicalDevice) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	f := d.info.Features
	f11 := &vk.PhysicalDeviceVulkan11Features{SType: vk.StructureTypePhysicalDeviceVulkan11Features, StorageBuffer16BitAccess: vk.True}
	f12 := &vk.PhysicalDeviceVulkan12Features{SType: vk.StructureTypePhysicalDeviceVulkan12Features, PNext: unsafe.Pointer(f11),
		StorageBuffer8BitAccess: b32(f.Storage8), ShaderFloat16: b32(f.Float16), ShaderInt8: b32(f.Int8),
		TimelineSemaphore: b32(f.TimelineSemaphore)}
	feats := &vk.PhysicalDeviceFeatures2{SType: vk.StructureTypePhysicalDeviceFeatures2, PNext: unsafe.Pointer(f12)}
	feats.Features.ShaderInt16 = b32(f.Int16)
	feats.Features.ShaderInt64 = b32(f.Int64)
	if d.info.apiVersion >= vk.MakeAPIVersion(0, 1, 3, 0) {
		f13 := &vk.PhysicalDeviceVulkan13Features{SType: vk.StructureTypePhysicalDeviceVulkan13Features, PNext: unsafe.Pointer(f12),
			SubgroupSizeControl: b32(f.SubgroupSizeCtl), ShaderIntegerDotProduct: b32(f.IntegerDotProduct)}
		pin.Pin(f13)
		feats.PNext = unsafe.Pointer(f13)
	}
	pin.Pin(f11)
	pin.Pin(f12)
	pin.Pin(feats)
	priority := new(float32)
	*priority = 1
	pin.Pin(priority)
	queue := &vk.DeviceQueueCreateInfo{SType: vk.StructureTypeDeviceQueueCreateInfo,
		QueueFamilyIndex: uint32(d.info.computeQueue), QueueCount: 1, PQueuePriorities: priority}
	pin.Pin(queue)
	var exts []string
	if f.MemoryBudget {
		exts = append(exts, "VK_EXT_memory_budget")
	}
	info := &vk.DeviceCreateInfo{SType: vk.StructureTypeDeviceCreateInfo, PNext: unsafe.Pointer(feats),
		QueueCreateInfoCount: 1, PQueueCreateInfos: queue,
		EnabledExtensionCount: uint32(len(exts)), PpEnabledExtensionNames: cStrings(&pin, exts)}
	pin.Pin(info)
	if err := d.check("vkCreateDevice", d.cmd.CreateDevice(pd, info, nil, &d.handle)); err != nil {
		return err
	}
	d.cmd.GetDeviceQueue(d.handle, uint32(d.info.computeQueue), 0, &d.queue)
	return nil
}

func b32(b bool) vk.Bool32 {
	if b {
		return vk.True
	}
	return vk.False
}

// check turns a failed call into an error naming the device; a lost
// device or exhausted memory is said in words.
func (d *Device) check(call string, r vk.Result) error {
	err := vk.Check(call, r)
	if err == nil {
		return nil
	}
	switch r {
	case vk.ErrorDeviceLost:
		return fmt.Errorf("Vulkan device %q was lost (%w): the driver reset it or it crashed", d.info.Name, err)
	case vk.ErrorOutOfDeviceMemory:
		return fmt.Errorf("Vulkan device %q is out of memory (%w)", d.info.Name, err)
	}
	return fmt.Errorf("Vulkan device %q: %w", d.info.Name, err)
}

// execContext is what one batch records into: its own command pool and
// buffer, fence and descriptor pool (each externally synchronized in
// Vulkan), so batches of different goroutines record at once and only
// their submissions take turns on the queue.
type execContext struct {
	pool     vk.CommandPool
	cmdBuf   vk.CommandBuffer
	fence    vk.Fence
	descPool vk.DescriptorPool
}

// acquire takes a free execution context, making one if none is free.
func (d *Device) acquire() (*execContext, error) {
	d.cmu.Lock()
	if n := len(d.free); n > 0 {
		c := d.free[n-1]
		d.free = d.free[:n-1]
		d.cmu.Unlock()
		return c, nil
	}
	d.cmu.Unlock()
	c, err := d.newContext()
	if err != nil {
		return nil, err
	}
	d.cmu.Lock()
	d.contexts = append(d.contexts, c)
	d.cmu.Unlock()
	return c, nil
}

func (d *Device) release(c *execContext) {
	d.cmu.Lock()
	d.free = append(d.free, c)
	d.cmu.Unlock()
}

func (d *Device) newContext() (*execContext, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	c := &execContext{}
	pool := &vk.CommandPoolCreateInfo{SType: vk.StructureTypeCommandPoolCreateInfo,
		Flags: vk.CommandPoolCreateFlags(vk.CommandPoolCreateResetCommandBufferBit), QueueFamilyIndex: uint32(d.info.computeQueue)}
	pin.Pin(pool)
	if err := d.check("vkCreateCommandPool", d.cmd.CreateCommandPool(d.handle, pool, nil, &c.pool)); err != nil {
		return nil, err
	}
	alloc := &vk.CommandBufferAllocateInfo{SType: vk.StructureTypeCommandBufferAllocateInfo, CommandPool: c.pool,
		Level: vk.CommandBufferLevelPrimary, CommandBufferCount: 1}
	pin.Pin(alloc)
	fence := &vk.FenceCreateInfo{SType: vk.StructureTypeFenceCreateInfo}
	pin.Pin(fence)
	size := &vk.DescriptorPoolSize{Type: vk.DescriptorTypeStorageBuffer, DescriptorCount: buffersPerPool}
	pin.Pin(size)
	dp := &vk.DescriptorPoolCreateInfo{SType: vk.StructureTypeDescriptorPoolCreateInfo, MaxSets: setsPerPool, PoolSizeCount: 1, PPoolSizes: size}
	pin.Pin(dp)
	err := d.check("vkAllocateCommandBuffers", d.cmd.AllocateCommandBuffers(d.handle, alloc, &c.cmdBuf))
	if err == nil {
		err = d.check("vkCreateFence", d.cmd.CreateFence(d.handle, fence, nil, &c.fence))
	}
	if err == nil {
		err = d.check("vkCreateDescriptorPool", d.cmd.CreateDescriptorPool(d.handle, dp, nil, &c.descPool))
	}
	if err != nil {
		d.destroyContext(c)
		return nil, err
	}
	return c, nil
}

func (d *Device) destroyContext(c *execContext) {
	if c.descPool != 0 {
		d.cmd.DestroyDescriptorPool(d.handle, c.descPool, nil)
	}
	if c.fence != 0 {
		d.cmd.DestroyFence(d.handle, c.fence, nil)
	}
	if c.pool != 0 {
		d.cmd.DestroyCommandPool(d.handle, c.pool, nil)
	}
}

// setup makes the pipeline cache, picks memory types and makes the
// staging buffer.
func (d *Device) setup() error {
	if err := d.openPipelineCache(); err != nil {
		return err
	}
	if err := d.pickMemory(); err != nil {
		return err
	}
	var err error
	if d.staging, err = d.newBuffer(stagingBytes, d.uploadType, false); err != nil {
		return err
	}
	d.dummy, err = d.newBuffer(16, d.deviceType, false)
	return err
}

func (d *Device) dummyBuffer() *Buffer { return d.dummy }

// pickMemory chooses the memory types of device-local buffers, uploads
// and read-backs, and the budget.
func (d *Device) pickMemory() error {
	d.deviceType, d.uploadType, d.readbackType = -1, -1, -1
	for i, t := range d.info.Types {
		if t.DeviceLocal && d.deviceType < 0 {
			d.deviceType = i
		}
		if t.HostVisible && t.HostCoherent && d.uploadType < 0 {
			d.uploadType = i
		}
		if t.HostVisible && t.HostCoherent && t.HostCached && d.readbackType < 0 {
			d.readbackType = i
		}
	}
	if d.readbackType < 0 {
		d.readbackType = d.uploadType
	}
	if d.deviceType < 0 {
		d.deviceType = d.uploadType
	}
	if d.deviceType < 0 || d.uploadType < 0 {
		return &FeatureError{Device: d.info.Name, Feature: "device-local and host-visible coherent memory types"}
	}
	// A device-local type that is also host-visible (an APU, resizable
	// BAR, lavapipe) takes writes in place; prefer it.
	for i, t := range d.info.Types {
		if t.DeviceLocal && t.HostVisible && t.HostCoherent && d.info.Heaps[t.Heap].Size >= d.info.Heaps[d.info.Types[d.deviceType].Heap].Size {
			d.deviceType, d.mappedVRAM = i, true
			break
		}
	}
	heap := d.info.Heaps[d.info.Types[d.deviceType].Heap]
	avail := int64(heap.Size)
	if heap.Budget > 0 {
		avail = int64(heap.Budget)
	}
	d.budget = avail
	if d.opts.Budget > 0 {
		if d.opts.Budget > avail {
			return &BudgetError{Device: d.info.Name, Need: d.opts.Budget, Budget: avail, What: "--vram-budget is larger than the device's memory"}
		}
		d.budget = d.opts.Budget
	}
	return nil
}

// BudgetError says an allocation would pass the VRAM budget.
type BudgetError struct {
	Device       string
	What         string
	Need, Budget int64
	Used         int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("Vulkan device %q: %s: it needs %s, the budget is %s (%s already in use)",
		e.Device, e.What, iostreams.HumanBytes(e.Need), iostreams.HumanBytes(e.Budget), iostreams.HumanBytes(e.Used))
}

// ErrBudget matches every *BudgetError.
var ErrBudget = errors.New("over the VRAM budget")

func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// Info is what the device offers.
func (d *Device) Info() DeviceInfo { return d.info }

// Budget is the device-local bytes this process may allocate, and
// Used what it holds now; Peak the most it has held.
func (d *Device) Budget() int64 { return d.budget }

// Used is the device-local bytes allocated now.
func (d *Device) Used() int64 {
	d.amu.Lock()
	defer d.amu.Unlock()
	return d.used
}

// Peak is the most device-local bytes allocated at once.
func (d *Device) Peak() int64 {
	d.amu.Lock()
	defer d.amu.Unlock()
	return d.peak
}

// Moved is the bytes uploaded and read back so far.
func (d *Device) Moved() Traffic {
	d.amu.Lock()
	defer d.amu.Unlock()
	return d.moved
}

// Close waits for the device, saves the pipeline cache and frees
// everything the device made. Buffers still open are freed with it.
func (d *Device) Close() error {
	if d.handle == 0 {
		return nil
	}
	d.cmd.DeviceWaitIdle(d.handle)
	err := d.savePipelineCache()
	for _, k := range d.kernels {
		k.destroy(d)
	}
	d.amu.Lock()
	live := make([]*Buffer, 0, len(d.live))
	for b := range d.live {
		live = append(live, b)
	}
	d.amu.Unlock()
	for _, b := range live {
		b.Free()
	}
	d.staging.Free()
	d.dummy.Free()
	if d.pcache != 0 {
		d.cmd.DestroyPipelineCache(d.handle, d.pcache, nil)
	}
	for _, c := range d.contexts {
		d.destroyContext(c)
	}
	d.contexts, d.free = nil, nil
	d.cmd.DestroyDevice(d.handle, nil)
	d.handle = 0
	return err
}

// pipelineCachePath is the file of this device's cache: the UUID keys it
// to the driver build, which refuses a cache from another anyway.
func (d *Device) pipelineCachePath() string {
	if d.opts.PipelineCacheDir == "" {
		return ""
	}
	return filepath.Join(d.opts.PipelineCacheDir, fmt.Sprintf("vk-%04x-%04x-%x.cache", d.info.VendorID, d.info.DeviceID, d.info.cacheUUID))
}

func (d *Device) openPipelineCache() error {
	var pin runtime.Pinner
	defer pin.Unpin()
	info := &vk.PipelineCacheCreateInfo{SType: vk.StructureTypePipelineCacheCreateInfo}
	if path := d.pipelineCachePath(); path != "" {
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() > 0 && st.Size() < pipelineCacheLimit {
			if data, err := os.ReadFile(path); err == nil {
				pin.Pin(&data[0])
				info.InitialDataSize, info.PInitialData = uintptr(len(data)), unsafe.Pointer(&data[0])
			}
		}
	}
	pin.Pin(info)
	r := d.cmd.CreatePipelineCache(d.handle, info, nil, &d.pcache)
	if r < 0 && info.InitialDataSize > 0 {
		// A cache the driver refuses is dropped, not fatal.
		info.InitialDataSize, info.PInitialData = 0, nil
		r = d.cmd.CreatePipelineCache(d.handle, info, nil, &d.pcache)
	}
	return d.check("vkCreatePipelineCache", r)
}

func (d *Device) savePipelineCache() error {
	path := d.pipelineCachePath()
	if path == "" || d.pcache == 0 {
		return nil
	}
	var n uintptr
	if err := d.check("vkGetPipelineCacheData", d.cmd.GetPipelineCacheData(d.handle, d.pcache, &n, nil)); err != nil || n == 0 {
		return err
	}
	data := make([]byte, n)
	if err := d.check("vkGetPipelineCacheData", d.cmd.GetPipelineCacheData(d.handle, d.pcache, &n, unsafe.Pointer(&data[0]))); err != nil {
		return err
	}
	if err := os.MkdirAll(d.opts.PipelineCacheDir, 0o755); err != nil {
		return fmt.Errorf("pipeline cache: %w", err)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("pipeline cache: %w", err)
	}
	if _, err := f.Write(data[:n]); err != nil {
		f.Abort()
		return fmt.Errorf("pipeline cache: %w", err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("pipeline cache: %w", err)
	}
	return nil
}
