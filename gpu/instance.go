package gpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/gguftool/gguftool/gpu/vk"
)

// ErrNoDevice says the loader found no Vulkan device this backend can use.
var ErrNoDevice = errors.New("no usable Vulkan device")

// ErrNoLoader says there is no Vulkan loader on the machine.
var ErrNoLoader = vk.ErrNoLoader

// ValidationLayer is the Khronos validation layer's name.
const ValidationLayer = "VK_LAYER_KHRONOS_validation"

// InstanceOptions say how to open Vulkan.
type InstanceOptions struct {
	// Validate turns the Khronos validation layer on and records what it
	// reports (Instance.Messages); opening fails when the layer is absent.
	Validate bool
}

// Instance is an open Vulkan instance and the devices it sees.
type Instance struct {
	cmd       *vk.Commands
	handle    vk.Instance
	version   uint32
	messenger vk.DebugUtilsMessengerEXT
	log       *messageLog
	devices   []DeviceInfo
	physical  []vk.PhysicalDevice
	pin       runtime.Pinner // the log, which the debug callback receives
}

// OpenInstance opens the loader and an instance, and reads every
// device's properties.
func OpenInstance(opts InstanceOptions) (*Instance, error) {
	global, err := vk.Global()
	if err != nil {
		return nil, err
	}
	var version uint32
	if global.Has("vkEnumerateInstanceVersion") {
		global.EnumerateInstanceVersion(&version)
	}
	if version < vk.MakeAPIVersion(0, 1, 2, 0) {
		return nil, fmt.Errorf("%w: the Vulkan loader is version %s; gguftool needs 1.2", ErrNoDevice, vk.APIVersionString(version))
	}
	layers, extensions := []string{}, []string{}
	log := &messageLog{}
	if opts.Validate {
		if !hasInstanceLayer(global, ValidationLayer) {
			return nil, fmt.Errorf("the validation layer %s is not installed (Debian's vulkan-validationlayers)", ValidationLayer)
		}
		layers = append(layers, ValidationLayer)
		extensions = append(extensions, "VK_EXT_debug_utils")
	}
	in := &Instance{version: version, log: log}
	if err := in.create(global, layers, extensions); err != nil {
		return nil, err
	}
	if in.cmd, err = vk.Load(in.handle); err != nil {
		return nil, err
	}
	if opts.Validate {
		if err := in.watch(); err != nil {
			in.Close()
			return nil, err
		}
	}
	if err := in.readDevices(); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

func (in *Instance) create(global *vk.Commands, layers, extensions []string) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	app := &vk.ApplicationInfo{
		SType:            vk.StructureTypeApplicationInfo,
		PApplicationName: vk.CString("gguftool"),
		PEngineName:      vk.CString("gguftool"),
		ApiVersion:       vk.MakeAPIVersion(0, 1, 3, 0),
	}
	if in.version < vk.MakeAPIVersion(0, 1, 3, 0) {
		app.ApiVersion = vk.MakeAPIVersion(0, 1, 2, 0)
	}
	pin.Pin(app)
	pin.Pin(app.PApplicationName)
	pin.Pin(app.PEngineName)
	info := &vk.InstanceCreateInfo{
		SType:                   vk.StructureTypeInstanceCreateInfo,
		PApplicationInfo:        app,
		EnabledLayerCount:       uint32(len(layers)),
		PpEnabledLayerNames:     cStrings(&pin, layers),
		EnabledExtensionCount:   uint32(len(extensions)),
		PpEnabledExtensionNames: cStrings(&pin, extensions),
	}
	pin.Pin(info)
	if err := vk.Check("vkCreateInstance", global.CreateInstance(info, nil, &in.handle)); err != nil {
		return fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	return nil
}

// cStrings lays names out as a C array of C strings, pinned.
func cStrings(pin *runtime.Pinner, names []string) **byte {
	if len(names) == 0 {
		return nil
	}
	arr := make([]*byte, len(names))
	for i, n := range names {
		arr[i] = vk.CString(n)
		pin.Pin(arr[i])
	}
	pin.Pin(&arr[0])
	return &arr[0]
}

func hasInstanceLayer(c *vk.Commands, name string) bool {
	var n uint32
	if c.EnumerateInstanceLayerProperties(&n, nil) < 0 || n == 0 {
		return false
	}
	props := make([]vk.LayerProperties, n)
	if c.EnumerateInstanceLayerProperties(&n, &props[0]) < 0 {
		return false
	}
	for _, p := range props[:n] {
		if vk.GoString(p.LayerName[:]) == name {
			return true
		}
	}
	return false
}

// Close destroys the instance; its devices must be closed first.
func (in *Instance) Close() {
	if in.messenger != 0 {
		in.cmd.DestroyDebugUtilsMessengerEXT(in.handle, in.messenger, nil)
		forgetLog(in.log)
		in.messenger = 0
	}
	in.pin.Unpin()
	if in.handle != 0 && in.cmd != nil {
		in.cmd.DestroyInstance(in.handle, nil)
	}
	in.handle = 0
}

// Devices are the devices the instance sees, in the loader's order.
func (in *Instance) Devices() []DeviceInfo { return in.devices }

// Version is the loader's instance version, "1.3.239".
func (in *Instance) Version() string { return vk.APIVersionString(in.version) }

// Messages returns what the validation layer reported since the last call
// (warnings and errors), and forgets them.
func (in *Instance) Messages() []string { return in.log.take() }

// messageLog collects validation messages; the debug callback appends.
type messageLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *messageLog) add(s string) {
	l.mu.Lock()
	l.msgs = append(l.msgs, s)
	l.mu.Unlock()
}

func (l *messageLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.msgs
	l.msgs = nil
	return m
}

// messengers are the logs a debug callback may write to. The callback's
// user data is the log itself (pinned by its instance); it is looked up
// here first, so a message arriving after Close finds nothing. purego
// makes a bounded number of callbacks in a process, so there is one,
// shared.
var messengers = struct {
	sync.Mutex
	live     map[*messageLog]bool
	callback uintptr
}{live: map[*messageLog]bool{}}

func registerLog(l *messageLog) uintptr {
	messengers.Lock()
	defer messengers.Unlock()
	if messengers.callback == 0 {
		messengers.callback = purego.NewCallback(debugCallback)
	}
	messengers.live[l] = true
	return messengers.callback
}

func forgetLog(l *messageLog) {
	messengers.Lock()
	delete(messengers.live, l)
	messengers.Unlock()
}

// debugCallback is VkDebugUtilsMessengerCallbackEXT: it records the
// message and returns VK_FALSE, so the call that caused it goes on.
func debugCallback(severity, types uintptr, data *vk.DebugUtilsMessengerCallbackDataEXT, user unsafe.Pointer) uintptr {
	l := (*messageLog)(user)
	messengers.Lock()
	live := messengers.live[l]
	messengers.Unlock()
	if !live || data == nil {
		return 0
	}
	sev := "warning"
	if vk.DebugUtilsMessageSeverityFlagBitsEXT(severity)&vk.DebugUtilsMessageSeverityErrorBitEXT != 0 {
		sev = "error"
	}
	l.add(sev + ": " + cString(data.PMessage))
	return 0
}

// cString reads a NUL-terminated C string.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b.WriteByte(*(*byte)(q))
	}
	return b.String()
}

// watch installs the debug messenger that feeds Messages.
func (in *Instance) watch() error {
	if !in.cmd.Has("vkCreateDebugUtilsMessengerEXT") {
		return errors.New("the validation layer is on but VK_EXT_debug_utils is missing")
	}
	cb := registerLog(in.log)
	in.pin.Pin(in.log)
	var pin runtime.Pinner
	defer pin.Unpin()
	info := &vk.DebugUtilsMessengerCreateInfoEXT{
		SType:           vk.StructureTypeDebugUtilsMessengerCreateInfoEXT,
		MessageSeverity: vk.DebugUtilsMessageSeverityFlagsEXT(vk.DebugUtilsMessageSeverityWarningBitEXT | vk.DebugUtilsMessageSeverityErrorBitEXT),
		MessageType: vk.DebugUtilsMessageTypeFlagsEXT(vk.DebugUtilsMessageTypeGeneralBitEXT |
			vk.DebugUtilsMessageTypeValidationBitEXT | vk.DebugUtilsMessageTypePerformanceBitEXT),
		PfnUserCallback: cb,
		PUserData:       unsafe.Pointer(in.log),
	}
	pin.Pin(info)
	return vk.Check("vkCreateDebugUtilsMessengerEXT", in.cmd.CreateDebugUtilsMessengerEXT(in.handle, info, nil, &in.messenger))
}

// driverFilesHint says where the loader looked, for errors.
func driverFilesHint() string {
	if f := os.Getenv("VK_DRIVER_FILES"); f != "" {
		return "VK_DRIVER_FILES=" + f
	}
	if f := os.Getenv("VK_ICD_FILENAMES"); f != "" {
		return "VK_ICD_FILENAMES=" + f
	}
	return "the loader's default driver paths (set VK_DRIVER_FILES to a driver's ICD json)"
}
