package inspect

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gguftool/gguftool/cmd/gguftool/internal/cmdutil"
	"github.com/gguftool/gguftool/container"
	"github.com/gguftool/gguftool/internal/filekind"
	"github.com/gguftool/gguftool/internal/iostreams"
	"github.com/gguftool/gguftool/resident"
)

// OtherReport describes what is not a GGUF: a pack, a container, a
// resident manifest or a directory of resident tiers.
type OtherReport struct {
	Schema    string              `json:"schema"`
	Kind      string              `json:"kind"` // pack, container, resident-manifest, resident-tiers
	Path      string              `json:"path"`
	Pack      *container.Manifest `json:"pack,omitempty"`
	Container *ContainerReport    `json:"container,omitempty"`
	Resident  *resident.Manifest  `json:"resident,omitempty"`
	Catalog   *resident.Catalog   `json:"resident_tiers,omitempty"`
}

// ContainerReport is a container's header.
type ContainerReport struct {
	Layer      int                      `json:"layer"`
	Experts    int                      `json:"experts"`
	Stride     int64                    `json:"stride"`
	HeaderSize int64                    `json:"header_size"`
	FileSize   int64                    `json:"file_size"`
	Checksum   container.Digest         `json:"header_xxh3_128"`
	Components []container.ComponentRef `json:"components"`
}

// kindOf says what path holds, or "" for a GGUF.
func kindOf(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	switch {
	case st.IsDir():
		if _, err := os.Stat(filepath.Join(path, container.ManifestName)); err == nil {
			return "pack", nil
		}
		if _, err := os.Stat(filepath.Join(path, resident.CatalogName)); err == nil {
			return "resident-tiers", nil
		}
		return "", &filekind.Error{Path: path, Is: "a directory without " + container.ManifestName + " or " + resident.CatalogName,
			Want: "a pack or resident-tier directory"}
	case strings.HasSuffix(path, ".experts"):
		return "container", nil
	case strings.HasSuffix(path, resident.ManifestSuffix):
		return "resident-manifest", nil
	}
	return "", nil
}

func buildOther(ctx context.Context, path, kind string) (*OtherReport, error) {
	r := &OtherReport{Schema: Schema, Kind: kind, Path: path}
	var err error
	switch kind {
	case "pack":
		// Opened as run opens it, not just parsed: a file pack.json lists
		// that is missing, or a field it gets wrong, is refused rather
		// than described.
		var p *container.OpenPack
		if p, err = container.OpenDir(path); err == nil {
			r.Pack = p.Manifest
			p.Close()
		}
	case "resident-tiers":
		r.Catalog, err = resident.WriteCatalogPreview(path)
	case "resident-manifest":
		r.Resident, err = resident.ReadManifest(ctx, path)
	case "container":
		var c *container.Reader
		if c, err = container.Open(path); err == nil {
			h := c.Header
			r.Container = &ContainerReport{Layer: h.Layer, Experts: h.Experts, Stride: h.Stride, HeaderSize: h.HeaderSize,
				FileSize: h.FileSize, Checksum: container.DigestOf(h.Checksum)}
			for _, comp := range h.Components {
				r.Container.Components = append(r.Container.Components, container.ComponentRef{Name: comp.Name,
					Type: comp.Type.String(), Shape: comp.Shape, Offset: comp.Offset, BytesPerExpert: comp.BytesPerExpert})
			}
			c.Close()
		}
	}
	return r, err
}

func printOther(w io.Writer, r *OtherReport, asJSON bool) error {
	if asJSON {
		return cmdutil.PrintJSON(w, r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	hb := iostreams.HumanBytes
	switch r.Kind {
	case "pack":
		m := r.Pack
		fmt.Fprintf(tw, "pack\t%s (format %d, by %s %s)\n", r.Path, m.Version, m.Producer.Name, m.Producer.Version)
		fmt.Fprintf(tw, "architecture\t%s\n", m.Arch)
		fmt.Fprintf(tw, "experts\t%d, %d used, expert FFN %d\n", m.MoE.Experts, m.MoE.ExpertsUsed, m.MoE.ExpertFF)
		fmt.Fprintf(tw, "resident\t%s: %d tensors, %s\n", m.Resident.File, m.Resident.Tensors, hb(m.Resident.Size))
		for _, s := range m.Source {
			fmt.Fprintf(tw, "source\t%s, %s, xxh3 %s\n", s.Name, hb(s.Size), s.XXH3)
		}
		fmt.Fprintln(tw, "\nLAYER\tFILE\tEXPERTS\tRECORD\tCOMPONENTS")
		for _, c := range m.Containers {
			var comps []string
			for _, comp := range c.Components {
				comps = append(comps, fmt.Sprintf("%s %s", strings.TrimPrefix(comp.Name, fmt.Sprintf("blk.%d.", c.Layer)), comp.Type))
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", c.Layer, c.File, c.Experts, hb(c.Stride), strings.Join(comps, ", "))
		}
	case "container":
		c := r.Container
		fmt.Fprintf(tw, "container\t%s\n", r.Path)
		fmt.Fprintf(tw, "layer\t%d\n", c.Layer)
		fmt.Fprintf(tw, "experts\t%d records of %s (header %s, file %s)\n", c.Experts, hb(c.Stride), hb(c.HeaderSize), hb(c.FileSize))
		fmt.Fprintf(tw, "header checksum\t%s\n", c.Checksum)
		for _, comp := range c.Components {
			fmt.Fprintf(tw, "  %s\t%s %v, %s per expert at +%d\n", comp.Name, comp.Type, comp.Shape, hb(comp.BytesPerExpert), comp.Offset)
		}
	case "resident-manifest":
		m := r.Resident
		fmt.Fprintf(tw, "resident tier\t%s (%s)\n", m.TierLabel, r.Path)
		fmt.Fprintf(tw, "resident bytes\t%d (%s)\n", m.ResidentBytes, hb(m.ResidentBytes))
		for _, f := range m.Files {
			fmt.Fprintf(tw, "file\t%s, %s, xxh3 %s (verified)\n", f.File, hb(f.Size), f.XXH3)
		}
		if m.Budget != nil {
			fmt.Fprintf(tw, "budget\t%s, floor %s, optimal %v, total error %.4g\n", hb(m.Budget.Bytes), m.Budget.Floor, m.Budget.Optimal, m.Budget.TotalError)
		}
		fmt.Fprintln(tw, "\nTENSOR\tTYPE\tBYTES\tREL. RMS ERROR")
		for _, t := range m.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.5f\n", t.Name, t.Type, t.Bytes, t.RelRMSError)
		}
	case "resident-tiers":
		fmt.Fprintln(tw, "TIER\tRESIDENT BYTES\tMANIFEST")
		for _, t := range r.Catalog.Tiers {
			fmt.Fprintf(tw, "%s\t%d (%s)\t%s\n", t.TierLabel, t.ResidentBytes, hb(t.ResidentBytes), t.Manifest)
		}
	}
	return nil
}
