package gpu

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gguftool/gguftool/gpu/vk"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// Buffer is a storage buffer on the device. Device-local buffers count
// against the budget; the staging buffer does not.
type Buffer struct {
	dev         *Device
	handle      vk.Buffer
	mem         vk.DeviceMemory
	size        int64
	mapped      unsafe.Pointer // host address, when the memory is host-visible
	deviceLocal bool
}

// Size is the buffer's length in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Alloc makes a device-local buffer of size bytes, counted against the
// budget; its contents are undefined until written.
func (d *Device) Alloc(size int64, what string) (*Buffer, error) {
	if size <= 0 {
		size = 4
	}
	if lim := int64(d.info.Limits.MaxStorageBufferRange); size > lim {
		return nil, fmt.Errorf("Vulkan device %q: %s is %s, more than one storage buffer may hold (%s): split it",
			d.info.Name, what, iostreams.HumanBytes(size), iostreams.HumanBytes(lim))
	}
	d.amu.Lock()
	if d.used+size > d.budget {
		used := d.used
		d.amu.Unlock()
		return nil, &BudgetError{Device: d.info.Name, What: what, Need: size, Budget: d.budget, Used: used}
	}
	d.used += size
	d.peak = max(d.peak, d.used)
	d.amu.Unlock()
	b, err := d.newBuffer(size, d.deviceType, true)
	d.amu.Lock()
	defer d.amu.Unlock()
	if err != nil {
		d.used -= size
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	d.live[b] = struct{}{}
	return b, nil
}

// newBuffer creates a buffer with its own memory of type memType, mapped
// when that type is host-visible.
func (d *Device) newBuffer(size int64, memType int, deviceLocal bool) (*Buffer, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	b := &Buffer{dev: d, size: size, deviceLocal: deviceLocal}
	info := &vk.BufferCreateInfo{SType: vk.StructureTypeBufferCreateInfo, Size: vk.DeviceSize(size),
		Usage:       vk.BufferUsageFlags(vk.BufferUsageStorageBufferBit | vk.BufferUsageTransferSrcBit | vk.BufferUsageTransferDstBit),
		SharingMode: vk.SharingModeExclusive}
	pin.Pin(info)
	if err := d.check("vkCreateBuffer", d.cmd.CreateBuffer(d.handle, info, nil, &b.handle)); err != nil {
		return nil, err
	}
	var req vk.MemoryRequirements
	d.cmd.GetBufferMemoryRequirements(d.handle, b.handle, &req)
	if req.MemoryTypeBits&(1<<memType) == 0 {
		b.destroy()
		return nil, fmt.Errorf("Vulkan device %q: a storage buffer cannot live in memory type %d", d.info.Name, memType)
	}
	alloc := &vk.MemoryAllocateInfo{SType: vk.StructureTypeMemoryAllocateInfo, AllocationSize: req.Size, MemoryTypeIndex: uint32(memType)}
	pin.Pin(alloc)
	if err := d.check("vkAllocateMemory", d.cmd.AllocateMemory(d.handle, alloc, nil, &b.mem)); err != nil {
		b.destroy()
		return nil, fmt.Errorf("%w (allocating %s)", err, iostreams.HumanBytes(size))
	}
	if err := d.check("vkBindBufferMemory", d.cmd.BindBufferMemory(d.handle, b.handle, b.mem, 0)); err != nil {
		b.destroy()
		return nil, err
	}
	if d.info.Types[memType].HostVisible {
		if err := d.check("vkMapMemory", d.cmd.MapMemory(d.handle, b.mem, 0, vk.DeviceSize(size), 0, &b.mapped)); err != nil {
			b.destroy()
			return nil, err
		}
	}
	return b, nil
}

func (b *Buffer) destroy() {
	d := b.dev
	if b.mapped != nil {
		d.cmd.UnmapMemory(d.handle, b.mem)
		b.mapped = nil
	}
	if b.handle != 0 {
		d.cmd.DestroyBuffer(d.handle, b.handle, nil)
		b.handle = 0
	}
	if b.mem != 0 {
		d.cmd.FreeMemory(d.handle, b.mem, nil)
		b.mem = 0
	}
}

// Free releases the buffer; the device must not be using it (a batch
// that read it has been waited for).
func (b *Buffer) Free() {
	if b == nil || b.handle == 0 {
		return
	}
	b.destroy()
	if b.deviceLocal {
		b.dev.amu.Lock()
		b.dev.used -= b.size
		delete(b.dev.live, b)
		b.dev.amu.Unlock()
	}
}

// host is the buffer's mapped bytes [off, off+n).
func (b *Buffer) host(off, n int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(b.mapped, off)), n)
}

// direct says whether the host reads and writes b in place.
func (d *Device) direct(b *Buffer) bool { return b.mapped != nil && !d.opts.Staging }

// Write copies src into b at byte offset off: in place where b is mapped,
// otherwise through the staging buffer and a copy on the queue. The
// device must not be using b.
func (d *Device) Write(b *Buffer, off int64, src []byte) error {
	if off < 0 || off+int64(len(src)) > b.size {
		return fmt.Errorf("gpu: write of %d bytes at %d into a buffer of %d", len(src), off, b.size)
	}
	d.count(int64(len(src)), 0)
	d.smu.Lock()
	defer d.smu.Unlock()
	if d.direct(b) {
		copy(b.host(off, int64(len(src))), src)
		return nil
	}
	for len(src) > 0 {
		n := min(len(src), int(d.staging.size))
		copy(d.staging.host(0, int64(n)), src[:n])
		if err := d.copyNow(d.staging, 0, b, off, int64(n)); err != nil {
			return err
		}
		src, off = src[n:], off+int64(n)
	}
	return nil
}

// Read copies b's bytes at off into dst: in place where b is mapped,
// otherwise through the staging buffer. The device must be done writing
// b (its batch waited for).
func (d *Device) Read(b *Buffer, off int64, dst []byte) error {
	if off < 0 || off+int64(len(dst)) > b.size {
		return fmt.Errorf("gpu: read of %d bytes at %d from a buffer of %d", len(dst), off, b.size)
	}
	d.count(0, int64(len(dst)))
	d.smu.Lock()
	defer d.smu.Unlock()
	if d.direct(b) {
		copy(dst, b.host(off, int64(len(dst))))
		return nil
	}
	for len(dst) > 0 {
		n := min(len(dst), int(d.staging.size))
		if err := d.copyNow(b, off, d.staging, 0, int64(n)); err != nil {
			return err
		}
		copy(dst[:n], d.staging.host(0, int64(n)))
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

func (d *Device) count(up, down int64) {
	d.amu.Lock()
	d.moved.Up += up
	d.moved.Down += down
	d.amu.Unlock()
}

// WriteFloats and ReadFloats are Write and Read of float32 values.
func (d *Device) WriteFloats(b *Buffer, off int64, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return d.Write(b, off*4, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(src)*4))
}

// ReadFloats reads len(dst) floats from float offset off.
func (d *Device) ReadFloats(b *Buffer, off int64, dst []float32) error {
	if len(dst) == 0 {
		return nil
	}
	return d.Read(b, off*4, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)*4))
}

// copyNow records one copy, submits it and waits.
func (d *Device) copyNow(src *Buffer, srcOff int64, dst *Buffer, dstOff int64, n int64) error {
	b, err := d.Begin()
	if err != nil {
		return err
	}
	b.Copy(src, srcOff, dst, dstOff, n)
	return b.Submit()
}

// CopyBandwidth measures the device's memory bandwidth as its copies see
// it: after a warm-up, reps copies of size bytes between two device-local
// buffers in one batch, timed from submission to the fence; the result
// is the bytes read plus the bytes written per second (a copy of n bytes
// moves 2n), the figure a kernel streaming its weights is bounded by. The
// buffers count against the budget while it runs.
func (d *Device) CopyBandwidth(size int64, reps int) (float64, error) {
	if size <= 0 || reps < 1 {
		return 0, fmt.Errorf("gpu: CopyBandwidth of %d bytes %d times", size, reps)
	}
	a, err := d.Alloc(size, "a bandwidth probe")
	if err != nil {
		return 0, err
	}
	defer a.Free()
	b, err := d.Alloc(size, "a bandwidth probe")
	if err != nil {
		return 0, err
	}
	defer b.Free()
	run := func(n int) (time.Duration, error) {
		bt, err := d.Begin()
		if err != nil {
			return 0, err
		}
		for i := range n {
			if i%2 == 0 {
				bt.Copy(a, 0, b, 0, size)
			} else {
				bt.Copy(b, 0, a, 0, size)
			}
		}
		start := time.Now()
		err = bt.Submit()
		return time.Since(start), err
	}
	if _, err := run(1); err != nil {
		return 0, err
	}
	took, err := run(reps)
	if err != nil {
		return 0, err
	}
	return float64(2*size*int64(reps)) / took.Seconds(), nil
}
