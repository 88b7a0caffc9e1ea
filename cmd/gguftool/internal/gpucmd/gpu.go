// Package gpucmd is `gguftool gpu`: what the Vulkan backend sees on this
// machine.
package gpucmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/gpu"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// NewCmdGPU builds `gguftool gpu` and its subcommands.
func NewCmdGPU(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpu <subcommand>",
		Short: "Show the GPUs the Vulkan backend can use",
		Long: `gguftool runs the resident tensors and the KV cache on a GPU through Vulkan
compute (NVIDIA, AMD, Intel; Mesa's lavapipe on a machine without one).
run, serve and bench decode take --gpu auto|on|off, --gpu-device N and
--vram-budget SIZE; see docs/gpu.md.
` + cmdutil.ExitCodesHelp,
	}
	cmd.AddCommand(NewCmdInfo(f, nil))
	return cmdutil.Group(cmd)
}

// InfoSchema identifies the --json document of gpu info.
const InfoSchema = "gguftool.gpu-info/v1"

// InfoOptions are the parsed flags of `gguftool gpu info`.
type InfoOptions struct {
	IO   *iostreams.IOStreams
	JSON bool
}

// Info is what gpu info reports.
type Info struct {
	Schema  string           `json:"schema"`
	Loader  string           `json:"loader_version"`
	Devices []gpu.DeviceInfo `json:"devices"`
	// Chosen is the device --gpu auto would use and ChosenOn the one
	// --gpu on would (which may be a driver on the CPU), −1 for none.
	Chosen   int      `json:"chosen"`
	ChosenOn int      `json:"chosen_with_gpu_on"`
	Variants []string `json:"kernel_variants"`
	Kernels  []string `json:"kernels"`
	// Error says why there is no loader or instance.
	Error string `json:"error,omitempty"`
}

// NewCmdInfo builds `gguftool gpu info`; runF replaces infoRun in tests.
func NewCmdInfo(f *cmdutil.Factory, runF func(context.Context, *InfoOptions) error) *cobra.Command {
	opts := &InfoOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "info",
		Short: "List Vulkan devices, their memory, features and the kernel variants chosen",
		Long: `List every device the Vulkan loader sees: name, type, driver, API version,
memory heaps (with the budget the driver reports, where it does), the
features the kernels are chosen by, and whether gguftool can use it (a
device needs Vulkan 1.2, a compute queue and 16-bit storage buffers).
The device --gpu on would pick is marked, with the kernel variants it
would run (subgroup reductions where the device has subgroup
arithmetic). --gpu auto picks the same but never a driver that runs on
the CPU (Mesa's lavapipe): gguftool's own CPU path is faster.

The loader is libvulkan.so.1 (Debian's libvulkan1); VK_DRIVER_FILES
names the drivers it loads, e.g. NVIDIA's nvidia_icd.json where it lives
outside the default paths.

Exit 0 when a usable device is found; 5 when there is no loader or no
usable device.

Examples:
  gguftool gpu info
  gguftool gpu info --json | jq '.devices[] | {name, type, heaps}'
  VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json gguftool gpu info
` + cmdutil.ExitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return infoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the devices as JSON on stdout")
	cmdutil.SetJSONSchema(cmd, InfoSchema)
	return cmd
}

func infoRun(ctx context.Context, o *InfoOptions) error {
	r := Info{Schema: InfoSchema, Devices: []gpu.DeviceInfo{}, Chosen: -1, ChosenOn: -1, Kernels: gpu.Kernels()}
	in, err := gpu.OpenInstance(gpu.InstanceOptions{})
	if err != nil {
		r.Error = err.Error()
		if o.JSON {
			if perr := cmdutil.PrintJSON(o.IO.Out, r); perr != nil {
				return perr
			}
		}
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: err}
	}
	defer in.Close()
	r.Loader = in.Version()
	if devs := in.Devices(); devs != nil {
		r.Devices = devs
	}
	r.Chosen, r.ChosenOn = gpu.PickDevice(r.Devices, false), gpu.PickDevice(r.Devices, true)
	if r.ChosenOn >= 0 {
		r.Variants = gpu.VariantsFor(r.Devices[r.ChosenOn].Features)
	}
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, r); err != nil {
			return err
		}
	} else {
		printInfo(o.IO.Out, r)
	}
	if r.ChosenOn < 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitNotFound, Err: fmt.Errorf("%w among the %d the loader sees", gpu.ErrNoDevice, len(r.Devices))}
	}
	return nil
}

func printInfo(w io.Writer, r Info) {
	fmt.Fprintf(w, "Vulkan loader %s, %d device(s)\n", r.Loader, len(r.Devices))
	for _, d := range r.Devices {
		mark := " "
		if d.Index == r.ChosenOn {
			mark = "*"
		}
		fmt.Fprintf(w, "%s %d: %s (%s), driver %s %s, Vulkan %s\n", mark, d.Index, d.Name, d.Type, d.Driver, d.DriverInfo, d.API)
		for i, h := range d.Heaps {
			kind := "host"
			if h.DeviceLocal {
				kind = "device-local"
			}
			budget := ""
			if h.Budget > 0 {
				budget = fmt.Sprintf(", budget %s", iostreams.HumanBytes(int64(h.Budget)))
			}
			fmt.Fprintf(w, "    heap %d: %s %s%s\n", i, iostreams.HumanBytes(int64(h.Size)), kind, budget)
		}
		fmt.Fprintf(w, "    subgroup %d, max buffer %s, features: %s\n", d.Limits.SubgroupSize, iostreams.HumanBytes(int64(d.Limits.MaxStorageBufferRange)), features(d.Features))
		if d.Unusable != "" {
			fmt.Fprintf(w, "    unusable: %s\n", d.Unusable)
		}
	}
	switch {
	case r.Chosen >= 0:
		fmt.Fprintf(w, "--gpu auto uses device %d with %s\n", r.Chosen, strings.Join(r.Variants, ", "))
	case r.ChosenOn >= 0:
		fmt.Fprintf(w, "--gpu auto runs on the CPU (device %d is a driver on the CPU); --gpu on uses it with %s\n",
			r.ChosenOn, strings.Join(r.Variants, ", "))
	default:
		fmt.Fprintln(w, "no usable device: --gpu auto runs on the CPU")
	}
}

func features(f gpu.Features) string {
	var on []string
	for _, x := range []struct {
		name string
		has  bool
	}{{"16-bit storage", f.Storage16}, {"8-bit storage", f.Storage8}, {"fp16", f.Float16}, {"int8", f.Int8},
		{"subgroup arithmetic", f.SubgroupArithmetic}, {"integer dot product", f.IntegerDotProduct},
		{"timeline semaphores", f.TimelineSemaphore}, {"memory budget", f.MemoryBudget}, {"external host memory", f.ExternalMemoryHost}} {
		if x.has {
			on = append(on, x.name)
		}
	}
	return strings.Join(on, ", ")
}
