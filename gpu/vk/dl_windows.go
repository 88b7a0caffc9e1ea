//go:build windows

package vk

import "syscall"

// openLibrary loads a DLL (vulkan-1.dll).
func openLibrary(name string) (uintptr, error) {
	h, err := syscall.LoadLibrary(name)
	return uintptr(h), err
}

// symbol finds an exported function.
func symbol(lib uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(lib), name)
}
