// Package gpu is gguftool's Vulkan compute backend: the Vulkan API through
// purego (package vk; no cgo, so one binary runs with or without a GPU),
// devices and their memory with accounting against a VRAM budget,
// batches of kernel dispatches, and the kernels themselves (package
// shaders: GLSL compiled to committed SPIR-V).
//
// It knows nothing of models: the engine declares the operations it needs
// and drives this package through them; gpu never imports the engine.
//
// What it promises: a kernel's result is within its stated tolerance of
// the Go reference (a GPU sums in another order, so not bit-identical to
// the CPU), and the same on every run on one device; a device that is
// missing, lacks a feature, runs out of memory or is lost gives an error
// naming it, never a panic.
package gpu
