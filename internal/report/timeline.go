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

// WriteTimelineSVG draws device memory and each model's GPU memory over
// time (seconds from the first sample), the phase windows shaded and
// labelled, and every sleep and wake marked on its model's line.
func WriteTimelineSVG(w io.Writer, tl Timeline) error {
	if len(tl.Samples) == 0 {
		return fmt.Errorf("timeline: no GPU samples to draw")
	}
	t0 := tl.Samples[0].Time
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	p := plot.New()
	p.Title.Text = tl.Title
	p.X.Label.Text = "seconds since the first sample"
	p.Y.Label.Text = "GPU memory (GiB)"
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Title.TextStyle.Font.Size = vg.Points(11)

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
	ymax := 0.0
	for _, d := range device {
		ymax = max(ymax, d.Y)
	}
	ymax = max(ymax*1.3, 1) // headroom for the window labels and the legend

	// Phase windows first, so the lines draw over them; in time order.
	names := slices.SortedFunc(maps.Keys(tl.Windows), func(a, b string) int {
		return cmpFloat(tl.Windows[a].Start, tl.Windows[b].Start)
	})
	pad := tl.Pad.Seconds()
	for i, n := range names {
		win := tl.Windows[n]
		x0, x1 := win.Start+pad-unix(t0), win.End-pad-unix(t0)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: ymax}, {X: x0, Y: ymax}})
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		poly.Color = color.RGBA{c.R, c.G, c.B, 22}
		poly.LineStyle.Width = 0
		p.Add(poly)
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x0, Y: ymax * (0.96 - 0.045*float64(i%3))}}, Labels: []string{n}})
		if err != nil {
			return err
		}
		lbl.TextStyle[0].Font.Size = vg.Points(7)
		p.Add(lbl)
	}

	dl, err := plotter.NewLine(device)
	if err != nil {
		return err
	}
	dl.Color = color.Gray{90}
	dl.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(dl)
	p.Legend.Add("device used", dl)

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
			return err
		}
		c := palette[i%len(palette)]
		line.Color = c
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%s)", l, tl.Names[l]), line)

		for _, kind := range []string{"sleep", "wake"} {
			var pts plotter.XYs
			for _, e := range tl.Events {
				if e.Label == l && (e.Kind == kind || (kind == "sleep" && e.Kind != "wake")) {
					pts = append(pts, plotter.XY{X: sec(e.Time), Y: valueAt(xy, sec(e.Time))})
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
			if i == 0 {
				p.Legend.Add(kind+" sent", sc)
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, ymax
	if len(tl.Queue) == 0 {
		wt, err := p.WriterTo(12*vg.Inch, 5*vg.Inch, "svg")
		if err != nil {
			return err
		}
		_, err = wt.WriteTo(w)
		return err
	}
	q, err := queuePlot(tl.Queue, sec, p.X.Min, p.X.Max)
	if err != nil {
		return err
	}
	c := vgsvg.New(12*vg.Inch, 7.5*vg.Inch)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(2), PadBottom: vg.Points(2)}
	cs := plot.Align([][]*plot.Plot{{p}, {q}}, tiles, draw.New(c))
	p.Draw(cs[0][0])
	q.Draw(cs[1][0])
	_, err = c.WriteTo(w)
	return err
}

// queuePlot draws the router's queue depth as steps over the memory plot's
// time axis (xmin … xmax).
func queuePlot(depth []record.QueueDepth, sec func(time.Time) float64, xmin, xmax float64) (*plot.Plot, error) {
	q := plot.New()
	q.X.Label.Text = "seconds since the first sample"
	q.Y.Label.Text = "requests waiting for a wake"
	q.X.Min, q.X.Max = xmin, xmax
	var xy plotter.XYs
	prev, top := 0, 1
	for _, d := range depth {
		x := sec(d.At)
		xy = append(xy, plotter.XY{X: x, Y: float64(prev)}, plotter.XY{X: x, Y: float64(d.Queued)})
		prev, top = d.Queued, max(top, d.Queued)
	}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	line.Color = color.RGBA{90, 90, 90, 255}
	q.Add(line)
	q.Legend.Add("router queue (traffic phase)", line)
	q.Legend.Top = true
	q.Y.Min, q.Y.Max = 0, float64(top)*1.2
	return q, nil
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

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
