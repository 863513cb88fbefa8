package report

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
)

var keepTimelines = flag.String("timeline-png", "", "keep the rendered timelines (SVG and PNG) in this directory, to look at")

// timelineOf lays raw's run out as the harness records it: each of
// raw.Phases for each model in turn (switch and traffic once for all
// models), each window `each` long and padded by a second, a sleep and a
// wake in every sleep phase, the router queue through the traffic phase
// when queue is set, and a GPU sample every step.
func timelineOf(raw record.Raw, each, step time.Duration, queue bool) Timeline {
	models := slices.Sorted(maps.Keys(raw.Names))
	const pad = time.Second
	tl := Timeline{Names: raw.Names, Windows: map[string]record.Window{}, Pad: pad,
		LabelOf: func(pid int) string {
			if i := pid - 100; i >= 0 && i < len(models) {
				return models[i]
			}
			return ""
		},
		Title: "wakebench: GPU memory, " + raw.GPU + " — vllmsim profile tiny, time scale 1"}
	type nap struct {
		model      int
		from, to   time.Time
		level      int
		residualGB float64
	}
	var naps []nap
	at := raw.Started
	for _, ph := range raw.Phases {
		owners := models
		if ph == "switch" || ph == "traffic" {
			owners = []string{strings.Join(models, "")}
		}
		for i, o := range owners {
			start, end := at, at.Add(each)
			tl.Windows[o+"-"+ph] = record.Window{Start: unix(start.Add(-pad)), End: unix(end.Add(pad))}
			if lv, ok := strings.CutPrefix(ph, "sleep-level"); ok {
				level, _ := strconv.Atoi(lv)
				n := nap{model: i, from: start.Add(each / 4), to: start.Add(each * 3 / 4), level: level, residualGB: 0.5 / float64(level)}
				naps = append(naps, n)
				tl.Events = append(tl.Events, record.Event{Time: n.from, Label: o, Kind: "sleep L" + lv}, record.Event{Time: n.to, Label: o, Kind: "wake"})
			}
			if ph == "traffic" && queue {
				for k := range 20 {
					tl.Queue = append(tl.Queue, record.QueueDepth{At: start.Add(each * time.Duration(k) / 20), Queued: k % 4})
				}
			}
			at = end
		}
	}
	for t := raw.Started; !t.After(at); t = t.Add(step) {
		s := gpu.Sample{Time: t, Reading: gpu.Reading{Total: 48 << 30, Procs: map[int]uint64{}}}
		for i := range models {
			gib := 6 + 2*float64(i)
			for _, n := range naps {
				if n.model == i && !t.Before(n.from) && t.Before(n.to) {
					gib = n.residualGB
				}
			}
			s.Procs[100+i] = uint64(gib * GiB)
			s.Used += uint64(gib * GiB)
		}
		s.Used += 1 << 29
		tl.Samples = append(tl.Samples, s)
	}
	return tl
}

// timelineCases are runs short and long, of few phases and many, of 2 to
// 4 models, with and without the traffic queue, all from the golden record.
func timelineCases() map[string]Timeline {
	golden := goldenRaw()
	traffic := goldenRaw()
	traffic.Phases = append(traffic.Phases, "switch", "traffic")
	four := goldenRaw()
	four.Names = map[string]string{"A": "meta-llama/Llama-3.1-8B-Instruct", "B": "Qwen/Qwen2.5-14B-Instruct-AWQ",
		"C": "mistralai/Mistral-7B-Instruct-v0.3", "D": "google/gemma-2-9b-it"}
	four.Phases = []string{"restart", "baseline", "sleep-level1", "after-wake", "sleep-level2", "switch", "traffic", "soak"}
	three := goldenRaw()
	three.Names = map[string]string{"A": "tiny-a", "B": "tiny-b", "C": "tiny-c"}
	three.Phases = four.Phases
	one := Timeline{Samples: []gpu.Sample{{Time: golden.Started, Reading: gpu.Reading{Used: 1 << 28, Total: 48 << 30}}},
		LabelOf: func(int) string { return "" }, Title: "wakebench: GPU memory, 1 × Tiny Sim GPU (simulated) — vllmsim profile tiny, time scale 1"}
	return map[string]Timeline{
		"golden record":                     timelineOf(golden, 10*time.Second, 100*time.Millisecond, false),
		"golden record with traffic":        timelineOf(traffic, 10*time.Second, 100*time.Millisecond, true),
		"three models, short phases":        timelineOf(three, 300*time.Millisecond, 20*time.Millisecond, true),
		"four models, long run, long names": timelineOf(four, 3*time.Minute, time.Second, true),
		"four models without traffic queue": timelineOf(four, 40*time.Second, 500*time.Millisecond, false),
		"one sample":                        one,
	}
}

// TestTimelineFitsItsFrame renders each run's timeline and checks that
// every text fits the frame with room for a wider font than the one it was
// measured in and overlaps no other text, and (rendered to PNG by
// rsvg-convert, with whatever font the machine substitutes) that nothing
// touches the frame's edges.
func TestTimelineFitsItsFrame(t *testing.T) {
	for name, tl := range timelineCases() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteTimelineSVG(&b, tl))
			frame, texts := svgTexts(t, b.Bytes())
			require.NotEmpty(t, texts)
			inner := vg.Rectangle{Min: vg.Point{X: 2, Y: 2}, Max: vg.Point{X: frame.Max.X - 2, Y: frame.Max.Y - 2}}
			for i, a := range texts {
				assert.True(t, inside(a.box, inner), "%q (%v) runs off the %v frame", a.text, a.box, frame.Max)
				for _, o := range texts[i+1:] {
					assert.False(t, overlap(a.box, o.box), "%q (%v) lies on %q (%v)", a.text, a.box, o.text, o.box)
				}
			}
			checkPNGBorder(t, name, b.Bytes())
		})
	}
}

// TestTimelineLegendsClearOfDataAndLabels: the layout puts each legend and
// the phase labels beside the data, never on it, and no label on another.
func TestTimelineLegendsClearOfDataAndLabels(t *testing.T) {
	for name, tl := range timelineCases() {
		t.Run(name, func(t *testing.T) {
			sec := func(x time.Time) float64 { return x.Sub(tl.Samples[0].Time).Seconds() }
			p, mem, phases, err := memoryPlot(tl, sec)
			require.NoError(t, err)
			panels := []panel{{plot: p, legend: mem}}
			if len(tl.Queue) > 0 {
				q, queue, err := queuePlot(tl.Queue, sec, p.X.Min, p.X.Max)
				require.NoError(t, err)
				panels = append(panels, panel{plot: q, legend: queue})
			}
			ly := layOutTimeline(tl.Title, panels, phases)
			require.Len(t, ly.labels, len(tl.Windows))
			var parts []vg.Rectangle
			parts = append(parts, ly.data...)
			parts = append(parts, ly.legends...)
			for i, a := range parts {
				assert.True(t, inside(a, ly.frame), "part %d %v is off the frame %v", i, a, ly.frame)
				for _, o := range parts[i+1:] {
					assert.False(t, overlap(a, o), "%v lies on %v", a, o)
				}
			}
			for i, l := range ly.labels {
				assert.True(t, inside(l.box, ly.band), "%q %v outside the band %v", l.text, l.box, ly.band)
				for _, o := range ly.labels[i+1:] {
					assert.False(t, overlap(l.box, o.box), "%q lies on %q", l.text, o.text)
				}
				for _, d := range parts {
					assert.False(t, overlap(l.box, d), "%q lies on %v", l.text, d)
				}
			}
			assert.Equal(t, ly.data[0].Min.X, ly.data[len(ly.data)-1].Min.X, "the panels share one time axis")
			assert.Equal(t, ly.data[0].Max.X, ly.data[len(ly.data)-1].Max.X, "the panels share one time axis")
			// No line meets the axes: the time axis reaches past the data.
			assert.Less(t, p.X.Min, 0.0)
			assert.Greater(t, p.X.Max, sec(tl.Samples[len(tl.Samples)-1].Time))
		})
	}
}

// substituteWidth is how much wider than the Liberation Serif the SVG
// names a substitute font may write a text: DejaVu Serif, Debian's
// default serif, measured 1.16–1.29 times as wide on the timeline's texts.
const substituteWidth = 1.3

// svgText is a text of the SVG, its box in points from the bottom left, as
// wide as substituteWidth times the width measured in the font it names.
type svgText struct {
	text string
	box  vg.Rectangle
}

var fontSize = regexp.MustCompile(`font-size:([0-9.]+)px`)

// svgTexts reads the frame and the unrotated texts of an SVG written by
// vgsvg: each text is placed at (x, -y) under a flip of the frame.
func svgTexts(t *testing.T, svg []byte) (vg.Rectangle, []svgText) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var (
		frame   vg.Rectangle
		texts   []svgText
		rotated []bool // per open <g>: whether it rotates
		cur     *svgText
	)
	attr := func(el xml.StartElement, name string) string {
		for _, a := range el.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(s string) vg.Length {
		f, err := strconv.ParseFloat(strings.TrimSuffix(s, "pt"), 64)
		require.NoError(t, err, "a number in the SVG: %q", s)
		return vg.Length(f)
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "svg":
				frame.Max = vg.Point{X: num(attr(el, "width")), Y: num(attr(el, "height"))}
			case "g":
				rotated = append(rotated, strings.Contains(attr(el, "transform"), "rotate"))
			case "text":
				if slices.Contains(rotated, true) {
					continue // the y axis' label, along the left edge
				}
				m := fontSize.FindStringSubmatch(attr(el, "style"))
				require.NotNil(t, m, "a text's font size")
				size := num(m[1])
				x, y := num(attr(el, "x")), -num(attr(el, "y"))
				// From the descenders' foot to the capitals' top.
				cur = &svgText{box: vg.Rectangle{Min: vg.Point{X: x, Y: y - 0.2*size}, Max: vg.Point{X: x, Y: y + 0.7*size}}}
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "g":
				rotated = rotated[:len(rotated)-1]
			case "text":
				if cur != nil {
					size := (cur.box.Max.Y - cur.box.Min.Y) / 0.9
					sty := draw.TextStyle{Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
					cur.box.Max.X += substituteWidth * sty.Width(cur.text)
					texts = append(texts, *cur)
					cur = nil
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(el)
			}
		}
	}
	require.NotZero(t, frame.Max.X, "the SVG has a size")
	return frame, texts
}

func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Min.Y >= b.Min.Y && a.Max.X <= b.Max.X && a.Max.Y <= b.Max.Y
}

func overlap(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// checkPNGBorder renders svg with rsvg-convert and checks that a band
// along each edge of the picture is all background: no line, mark or
// text, in the font the renderer really used, reaches the frame.
func checkPNGBorder(t *testing.T, name string, svg []byte) {
	t.Helper()
	if _, err := exec.LookPath("rsvg-convert"); err != nil {
		const install = "rsvg-convert is missing: apt-get update -qq && apt-get install -y -qq librsvg2-bin"
		if os.Getenv("CI") != "" { // .ci/run installs it: in CI a missing renderer is a gap, not a skip
			t.Fatal(install)
		}
		t.Skip(install)
	}
	dir := t.TempDir()
	if *keepTimelines != "" {
		dir = *keepTimelines
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	base := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
	require.NoError(t, os.WriteFile(base+".svg", svg, 0o644))
	out, err := exec.Command("rsvg-convert", "-b", "white", "-o", base+".png", base+".svg").CombinedOutput()
	require.NoError(t, err, "rsvg-convert: %s", out)
	f, err := os.Open(base + ".png")
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	r := img.Bounds()
	const band = 4 // pixels
	var touched []string
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if x >= r.Min.X+band && x < r.Max.X-band && y >= r.Min.Y+band && y < r.Max.Y-band {
				continue
			}
			if !white(img.At(x, y)) && len(touched) < 5 {
				touched = append(touched, fmt.Sprintf("(%d,%d)", x, y))
			}
		}
	}
	assert.Empty(t, touched, "%s.png: something is drawn within %d px of the %v picture's edge", base, band, r.Size())
}

// white: the background, or near enough (antialiasing's faintest edge).
func white(c color.Color) bool {
	r, g, b, _ := c.RGBA()
	return r>>8 >= 0xf0 && g>>8 >= 0xf0 && b>>8 >= 0xf0
}

// TestTimelineColoursAreColours: every fill and stroke colour in the SVG
// is #RRGGBB. A premultiplied color.RGBA whose channels exceed its alpha
// (the phase shading once) came out as nine hex digits, which SVG ignores:
// every window was shaded the same grey, not its model's colour.
func TestTimelineColoursAreColours(t *testing.T) {
	valid := regexp.MustCompile(`^#[0-9A-Fa-f]{6}$`)
	for name, tl := range timelineCases() {
		var b bytes.Buffer
		require.NoError(t, WriteTimelineSVG(&b, tl))
		cs := regexp.MustCompile(`(?:fill|stroke):(#[0-9A-Fa-f]+)`).FindAllStringSubmatch(b.String(), -1)
		require.NotEmpty(t, cs, name)
		for _, c := range cs {
			assert.Regexp(t, valid, c[1], "%s: colour %s", name, c[1])
		}
	}
}
