//go:build !windows

package vk

import "github.com/ebitengine/purego"

// openLibrary dlopens a shared library.
func openLibrary(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// symbol finds an exported function.
func symbol(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }
