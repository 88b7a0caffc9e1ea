// Package verify is the `gguftool verify` command.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/gguf"
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
                     padding byte; every field of pack.json (experts, record
                     stride, component names, types, shapes and sizes, the
                     layer list, file sizes) against the bytes it describes;
                     every source tensor accounted for once
  a container file   its header, header checksum, and every record
  a GGUF file/shard  the whole set's structure; with --against PACK, also
                     each shard's XXH3-128 against what that pack recorded
                     for its source

--json lists each finding with the file to blame ("file") and, where
known, the byte offset ("offset"), "layer", "expert" and "tensor".

Exit 0 when everything verifies; 3 on any finding: a file truncated,
altered or not matching its digest, pack.json disagreeing with the
containers or resident.gguf, and a file pack.json lists but the pack
lacks (the pack you named exists; what it lacks makes it incomplete,
hence corrupt, not "not found"); 5 when PATH or the --against pack does
not exist; 1 when an I/O error stops the check.

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
	cmdutil.SetJSONSchema(cmd, Schema)
	return cmd
}

// Schema identifies the --json document.
const Schema = "gguftool.verify/v1"

// Report is the JSON output.
type Report struct {
	Schema   string    `json:"schema"`
	Path     string    `json:"path"`
	Kind     string    `json:"kind"`
	OK       bool      `json:"ok"`
	Findings []Finding `json:"findings"`
}

// Finding is one problem: the file to blame and, where they are known,
// the byte offset in it and the layer, expert and tensor.
type Finding struct {
	File      string `json:"file,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	Layer     *int   `json:"layer,omitempty"`
	Expert    *int   `json:"expert,omitempty"`
	Component string `json:"tensor,omitempty"`
	Message   string `json:"message"`
}

// toFinding takes the file and position from the typed error behind a
// finding, so the JSON says what the message says.
func toFinding(err error) Finding {
	f := Finding{Message: err.Error()}
	var (
		ce *container.CorruptError
		fe *gguf.FormatError
		se *gguf.SetError
		pe *fs.PathError
	)
	switch {
	case errors.As(err, &ce):
		f.File, f.Component = ce.File, ce.Component
		if ce.Offset >= 0 {
			f.Offset = &ce.Offset
		}
		if ce.Layer >= 0 {
			f.Layer = &ce.Layer
		}
		if ce.Expert >= 0 {
			f.Expert = &ce.Expert
		}
	case errors.As(err, &fe):
		f.File, f.Offset = fe.File, &fe.Offset
	case errors.As(err, &se):
		f.File = se.Prefix
		if len(se.Shards) > 0 {
			f.File = se.Shards[0]
		}
	case errors.As(err, &pe):
		f.File = pe.Path
	}
	return f
}

func verifyRun(ctx context.Context, o *VerifyOptions) error {
	st, err := os.Stat(o.Path)
	if err != nil {
		return err
	}
	r := Report{Schema: Schema, Path: o.Path, Findings: []Finding{}}
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
