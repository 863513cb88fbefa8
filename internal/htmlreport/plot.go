package htmlreport

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"github.com/wakebench/wakebench/internal/stats"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Row is one row of a strip plot: every sample of one figure as a point.
type Row struct {
	Name   string
	Values []float64
	// Marked are the indexes of Values drawn as outliers (red, larger).
	Marked map[int]bool
}

// summed is a row with the summary of its finite values (package stats;
// ok false: none), taken once for both its median bar and its table row.
type summed struct {
	Row
	stats.Summary
	ok bool
}

// summarize is rows, each with its summary.
func summarize(rows []Row) []summed {
	out := make([]summed, len(rows))
	for i, r := range rows {
		s, err := stats.Summarize(finite(r.Values))
		out[i] = summed{Row: r, Summary: s, ok: err == nil}
	}
	return out
}

var (
	pointColor  = color.NRGBA{31, 119, 180, 160} // not premultiplied (color.RGBA with R > A is no colour)
	medianColor = color.RGBA{20, 20, 20, 255}
	markedColor = color.RGBA{214, 39, 40, 255}
)

// stripSVG draws rows as a strip plot, one row per name, each sample a
// point (spread vertically by its index so equal values stay apart) and
// each row's median (its summary's) a black bar, and returns the SVG without its XML
// prolog, to be inlined. The picture is 7 inches wide, a quarter inch a
// row; the page scales it to its width (the SVG has a viewBox).
func stripSVG(title, xlabel string, rows []summed) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Tick.Marker = plot.DefaultTicks{}
	names := make([]string, len(rows))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range rows {
		names[i] = r.Name
		var pts, marked plotter.XYs
		for j, v := range r.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			lo, hi = min(lo, v), max(hi, v)
			xy := plotter.XY{X: v, Y: float64(i) + jitter(j)}
			if r.Marked[j] {
				marked = append(marked, xy)
			} else {
				pts = append(pts, xy)
			}
		}
		if err := addPoints(p, pts, pointColor, 1.8); err != nil {
			return nil, err
		}
		if err := addPoints(p, marked, markedColor, 3); err != nil {
			return nil, err
		}
		if r.ok {
			l, err := plotter.NewLine(plotter.XYs{{X: r.Median, Y: float64(i) - 0.38}, {X: r.Median, Y: float64(i) + 0.38}})
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = medianColor, vg.Points(1.5)
			p.Add(l)
		}
	}
	if math.IsInf(lo, 1) {
		return nil, fmt.Errorf("strip plot %q: no finite sample", title)
	}
	pad := (hi - lo) * 0.05
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.05, 1e-9)
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	if lo >= 0 && lo-pad < 0 {
		p.X.Min = 0
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(rows))-0.4
	p.Add(plotter.NewGrid())
	w, h := 7*vg.Inch, vg.Inch+vg.Length(len(rows))*vg.Inch/4
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return nil, fmt.Errorf("strip plot %q: %w", title, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("strip plot %q: %w", title, err)
	}
	return inlineSVG(b.Bytes()), nil
}

func addPoints(p *plot.Plot, xys plotter.XYs, c color.Color, r vg.Length) error {
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(float64(r)), Shape: draw.CircleGlyph{}}
	p.Add(s)
	return nil
}

// jitter spreads the j-th sample of a row over ±0.3 of the row's height,
// the same for the same j on every run (no randomness: two renders of one
// report are the same file).
func jitter(j int) float64 {
	const golden = 0.6180339887498949
	f := math.Mod(float64(j)*golden, 1)
	return (f - 0.5) * 0.6
}

// finite is xs without NaN and infinities (bench.txt writes neither, a
// report's figure may be one).
func finite(xs []float64) []float64 {
	var f []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			f = append(f, x)
		}
	}
	return f
}

// inlineSVG is an SVG document as an element to put in HTML: without the
// XML prolog and comments before the <svg> element.
func inlineSVG(doc []byte) []byte {
	i := bytes.Index(doc, []byte("<svg"))
	if i < 0 {
		return nil
	}
	return bytes.TrimSpace(doc[i:])
}

// unitLabel is a benchfmt unit as an axis label: "sec/wake" → "seconds (sec/wake)".
func unitLabel(unit string) string {
	switch base, _, _ := strings.Cut(unit, "/"); base {
	case "sec":
		return "seconds (" + unit + ")"
	case "GiB":
		return "GiB (" + unit + ")"
	case "J":
		return "joules (" + unit + ")"
	}
	return unit
}
