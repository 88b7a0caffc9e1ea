package trace

import (
	"fmt"
	"html"
	"strings"
)

// plotColors are distinct, colour-blind-safe line colours (Okabe–Ito),
// Belady last in black.
var plotColors = []string{"#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442"}

// CoverageSVG draws the coverage curve of r: hit rate (0–100 %) against
// capacity (% of the (layer, expert) pairs, 0–100), one polyline per
// policy with a marker at each capacity, Belady dashed, with axes, grid,
// labels and a legend. The document is self-contained.
func CoverageSVG(r *Replay) string {
	const (
		W, H                     = 720, 440
		left, right, top, bottom = 70, 170, 50, 60
		pw, ph                   = W - left - right, H - top - bottom
	)
	x := func(pct float64) float64 { return left + pct/100*pw }
	y := func(rate float64) float64 { return top + (1-rate)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">Expert-cache hit rate against capacity</text>`+"\n", left)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s: %d layers × %d experts, top-%d, %d steps, %s cache</text>`+"\n",
		left, html.EscapeString(r.Model), r.Layers, r.Experts, r.TopK, r.Steps, r.Cache)
	for i := 0; i <= 10; i++ {
		v := float64(i) * 10
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x(v), top, x(v), top+ph)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y(v/100), left+pw, y(v/100))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", x(v), top+ph+16, v)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", left-6, y(v/100), v)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">cache capacity (%% of the (layer, expert) pairs)</text>`+"\n", x(50), H-16)
	fmt.Fprintf(&b, `<text transform="translate(20 %.1f) rotate(-90)" text-anchor="middle">hit rate (%%)</text>`+"\n", y(0.5))
	if len(r.Rows) == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	for i, p := range r.Rows[0].Policies {
		color, dash := plotColors[i%len(plotColors)], ""
		if p.Policy == "belady" {
			color, dash = "#000", ` stroke-dasharray="6 4"`
		}
		var pts []string
		for _, row := range r.Rows {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(row.Percent), y(row.Policies[i].HitRate)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		for _, pt := range pts {
			xy := strings.Split(pt, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], color)
		}
		ly := top + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", left+pw+15, ly, left+pw+45, ly, color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", left+pw+52, ly, html.EscapeString(p.Policy))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
