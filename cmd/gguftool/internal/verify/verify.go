// Package verify is the `gguftool verify` command.
package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/iostreams"
)

// VerifyOptions are the parsed flags of `gguftool verify`.
type VerifyOptions struct {
	IO      *iostreams.IOStreams
	Path    string
	Against string
	JSON    bool
}

// NewCmdVerify builds `gguftool verify`; runF replaces verifyRun in tests.
func NewCmdVerify(f *cmdutil.Factory, runF func(context.Context, *VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "verify PATH",
		Short: "Check every checksum of a pack, a container or a GGUF set",
		Long: `Check PATH and report every problem found, each naming the file, the byte
offset and, inside a container, the layer, expert and tensor:

  a pack directory   every file pack.json lists, at its recorded size and
                     digest; every container header, component checksum and
                     padding byte; every source tensor accounted for once
  a container file   its header, header checksum, and every record
  a GGUF file/shard  the whole set's structure; with --against PACK, also
                     each shard's XXH3-128 against what that pack recorded
                     for its source

Exit code 3 on any finding.

Examples:
  gguftool verify /nvme/model.pack
  gguftool verify /nvme/model.pack/blk-0003.experts
  gguftool verify /cold/model-00001-of-00009.gguf --against /nvme/model.pack --json
` + cmdutil.ExitCodesHelp,
		Args: cmdutil.ExactArgs(1, "a pack directory, container or GGUF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return verifyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Against, "against", "", "pack whose recorded source digests a GGUF set must match")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the findings as JSON on stdout")
	return cmd
}

// Report is the JSON output.
type Report struct {
	Schema   string    `json:"schema"`
	Path     string    `json:"path"`
	Kind     string    `json:"kind"`
	OK       bool      `json:"ok"`
	Findings []Finding `json:"findings"`
}

// Finding is one problem.
type Finding struct {
	File      string `json:"file,omitempty"`
	Offset    int64  `json:"offset"`
	Layer     *int   `json:"layer,omitempty"`
	Expert    *int   `json:"expert,omitempty"`
	Component string `json:"tensor,omitempty"`
	Message   string `json:"message"`
}

func toFinding(err error) Finding {
	var ce *container.CorruptError
	if errors.As(err, &ce) {
		f := Finding{File: ce.File, Offset: ce.Offset, Component: ce.Component, Message: err.Error()}
		if ce.Layer >= 0 {
			f.Layer = &ce.Layer
		}
		if ce.Expert >= 0 {
			f.Expert = &ce.Expert
		}
		return f
	}
	return Finding{Message: err.Error()}
}

func verifyRun(ctx context.Context, o *VerifyOptions) error {
	st, err := os.Stat(o.Path)
	if err != nil {
		return err
	}
	r := Report{Schema: "gguftool.verify/v1", Path: o.Path, Findings: []Finding{}}
	report := func(err error) { r.Findings = append(r.Findings, toFinding(err)) }
	var size int64 = st.Size()
	switch {
	case st.IsDir():
		r.Kind = "pack"
		size = 0
		if m, err := container.ReadManifest(o.Path); err == nil {
			size = m.Resident.Size
			for _, c := range m.Containers {
				size += c.Size
			}
		}
		p := o.IO.NewProgress(size, "verify")
		err = container.VerifyPack(ctx, o.Path, report, p.Add)
		p.Finish()
	case filepath.Ext(o.Path) == ".experts":
		r.Kind = "container"
		p := o.IO.NewProgress(size, "verify")
		err = container.VerifyContainer(ctx, o.Path, report, p.Add)
		p.Finish()
	default:
		r.Kind = "gguf"
		var against *container.Manifest
		if o.Against != "" {
			if against, err = container.ReadManifest(o.Against); err != nil {
				return err
			}
		}
		err = container.VerifySet(ctx, o.Path, against, report, nil)
	}
	if err != nil {
		if errors.Is(err, container.ErrCorrupt) {
			report(err)
		} else {
			return err
		}
	}
	r.OK = len(r.Findings) == 0
	if o.JSON {
		if err := cmdutil.PrintJSON(o.IO.Out, r); err != nil {
			return err
		}
	} else {
		for _, f := range r.Findings {
			fmt.Fprintln(o.IO.Out, f.Message)
		}
		if r.OK {
			fmt.Fprintf(o.IO.Out, "%s: %s verifies\n", o.Path, r.Kind)
		}
	}
	if !r.OK {
		return &cmdutil.ExitError{Code: cmdutil.ExitCorrupt, Err: fmt.Errorf("%s: %d finding(s)", o.Path, len(r.Findings))}
	}
	return nil
}
