package report

import (
	"fmt"
	"github.com/wakebench/wakebench/internal/record"
	"image/color"
	"io"
	"maps"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/wakebench/wakebench/internal/gpu"
)

// Timeline is what the memory picture shows.
type Timeline struct {
	Samples []gpu.Sample
	LabelOf func(pid int) string // model label of a process, "" if none
	Names   map[string]string    // label → model name
	Windows map[string]record.Window
	Pad     time.Duration // the windows' padding, taken off again for the picture
	Events  []record.Event
	Title   string
	// Queue is the traffic phase's router queue: drawn below the memory,
	// on the same time axis, when there is one.
	Queue []record.QueueDepth
}

var palette = []color.RGBA{{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {255, 127, 14, 255}}

// The frame is 12 inches wide; the memory panel 5 inches high, the queue
// panel half as much again, and the phase labels' band on top of both.
const (
	frameWidth  = 12 * vg.Inch
	memoryHigh  = 5 * vg.Inch
	withQueue   = 7.5 * vg.Inch
	frameMargin = vg.Length(10) // blank all round the frame
	columnGap   = vg.Length(10) // between the data and the legends
	// fontSlack is how much wider than measured a text may draw. The SVG
	// names Liberation Serif, whose metrics place every text; a viewer
	// without it substitutes another (DejaVu Serif, Debian's default, is
	// up to 1.3× wider), and the text grows rightwards from where it was
	// placed. So every text starts where it is placed (left-aligned) and
	// has room for fontSlack times its measured width.
	fontSlack = 1.35
)

// WriteTimelineSVG draws device memory and each model's GPU memory over
// time (seconds from the first sample), the phase windows shaded and
// labelled, and every sleep and wake marked on its model's line. The
// phase names sit in a band above the data and the legends in a column
// to its right, so neither covers the other or the data, whatever the
// run's length; the frame grows downwards by the band's rows.
func WriteTimelineSVG(w io.Writer, tl Timeline) error {
	if len(tl.Samples) == 0 {
		return fmt.Errorf("timeline: no GPU samples to draw")
	}
	t0 := tl.Samples[0].Time
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	p, mem, phases, err := memoryPlot(tl, sec)
	if err != nil {
		return err
	}
	panels := []panel{{plot: p, legend: mem}}
	if len(tl.Queue) > 0 {
		q, queue, err := queuePlot(tl.Queue, sec, p.X.Min, p.X.Max)
		if err != nil {
			return err
		}
		panels = append(panels, panel{plot: q, legend: queue})
	}
	ly := layOutTimeline(tl.Title, panels, phases)
	c := vgsvg.New(ly.frame.Max.X, ly.frame.Max.Y)
	ly.draw(draw.New(c), tl.Title, panels)
	_, err = c.WriteTo(w)
	return err
}

// panel is one plot of the timeline and its legend.
type panel struct {
	plot   *plot.Plot
	legend legend
}

// legend is a plot.Legend that knows its entries' texts, to measure them.
type legend struct {
	plot.Legend
	texts []string
}

func newLegend() legend {
	l := legend{Legend: plot.NewLegend()}
	l.TextStyle.Font.Size = vg.Points(8)
	l.Top, l.Left = true, true // entries from the top, text left-aligned after the thumbnail
	l.Padding = vg.Points(2)   // between entries
	return l
}

func (l *legend) add(text string, th ...plot.Thumbnailer) {
	l.Add(text, th...)
	l.texts = append(l.texts, text)
}

// width is the legend's width with room for fontSlack.
func (l *legend) width() vg.Length {
	var w vg.Length
	for _, t := range l.texts {
		w = max(w, l.TextStyle.Width(t))
	}
	return l.ThumbnailWidth + l.TextStyle.Width(" ") + vg.Length(fontSlack)*w
}

// height is the legend's height.
func (l *legend) height() vg.Length {
	n := vg.Length(len(l.texts))
	return n*l.TextStyle.Height("Mg") + max(n-1, 0)*l.Padding
}

// phaseLabel is a phase window's name, written at its start (in seconds).
type phaseLabel struct {
	x     float64
	text  string
	color color.Color
}

// timelineLayout is where each part of the timeline goes on its frame.
type timelineLayout struct {
	frame   vg.Rectangle
	title   vg.Point // where the title's text starts
	titleSz vg.Length
	band    vg.Rectangle   // the phase labels
	labels  []placedLabel  // in the band
	cells   []draw.Canvas  // each panel's plot, axes included
	data    []vg.Rectangle // each panel's data area
	legends []vg.Rectangle // each panel's legend, fontSlack included
}

// placedLabel is a phase label where it is drawn, its box fontSlack wide.
type placedLabel struct {
	phaseLabel
	box vg.Rectangle
}

var (
	titleStyle = textStyle(11)
	labelStyle = textStyle(7)
)

// textStyle is the plot's font at size points, left-aligned: the text
// starts where it is placed and a wider font grows to the right.
func textStyle(size vg.Length) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, size),
		XAlign: draw.XLeft, YAlign: draw.YBottom, Handler: plot.DefaultTextHandler}
}

// layOutTimeline places the title on top, the phase labels' band below it,
// the panels below that sharing one time axis, and each panel's legend in
// a column right of the data. The band has as many rows as the labels
// need not to overlap; the frame grows by them.
func layOutTimeline(title string, panels []panel, phases []phaseLabel) timelineLayout {
	base := memoryHigh
	if len(panels) > 1 {
		base = withQueue
	}
	var column vg.Length
	for _, pn := range panels {
		column = max(column, pn.legend.width())
	}
	var ly timelineLayout
	ly.titleSz = titleStyle.Font.Size
	inner := frameWidth - 2*frameMargin
	if w := vg.Length(fontSlack) * titleStyle.Width(title); w > inner {
		ly.titleSz = titleStyle.Font.Size * inner / w // a title too long for the frame is written smaller
	}
	titleHigh := vg.Length(0)
	if title != "" {
		titleHigh = 1.5 * ly.titleSz
	}
	rowHigh := 1.25 * labelStyle.Font.Size
	// The band's height moves the panels down, not sideways: lay out once
	// to learn where each phase starts, then again with the band's rows.
	ly.arrange(base, 0, titleHigh, column, panels)
	rows := ly.place(panels[0].plot, phases, rowHigh)
	bandHigh := vg.Length(rows) * rowHigh
	if rows > 0 {
		bandHigh += rowHigh / 2
	}
	ly.arrange(base+bandHigh, bandHigh, titleHigh, column, panels)
	ly.title = vg.Point{X: (frameWidth - vg.Length(fontSlack)*titleStyle.Width(title)*ly.titleSz/titleStyle.Font.Size) / 2,
		Y: ly.frame.Max.Y - frameMargin - 0.9*ly.titleSz}
	ly.place(panels[0].plot, phases, rowHigh)
	return ly
}

// arrange places the panels, the band and the legends on a frame high.
func (ly *timelineLayout) arrange(high, bandHigh, titleHigh, column vg.Length, panels []panel) {
	ly.frame = vg.Rectangle{Max: vg.Point{X: frameWidth, Y: high}}
	area := vg.Rectangle{Min: vg.Point{X: frameMargin, Y: frameMargin},
		Max: vg.Point{X: frameWidth - frameMargin - column - columnGap, Y: high - frameMargin - titleHigh - bandHigh}}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		plots[i] = []*plot.Plot{pn.plot}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(8)}
	cells := plot.Align(plots, tiles, draw.Canvas{Rectangle: area})
	ly.cells, ly.data, ly.legends = nil, nil, nil
	for i, pn := range panels {
		ly.cells = append(ly.cells, cells[i][0])
		d := pn.plot.DataCanvas(cells[i][0]).Rectangle
		ly.data = append(ly.data, d)
		x := area.Max.X + columnGap
		ly.legends = append(ly.legends, vg.Rectangle{Min: vg.Point{X: x, Y: d.Max.Y - pn.legend.height()},
			Max: vg.Point{X: x + pn.legend.width(), Y: d.Max.Y}})
	}
	ly.band = vg.Rectangle{Min: vg.Point{X: ly.data[0].Min.X, Y: ly.data[0].Max.Y}, Max: vg.Point{X: ly.data[0].Max.X, Y: ly.data[0].Max.Y + bandHigh}}
}

// place writes each phase label at its window's start, in the first row
// of the band where it clears the label before it, kept inside the data's
// width; it returns the rows used.
func (ly *timelineLayout) place(p *plot.Plot, phases []phaseLabel, rowHigh vg.Length) int {
	d := draw.Canvas{Rectangle: ly.data[0]}
	trX, _ := p.Transforms(&d)
	gap := labelStyle.Width(" ")
	var ends []vg.Length // each row's rightmost end
	ly.labels = ly.labels[:0]
	for _, ph := range phases {
		w := vg.Length(fontSlack) * labelStyle.Width(ph.text)
		x := max(min(trX(ph.x), d.Max.X-w), d.Min.X)
		row := slices.IndexFunc(ends, func(end vg.Length) bool { return end+gap <= x })
		if row < 0 {
			row = len(ends)
			ends = append(ends, 0)
		}
		ends[row] = x + w
		top := ly.band.Max.Y - vg.Length(row)*rowHigh
		ly.labels = append(ly.labels, placedLabel{phaseLabel: ph,
			box: vg.Rectangle{Min: vg.Point{X: x, Y: top - rowHigh}, Max: vg.Point{X: x + w, Y: top}}})
	}
	return len(ends)
}

// draw draws the timeline laid out on c: the title, the phase labels, the
// panels, the legends.
func (ly *timelineLayout) draw(c draw.Canvas, title string, panels []panel) {
	if title != "" {
		sty := titleStyle
		sty.Font.Size = ly.titleSz
		c.FillText(sty, ly.title, title)
	}
	for _, l := range ly.labels {
		sty := labelStyle
		sty.Color = l.color
		c.FillText(sty, vg.Point{X: l.box.Min.X, Y: l.box.Min.Y + labelStyle.FontExtents().Descent}, l.text)
	}
	for i, pn := range panels {
		pn.plot.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: ly.cells[i].Rectangle})
		pn.legend.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: ly.legends[i]})
	}
}

// memoryPlot is the memory panel: device memory and each model's, the
// phase windows shaded, the sleeps and wakes marked; with its legend and
// the windows' labels.
func memoryPlot(tl Timeline, sec func(time.Time) float64) (*plot.Plot, legend, []phaseLabel, error) {
	p := plot.New()
	p.X.Label.Text = "seconds since the first sample"
	p.Y.Label.Text = "GPU memory (GiB)"
	leg := newLegend()

	device := make(plotter.XYs, len(tl.Samples))
	labels := map[string]bool{}
	for i, s := range tl.Samples {
		device[i] = plotter.XY{X: sec(s.Time), Y: float64(s.Used) / GiB}
		for pid := range s.Procs {
			if l := tl.LabelOf(pid); l != "" {
				labels[l] = true
			}
		}
	}
	xs := xSpan{min: 0, max: device[len(device)-1].X}
	ymax := 0.0
	for _, d := range device {
		ymax = max(ymax, d.Y)
	}
	ymax = max(ymax*1.08, 1) // a margin above the highest line

	// Phase windows first, so the lines draw over them.
	phases, err := shadeWindows(p, tl, ymax, &xs)
	if err != nil {
		return nil, leg, nil, err
	}

	dl, err := plotter.NewLine(device)
	if err != nil {
		return nil, leg, nil, err
	}
	dl.Color = color.Gray{90}
	dl.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(dl)
	leg.add("device used", dl)

	for i, l := range slices.Sorted(maps.Keys(labels)) {
		var xy plotter.XYs
		for _, s := range tl.Samples {
			var b uint64
			for pid, v := range s.Procs {
				if tl.LabelOf(pid) == l {
					b += v
				}
			}
			xy = append(xy, plotter.XY{X: sec(s.Time), Y: float64(b) / GiB})
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, leg, nil, err
		}
		c := palette[i%len(palette)]
		line.Color = c
		line.Width = vg.Points(1.5)
		p.Add(line)
		leg.add(fmt.Sprintf("%s (%s)", l, tl.Names[l]), line)
		if err := markEvents(p, &leg, tl, sec, l, xy, c, i == 0, &xs); err != nil {
			return nil, leg, nil, err
		}
	}
	// The time axis spans the samples, the windows and the events, with a
	// margin each side so that no line or mark meets the axes; a run of
	// one sample still gets a second of axis.
	span := max(xs.max-xs.min, 1)
	p.X.Min, p.X.Max = xs.min-0.015*span, xs.min+span*1.015
	p.Y.Min, p.Y.Max = 0, ymax
	return p, leg, phases, nil
}

// xSpan is the time axis's extent so far, in seconds.
type xSpan struct{ min, max float64 }

// widen lowers the span's start to lo and raises its end to hi, where
// they lie beyond it.
func (s *xSpan) widen(lo, hi float64) { s.min, s.max = min(s.min, lo), max(s.max, hi) }

// shadeWindows shades the phase windows on p, in time order, each from
// its start to its end less the pad, and widens xs to them; it returns
// their labels.
func shadeWindows(p *plot.Plot, tl Timeline, ymax float64, xs *xSpan) ([]phaseLabel, error) {
	names := slices.SortedFunc(maps.Keys(tl.Windows), func(a, b string) int {
		return cmpFloat(tl.Windows[a].Start, tl.Windows[b].Start)
	})
	start, pad := unix(tl.Samples[0].Time), tl.Pad.Seconds()
	var phases []phaseLabel
	for i, n := range names {
		win := tl.Windows[n]
		x0, x1 := win.Start+pad-start, win.End-pad-start
		xs.widen(x0, x1)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: ymax}, {X: x0, Y: ymax}})
		if err != nil {
			return nil, err
		}
		c := palette[i%len(palette)]
		poly.Color = color.NRGBA{c.R, c.G, c.B, 22} // not premultiplied: RGBA with R > A is no colour (vgsvg wrote fill:#B8B5C0A2, which SVG ignores)
		poly.LineStyle.Width = 0
		p.Add(poly)
		phases = append(phases, phaseLabel{x: x0, text: n, color: darker(c)})
	}
	return phases, nil
}

// markEvents marks the sleeps and wakes sent to the model labelled l on its
// memory line xy, in its colour c, and widens xs to them; the first
// model's marks go in the legend.
func markEvents(p *plot.Plot, leg *legend, tl Timeline, sec func(time.Time) float64, l string, xy plotter.XYs, c color.RGBA, first bool, xs *xSpan) error {
	for _, kind := range []string{"sleep", "wake"} {
		var pts plotter.XYs
		for _, e := range tl.Events {
			if e.Label == l && (e.Kind == kind || (kind == "sleep" && e.Kind != "wake")) {
				x := sec(e.Time)
				xs.widen(x, x)
				pts = append(pts, plotter.XY{X: x, Y: valueAt(xy, x)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Color = c
		sc.Radius = vg.Points(3)
		sc.Shape = draw.TriangleGlyph{}
		if kind == "sleep" {
			sc.Shape = draw.PyramidGlyph{}
			sc.Color = color.RGBA{c.R / 2, c.G / 2, c.B / 2, 255}
		}
		p.Add(sc)
		if first {
			leg.add(kind+" sent", sc)
		}
	}
	return nil
}

// queuePlot draws the router's queue depth as steps over the memory plot's
// time axis (xmin … xmax).
func queuePlot(depth []record.QueueDepth, sec func(time.Time) float64, xmin, xmax float64) (*plot.Plot, legend, error) {
	q := plot.New()
	q.X.Label.Text = "seconds since the first sample"
	q.Y.Label.Text = "requests waiting for a wake"
	q.X.Min, q.X.Max = xmin, xmax
	leg := newLegend()
	var xy plotter.XYs
	prev, top := 0, 1
	for _, d := range depth {
		x := sec(d.At)
		xy = append(xy, plotter.XY{X: x, Y: float64(prev)}, plotter.XY{X: x, Y: float64(d.Queued)})
		prev, top = d.Queued, max(top, d.Queued)
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return nil, leg, err
	}
	line.Color = color.RGBA{90, 90, 90, 255}
	q.Add(line)
	leg.add("router queue (traffic phase)", line)
	q.Y.Min, q.Y.Max = 0, float64(top)*1.2
	return q, leg, nil
}

// valueAt is the line's value at x (the last point at or before x).
func valueAt(xy plotter.XYs, x float64) float64 {
	i, _ := slices.BinarySearchFunc(xy, x, func(p plotter.XY, x float64) int {
		switch {
		case p.X < x:
			return -1
		case p.X > x:
			return 1
		}
		return 0
	})
	if i >= len(xy) {
		i = len(xy) - 1
	}
	if i > 0 && xy[i].X > x {
		i--
	}
	return xy[i].Y
}

// darker is c at three quarters of its brightness, for text in c.
func darker(c color.RGBA) color.RGBA {
	d := func(v uint8) uint8 { return uint8(int(v) * 3 / 4) }
	return color.RGBA{d(c.R), d(c.G), d(c.B), c.A}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
