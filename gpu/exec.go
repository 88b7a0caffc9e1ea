package gpu

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/gguftool/gguftool/gpu/shaders"
	"github.com/gguftool/gguftool/gpu/vk"
)

// Kernel is a compute pipeline: one SPIR-V module with its specialization
// constants, its storage-buffer bindings and push constants.
type Kernel struct {
	name      string
	bindings  int
	pushBytes int
	setLayout vk.DescriptorSetLayout
	layout    vk.PipelineLayout
	pipeline  vk.Pipeline
}

// Kernel returns the pipeline of shader name (an embedded SPIR-V module)
// with bindings storage buffers, pushBytes of push constants and spec as
// specialization constants 0, 1, …; it is built once and kept.
func (d *Device) Kernel(name string, bindings, pushBytes int, spec ...uint32) (*Kernel, error) {
	key := fmt.Sprint(name, spec)
	d.kmu.Lock()
	defer d.kmu.Unlock()
	if k := d.kernels[key]; k != nil {
		return k, nil
	}
	if pushBytes > int(d.info.Limits.MaxPushConstants) {
		return nil, fmt.Errorf("gpu: kernel %s takes %d bytes of push constants; %q allows %d", name, pushBytes, d.info.Name, d.info.Limits.MaxPushConstants)
	}
	code, err := shaders.Code(name)
	if err != nil {
		return nil, err
	}
	k := &Kernel{name: key, bindings: bindings, pushBytes: pushBytes}
	if err := d.buildKernel(k, code, spec); err != nil {
		k.destroy(d)
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	d.kernels[key] = k
	return k, nil
}

func (d *Device) buildKernel(k *Kernel, code []uint32, spec []uint32) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	binds := make([]vk.DescriptorSetLayoutBinding, k.bindings)
	for i := range binds {
		binds[i] = vk.DescriptorSetLayoutBinding{Binding: uint32(i), DescriptorType: vk.DescriptorTypeStorageBuffer,
			DescriptorCount: 1, StageFlags: vk.ShaderStageFlags(vk.ShaderStageComputeBit)}
	}
	sl := &vk.DescriptorSetLayoutCreateInfo{SType: vk.StructureTypeDescriptorSetLayoutCreateInfo, BindingCount: uint32(len(binds))}
	if len(binds) > 0 {
		pin.Pin(&binds[0])
		sl.PBindings = &binds[0]
	}
	pin.Pin(sl)
	if err := d.check("vkCreateDescriptorSetLayout", d.cmd.CreateDescriptorSetLayout(d.handle, sl, nil, &k.setLayout)); err != nil {
		return err
	}
	setLayout := &k.setLayout
	pin.Pin(setLayout)
	pl := &vk.PipelineLayoutCreateInfo{SType: vk.StructureTypePipelineLayoutCreateInfo, SetLayoutCount: 1, PSetLayouts: setLayout}
	if k.pushBytes > 0 {
		pr := &vk.PushConstantRange{StageFlags: vk.ShaderStageFlags(vk.ShaderStageComputeBit), Size: uint32(k.pushBytes)}
		pin.Pin(pr)
		pl.PushConstantRangeCount, pl.PPushConstantRanges = 1, pr
	}
	pin.Pin(pl)
	if err := d.check("vkCreatePipelineLayout", d.cmd.CreatePipelineLayout(d.handle, pl, nil, &k.layout)); err != nil {
		return err
	}
	pin.Pin(&code[0])
	sm := &vk.ShaderModuleCreateInfo{SType: vk.StructureTypeShaderModuleCreateInfo, CodeSize: uintptr(len(code) * 4), PCode: &code[0]}
	pin.Pin(sm)
	var module vk.ShaderModule
	if err := d.check("vkCreateShaderModule", d.cmd.CreateShaderModule(d.handle, sm, nil, &module)); err != nil {
		return err
	}
	defer d.cmd.DestroyShaderModule(d.handle, module, nil)
	entry := vk.CString("main")
	pin.Pin(entry)
	stage := vk.PipelineShaderStageCreateInfo{SType: vk.StructureTypePipelineShaderStageCreateInfo,
		Stage: vk.ShaderStageComputeBit, Module: module, PName: entry}
	if len(spec) > 0 {
		entries := make([]vk.SpecializationMapEntry, len(spec))
		for i := range entries {
			entries[i] = vk.SpecializationMapEntry{ConstantID: uint32(i), Offset: uint32(4 * i), Size: 4}
		}
		data := append([]uint32(nil), spec...)
		pin.Pin(&entries[0])
		pin.Pin(&data[0])
		si := &vk.SpecializationInfo{MapEntryCount: uint32(len(entries)), PMapEntries: &entries[0],
			DataSize: uintptr(4 * len(data)), PData: unsafe.Pointer(&data[0])}
		pin.Pin(si)
		stage.PSpecializationInfo = si
	}
	cp := &vk.ComputePipelineCreateInfo{SType: vk.StructureTypeComputePipelineCreateInfo, Stage: stage, Layout: k.layout, BasePipelineIndex: -1}
	pin.Pin(cp)
	return d.check("vkCreateComputePipelines", d.cmd.CreateComputePipelines(d.handle, d.pcache, 1, cp, nil, &k.pipeline))
}

func (k *Kernel) destroy(d *Device) {
	if k.pipeline != 0 {
		d.cmd.DestroyPipeline(d.handle, k.pipeline, nil)
	}
	if k.layout != 0 {
		d.cmd.DestroyPipelineLayout(d.handle, k.layout, nil)
	}
	if k.setLayout != 0 {
		d.cmd.DestroyDescriptorSetLayout(d.handle, k.setLayout, nil)
	}
}

// Batch is work recorded for the queue: dispatches and copies, each
// waiting for the one before (a full memory barrier between them, so a
// kernel always sees what the previous one wrote). Submit runs it and
// waits. Batches of different goroutines record at once; one goroutine
// must not read or write a buffer (Device.Write, Read) that its open
// batch uses before submitting it.
type Batch struct {
	r    recorder
	open bool
}

// Begin starts a batch.
func (d *Device) Begin() (*Batch, error) {
	c, err := d.acquire()
	if err != nil {
		return nil, err
	}
	b := &Batch{r: recorder{d: d, c: c}, open: true}
	if err := b.r.begin(); err != nil {
		d.release(c)
		return nil, err
	}
	return b, nil
}

// Dispatch records kernel k over groups workgroups with push constants
// push (k's push size, in 32-bit words) and bufs bound in order.
func (b *Batch) Dispatch(k *Kernel, groups [3]uint32, push []uint32, bufs ...*Buffer) error {
	if len(bufs) != k.bindings {
		return fmt.Errorf("gpu: kernel %s binds %d buffers, given %d", k.name, k.bindings, len(bufs))
	}
	if len(push)*4 != k.pushBytes {
		return fmt.Errorf("gpu: kernel %s takes %d bytes of push constants, given %d", k.name, k.pushBytes, len(push)*4)
	}
	lim := b.r.d.info.Limits.MaxWorkgroupCount
	if groups[0] > lim || groups[1] > 65535 || groups[2] > 65535 {
		return fmt.Errorf("gpu: kernel %s: %v workgroups is more than device %q dispatches", k.name, groups, b.r.d.info.Name)
	}
	return b.r.dispatch(k, groups, push, bufs)
}

// Copy records a copy of n bytes between buffers.
func (b *Batch) Copy(src *Buffer, srcOff int64, dst *Buffer, dstOff int64, n int64) {
	b.r.copy(src, srcOff, dst, dstOff, n)
}

// Zero records zeroing n floats of s.
func (b *Batch) Zero(s Span, n int) {
	if n <= 0 {
		return
	}
	b.r.barrier()
	b.r.d.cmd.CmdFillBuffer(b.r.c.cmdBuf, s.Buf.handle, vk.DeviceSize(4*s.Off), vk.DeviceSize(4*n), 0)
	b.r.commands++
}

// CopyFloats records a copy of n floats from src to dst.
func (b *Batch) CopyFloats(dst, src Span, n int) {
	if n > 0 {
		b.r.copy(src.Buf, int64(4*src.Off), dst.Buf, int64(4*dst.Off), int64(4*n))
	}
}

// Submit runs the batch and waits for it.
func (b *Batch) Submit() error {
	if !b.open {
		return fmt.Errorf("gpu: batch submitted twice")
	}
	b.open = false
	defer b.r.d.release(b.r.c)
	return b.r.submitAndWait()
}

// recorder records into one execution context's command buffer.
type recorder struct {
	d        *Device
	c        *execContext
	commands int
}

func (r *recorder) begin() error {
	var pin runtime.Pinner
	defer pin.Unpin()
	info := &vk.CommandBufferBeginInfo{SType: vk.StructureTypeCommandBufferBeginInfo,
		Flags: vk.CommandBufferUsageFlags(vk.CommandBufferUsageOneTimeSubmitBit)}
	pin.Pin(info)
	r.commands = 0
	return r.d.check("vkBeginCommandBuffer", r.d.cmd.BeginCommandBuffer(r.c.cmdBuf, info))
}

// barrier makes everything recorded so far visible to what comes next.
func (r *recorder) barrier() {
	if r.commands == 0 {
		return
	}
	all := vk.AccessFlags(vk.AccessShaderReadBit | vk.AccessShaderWriteBit | vk.AccessTransferReadBit | vk.AccessTransferWriteBit)
	mb := &vk.MemoryBarrier{SType: vk.StructureTypeMemoryBarrier, SrcAccessMask: all, DstAccessMask: all}
	stages := vk.PipelineStageFlags(vk.PipelineStageComputeShaderBit | vk.PipelineStageTransferBit)
	r.d.cmd.CmdPipelineBarrier(r.c.cmdBuf, stages, stages, 0, 1, mb, 0, nil, 0, nil)
}

func (r *recorder) copy(src *Buffer, srcOff int64, dst *Buffer, dstOff int64, n int64) {
	r.barrier()
	region := &vk.BufferCopy{SrcOffset: vk.DeviceSize(srcOff), DstOffset: vk.DeviceSize(dstOff), Size: vk.DeviceSize(n)}
	r.d.cmd.CmdCopyBuffer(r.c.cmdBuf, src.handle, dst.handle, 1, region)
	r.commands++
}

func (r *recorder) dispatch(k *Kernel, groups [3]uint32, push []uint32, bufs []*Buffer) error {
	d := r.d
	set, err := r.descriptorSet(k)
	if err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	infos := make([]vk.DescriptorBufferInfo, len(bufs))
	writes := make([]vk.WriteDescriptorSet, len(bufs))
	for i, b := range bufs {
		infos[i] = vk.DescriptorBufferInfo{Buffer: b.handle, Range: vk.DeviceSize(b.size)}
		writes[i] = vk.WriteDescriptorSet{SType: vk.StructureTypeWriteDescriptorSet, DstSet: set, DstBinding: uint32(i),
			DescriptorCount: 1, DescriptorType: vk.DescriptorTypeStorageBuffer, PBufferInfo: &infos[i]}
	}
	if len(bufs) > 0 {
		pin.Pin(&infos[0])
		pin.Pin(&writes[0])
		d.cmd.UpdateDescriptorSets(d.handle, uint32(len(writes)), &writes[0], 0, nil)
	}
	r.barrier()
	d.cmd.CmdBindPipeline(r.c.cmdBuf, vk.PipelineBindPointCompute, k.pipeline)
	setp := &set
	d.cmd.CmdBindDescriptorSets(r.c.cmdBuf, vk.PipelineBindPointCompute, k.layout, 0, 1, setp, 0, nil)
	if len(push) > 0 {
		data := append([]uint32(nil), push...)
		pin.Pin(&data[0])
		d.cmd.CmdPushConstants(r.c.cmdBuf, k.layout, vk.ShaderStageFlags(vk.ShaderStageComputeBit), 0, uint32(4*len(data)), unsafe.Pointer(&data[0]))
	}
	d.cmd.CmdDispatch(r.c.cmdBuf, groups[0], groups[1], groups[2])
	r.commands++
	return nil
}

// descriptorSet allocates k's set from the pool; when the pool is spent,
// the work so far is run and the pool reset.
func (r *recorder) descriptorSet(k *Kernel) (vk.DescriptorSet, error) {
	d := r.d
	var set vk.DescriptorSet
	for attempt := 0; ; attempt++ {
		var pin runtime.Pinner
		layout := &k.setLayout
		pin.Pin(layout)
		info := &vk.DescriptorSetAllocateInfo{SType: vk.StructureTypeDescriptorSetAllocateInfo, DescriptorPool: r.c.descPool,
			DescriptorSetCount: 1, PSetLayouts: layout}
		pin.Pin(info)
		res := d.cmd.AllocateDescriptorSets(d.handle, info, &set)
		pin.Unpin()
		if res >= 0 {
			return set, nil
		}
		if attempt > 0 || (res != vk.ErrorOutOfPoolMemory && res != vk.ErrorFragmentedPool) {
			return 0, d.check("vkAllocateDescriptorSets", res)
		}
		if err := r.submitAndWait(); err != nil {
			return 0, err
		}
		if err := r.begin(); err != nil {
			return 0, err
		}
	}
}

// fenceTimeout bounds one wait: a batch that runs longer is taken for a
// hung device.
const fenceTimeout = 10 * time.Minute

// submitAndWait ends the command buffer, submits it, waits for its fence,
// and resets the fence and the descriptor pool.
func (r *recorder) submitAndWait() error {
	d := r.d
	c := r.c
	if err := d.check("vkEndCommandBuffer", d.cmd.EndCommandBuffer(c.cmdBuf)); err != nil {
		return err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	cb := &c.cmdBuf
	pin.Pin(cb)
	submit := &vk.SubmitInfo{SType: vk.StructureTypeSubmitInfo, CommandBufferCount: 1, PCommandBuffers: cb}
	pin.Pin(submit)
	d.qmu.Lock()
	err := d.check("vkQueueSubmit", d.cmd.QueueSubmit(d.queue, 1, submit, c.fence))
	d.qmu.Unlock()
	if err != nil {
		return err
	}
	fence := &c.fence
	res := d.cmd.WaitForFences(d.handle, 1, fence, vk.True, uint64(fenceTimeout.Nanoseconds()))
	if res == vk.Timeout {
		return fmt.Errorf("Vulkan device %q did not finish a batch in %v", d.info.Name, fenceTimeout)
	}
	if err := d.check("vkWaitForFences", res); err != nil {
		return err
	}
	if err := d.check("vkResetFences", d.cmd.ResetFences(d.handle, 1, fence)); err != nil {
		return err
	}
	return d.check("vkResetDescriptorPool", d.cmd.ResetDescriptorPool(d.handle, c.descPool, 0))
}
