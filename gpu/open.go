package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Mode says whether a command uses a GPU: auto (when one is usable), on
// (fail without one), or off.
type Mode string

// The modes of --gpu.
const (
	ModeAuto Mode = "auto"
	ModeOn   Mode = "on"
	ModeOff  Mode = "off"
)

// ParseMode reads --gpu's value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOn, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("--gpu %q: want auto, on or off", s)
}

// Options choose and open a device for a command.
type Options struct {
	Mode Mode
	// Device is the index gpu info lists; −1 picks the first usable
	// discrete GPU, then integrated, then any other.
	Device int
	// Budget bounds the VRAM the command allocates (0: what the device
	// reports free).
	Budget   int64
	Validate bool
}

// Opened is a device a command runs on, with the instance it came from.
type Opened struct {
	*Device
	Instance *Instance
}

// Close closes the device and its instance.
func (o *Opened) Close() error {
	err := o.Device.Close()
	o.Instance.Close()
	return err
}

// Open opens the device opts asks for. With ModeAuto, a machine without
// a usable device gives (nil, why, nil): the caller runs on the CPU and
// says why in one line. With ModeOn the same is an error: ErrNoLoader or
// ErrNoDevice (exit 5), or a *FeatureError naming what the device lacks
// (exit 1). ModeOff opens nothing.
func Open(opts Options) (*Opened, string, error) {
	if opts.Mode == ModeOff || opts.Mode == "" {
		return nil, "", nil
	}
	o, err := open(opts)
	if err == nil {
		return o, "", nil
	}
	var be *BudgetError
	if opts.Mode == ModeAuto && !errors.As(err, &be) {
		return nil, err.Error(), nil
	}
	return nil, "", err
}

func open(opts Options) (*Opened, error) {
	in, err := OpenInstance(InstanceOptions{Validate: opts.Validate})
	if err != nil {
		return nil, err
	}
	index := opts.Device
	if index < 0 {
		index = PickDevice(in.Devices(), opts.Mode == ModeOn)
		if index < 0 {
			in.Close()
			return nil, noDevice(in.Devices(), opts.Mode)
		}
	}
	dev, err := in.OpenDevice(index, DeviceOptions{Budget: opts.Budget, PipelineCacheDir: pipelineCacheDir()})
	if err != nil {
		in.Close()
		return nil, err
	}
	return &Opened{Device: dev, Instance: in}, nil
}

// PickDevice is the device a command uses without --gpu-device: a
// discrete GPU, then an integrated one, then a virtual one; with cpu
// (--gpu on) also a driver that runs on the CPU (Mesa's lavapipe), which
// --gpu auto never picks, since gguftool's own CPU path is faster than
// it. −1 when none is usable.
func PickDevice(devs []DeviceInfo, cpu bool) int {
	kinds := []string{"discrete", "integrated", "virtual", "other"}
	if cpu {
		kinds = append(kinds, "cpu")
	}
	for _, want := range kinds {
		for _, d := range devs {
			if d.Unusable == "" && d.Type == want {
				return d.Index
			}
		}
	}
	return -1
}

// noDevice says why no device was picked.
func noDevice(devs []DeviceInfo, mode Mode) error {
	if len(devs) == 0 {
		return fmt.Errorf("%w: the Vulkan loader found no device (it looked through %s)", ErrNoDevice, driverFilesHint())
	}
	var unusable []DeviceInfo
	for _, d := range devs {
		if d.Unusable != "" {
			unusable = append(unusable, d)
		}
	}
	if len(unusable) == len(devs) {
		return &FeatureError{Device: devs[0].Name, Feature: devs[0].RequiredFeature()}
	}
	return fmt.Errorf("%w: only a driver that runs on the CPU (%s), which --gpu auto leaves to gguftool's own CPU path; --gpu on uses it",
		ErrNoDevice, devs[0].Name)
}

// pipelineCacheDir is where compiled pipelines are kept between runs:
// $GGUFTOOL_CACHE_DIR/pipelines, or the user cache directory's
// gguftool/pipelines; "" when there is none.
func pipelineCacheDir() string {
	if d := os.Getenv("GGUFTOOL_CACHE_DIR"); d != "" {
		return filepath.Join(d, "pipelines")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "gguftool", "pipelines")
}
