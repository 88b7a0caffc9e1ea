// Package vk is the part of the Vulkan API gguftool's GPU backend calls,
// through purego: no cgo, so one binary runs with or without a Vulkan
// loader on the machine. vk.go is generated from the Vulkan registry by
// scripts/gpu/gen-vk.sh (structures, enumerations, handles and a method
// per command); this file opens the loader and fills the command table.
//
// The bindings follow C's layout exactly (layout_test.go holds every
// structure's size and field offsets against the headers): VkBool32 is a
// uint32, size_t a uintptr, dispatchable handles uintptr-sized and
// non-dispatchable ones uint64. Pointers inside structures are Go
// pointers the caller keeps alive (runtime.Pinner) until the call that
// reads them returns; the commands' own pointer arguments are moved to the
// heap by escape, so a goroutine stack copied during the call cannot move
// them.
package vk

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Commands holds the entry points of one instance (and the global ones,
// which need none).
type Commands struct {
	fn [numCommands]uintptr
}

// Has reports whether the entry point named (a C name, "vkCreateDevice")
// was found.
func (c *Commands) Has(name string) bool {
	for i, n := range commandNames {
		if n == name {
			return c.fn[i] != 0
		}
	}
	return false
}

// LoaderNames are the loader's file names, tried in order.
var LoaderNames = []string{"libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "libMoltenVK.dylib", "vulkan-1.dll"}

var (
	loadOnce      sync.Once
	getInstanceFn uintptr
	loadErr       error
)

// ErrNoLoader says no Vulkan loader could be opened.
var ErrNoLoader = errors.New("no Vulkan loader")

// openLoader dlopens the loader once and finds vkGetInstanceProcAddr.
func openLoader() (uintptr, error) {
	loadOnce.Do(func() {
		var tried []string
		for _, name := range LoaderNames {
			h, err := openLibrary(name)
			if err != nil {
				tried = append(tried, err.Error())
				continue
			}
			sym, err := symbol(h, "vkGetInstanceProcAddr")
			if err != nil {
				loadErr = fmt.Errorf("%w: %s has no vkGetInstanceProcAddr: %v", ErrNoLoader, name, err)
				return
			}
			getInstanceFn = sym
			return
		}
		loadErr = fmt.Errorf("%w (install the Vulkan loader, Debian's libvulkan1): %v", ErrNoLoader, tried)
	})
	return getInstanceFn, loadErr
}

// Global loads the commands that need no instance: vkCreateInstance and
// the enumerations of the instance's version, layers and extensions.
func Global() (*Commands, error) {
	return Load(0)
}

// Load fills a table with instance's entry points (0 for the global
// ones); device-level commands come through the instance's dispatch,
// which serves every device of it.
func Load(instance Instance) (*Commands, error) {
	gipa, err := openLoader()
	if err != nil {
		return nil, err
	}
	c := &Commands{}
	for i, name := range commandNames {
		cname := append([]byte(name), 0)
		r, _, _ := purego.SyscallN(gipa, uintptr(instance), uintptr(unsafe.Pointer(&cname[0])))
		c.fn[i] = r
	}
	return c, nil
}

// escapeSink is never written: escape's store to it, which the compiler
// cannot prove dead, is what moves its argument to the heap.
var (
	escapeSink  unsafe.Pointer
	escapeNever bool
)

// escape returns p as a call argument. Taking it through here makes the
// object p points at escape to the heap, where it does not move.
func escape(p unsafe.Pointer) uintptr {
	if escapeNever {
		escapeSink = p
	}
	return uintptr(p)
}

// True and False are VkBool32's values.
const (
	True  Bool32 = 1
	False Bool32 = 0
)

// MakeAPIVersion packs a version as VK_MAKE_API_VERSION does.
func MakeAPIVersion(variant, major, minor, patch uint32) uint32 {
	return variant<<29 | major<<22 | minor<<12 | patch
}

// APIVersionString formats a packed version: "1.3.239".
func APIVersionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff)
}

// CString is s as a NUL-terminated C string.
func CString(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// GoString reads a NUL-terminated fixed array (a device or extension name).
func GoString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Error is a failed VkResult, with the call that returned it.
type Error struct {
	Call   string
	Result Result
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Call, e.Result) }

// Check turns a VkResult into nil or an *Error naming the call.
func Check(call string, r Result) error {
	if r >= 0 {
		return nil
	}
	return &Error{Call: call, Result: r}
}
