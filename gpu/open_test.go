package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "on", "off"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("--gpu yes was accepted")
	}
}

// TestOpenModes: off opens nothing; auto declines a driver on the CPU and
// says why; on takes it; on with no driver at all is ErrNoDevice.
func TestOpenModes(t *testing.T) {
	openTestDevice(t, DeviceOptions{}) // skips without Vulkan
	if o, why, err := Open(Options{Mode: ModeOff, Device: -1}); o != nil || why != "" || err != nil {
		t.Errorf("off: %v %q %v", o, why, err)
	}
	if testInstance.Devices()[testDeviceIndex(t)].Type == "cpu" {
		o, why, err := Open(Options{Mode: ModeAuto, Device: -1})
		if o != nil || err != nil || !strings.Contains(why, "CPU") {
			t.Errorf("auto with only lavapipe: %v %q %v", o, why, err)
		}
	}
	o, _, err := Open(Options{Mode: ModeOn, Device: -1, Budget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if o.Budget() != 64<<20 {
		t.Errorf("budget %d", o.Budget())
	}
	o.Close()
	if _, _, err := Open(Options{Mode: ModeOn, Device: 99}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("--gpu-device 99: %v", err)
	}
	t.Setenv("VK_DRIVER_FILES", "/nonexistent/icd.json")
	if _, _, err := Open(Options{Mode: ModeOn, Device: -1}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("on without a driver: %v", err)
	}
	if o, why, err := Open(Options{Mode: ModeAuto, Device: -1}); o != nil || err != nil || why == "" {
		t.Errorf("auto without a driver: %v %q %v", o, why, err)
	}
}
