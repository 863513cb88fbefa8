package htmlreport

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/report"
)

var screenshots = flag.String("screenshots", "", "write each page's first screen, as Chromium drew it, into this directory "+
	"(docs/: go test ./internal/htmlreport -run Chromium -screenshots ../../docs makes the README's picture)")

// chromiumPath is the headless browser the page is tested in: Debian's
// chromium (.ci/run installs it), or WAKEBENCH_CHROMIUM.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WAKEBENCH_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	const install = "no Chromium to render report.html in: apt-get update -qq && apt-get install -y -qq chromium (or set WAKEBENCH_CHROMIUM)"
	if os.Getenv("CI") != "" { // .ci/run installs it: in CI a missing browser is a gap, not a skip
		t.Fatal(install)
	}
	t.Skip(install)
	return ""
}

// overflowJS lists every box whose content overflows it (outside the
// boxes meant to scroll: wide tables scroll inside their own), every box
// reaching past the page's sides, and a page that scrolls sideways.
const overflowJS = `(() => {
  const bad = [];
  const de = document.documentElement, W = de.clientWidth;
  if (de.scrollWidth > W) bad.push("the page scrolls sideways: " + de.scrollWidth + " > " + W);
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined ? "." + el.className : "") + " «" + (el.textContent || "").trim().slice(0, 40) + "»";
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg") && el.tagName.toLowerCase() !== "svg") continue; // inside a picture: the picture is the box
    if (el.parentElement && el.parentElement.closest(".scroll")) continue; // inside a box that scrolls
    const cs = getComputedStyle(el);
    if (cs.display === "none" || cs.display === "inline") continue;
    const r = el.getBoundingClientRect();
    if (r.left < -0.5 || r.right > W + 0.5) bad.push(name(el) + " reaches past the page: " + r.left.toFixed(1) + ".." + r.right.toFixed(1) + " of " + W);
    const scrolls = cs.overflowX === "auto" || cs.overflowX === "scroll";
    if (!scrolls && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) bad.push(name(el) + " overflows its box: " + el.scrollWidth + " > " + el.clientWidth);
  }
  return bad;
})()`

// TestInChromium renders report.html in headless Chromium at a desktop's
// width and a phone's: nothing overflows its box, the page loads nothing
// from anywhere, the verdict, what failed first and the summary's figures
// are there as text, and a screenshot of the first screen is taken.
func TestInChromium(t *testing.T) {
	exe := chromiumPath(t)
	dir := t.TempDir()
	cases := map[string]Run{"pass": testRun(t), "fail": failedRun(t)}
	bctx := browser(t, exe)

	// The check itself: a box that does overflow is found.
	wide := filepath.Join(dir, "wide.html")
	require.NoError(t, os.WriteFile(wide, []byte(strings.Replace(render(t, cases["pass"]), "</main>",
		`<p id="wide" style="white-space:nowrap">`+strings.Repeat("unbreakable ", 200)+`</p></main>`, 1)), 0o644))
	bad, _, _, _ := open(t, bctx, wide, 1280)
	assert.Contains(t, strings.Join(bad, "\n"), "p#wide", "the overflow check finds a paragraph wider than the page")

	for name, r := range cases {
		path := filepath.Join(dir, name+".html")
		require.NoError(t, os.WriteFile(path, []byte(render(t, r)), 0o644))
		for _, width := range []int64{1280, 400} {
			t.Run(fmt.Sprintf("%s/%dpx", name, width), func(t *testing.T) {
				bad, fetched, text, shot := open(t, bctx, path, width)
				assert.Empty(t, bad, "boxes overflowing at %d px", width)
				assert.Empty(t, fetched, "the page fetched something")
				assertKeyText(t, r, text)

				img, err := png.Decode(bytes.NewReader(shot))
				require.NoError(t, err)
				assert.Equal(t, int(width), img.Bounds().Dx(), "the screenshot is the viewport's width")
				if *screenshots != "" && name == "pass" && width == 1280 {
					require.NoError(t, os.WriteFile(filepath.Join(*screenshots, "report-html.png"), shot, 0o644))
				}
			})
		}
	}

	// fleet.html: the same page over nodes, the outlier named first and
	// marked in its figure's table, at both widths.
	f := testFleet()
	var b bytes.Buffer
	require.NoError(t, WriteFleet(&b, f))
	path := filepath.Join(dir, "fleet.html")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	for _, width := range []int64{1280, 400} {
		t.Run(fmt.Sprintf("fleet/%dpx", width), func(t *testing.T) {
			bad, fetched, text, _ := open(t, bctx, path, width)
			assert.Empty(t, bad, "boxes overflowing at %d px", width)
			assert.Empty(t, fetched, "the page fetched something")
			assert.Contains(t, text, "wakebench: FAIL")
			assert.Contains(t, text, f.Attention[0])
			assert.Contains(t, text, "node-007\t0.31\tOUTLIER\tsimulated")
		})
	}
}

// fleetSummary is a fleet report's verdict, setup and one node to look at.
func fleetSummary() report.Doc {
	var d report.Doc
	d.Heading(1, "verdict", "Fleet report: FAIL")
	d.Para("9 nodes, 2 GPU kinds.")
	d.Heading(2, "attention", "Nodes to look at")
	d.List(report.ListItem{Text: report.Strong("node-007") + ": outlier"})
	return d
}

// testFleet is a fleet of two GPU kinds, node-007 an outlier of its kind.
func testFleet() Fleet {
	f := Fleet{Status: "FAIL", Simulated: "Simulated: 9 of the 9 nodes ran on vllmsim, not on GPU hardware; their figures are simulated.",
		Setup:     "9 nodes, 2 GPU kinds",
		Attention: []string{"node-007 (NVIDIA H100 80GB HBM3): PASS; outlier: A l1_wake_fraction_of_floor = 0.31, kind median 0.62: at least 30% worse than the kind's other nodes"},
		Summary:   fleetSummary()}
	m := FleetMetric{Title: "model A: level-1 wake against its host link floor (l1_wake_fraction_of_floor)", Unit: "fraction of the floor"}
	for k, kind := range []string{"NVIDIA H100 80GB HBM3", "NVIDIA L20"} {
		row := FleetRow{Name: kind + " · model A"}
		for i := range 5 - k {
			n := fmt.Sprintf("node-%03d", 5*k+i+3)
			v := 0.6 + 0.01*float64(i)
			row.Points = append(row.Points, FleetPoint{Node: n, Value: v, Simulated: true})
		}
		if k == 0 {
			row.Points[4] = FleetPoint{Node: "node-007", Value: 0.31, Outlier: true, Simulated: true}
		}
		m.Rows = append(m.Rows, row)
	}
	f.Metrics = []FleetMetric{m}
	return f
}

// assertKeyText: what a reader looks for first is on the page as text,
// not only in a picture: the verdict, the simulated label, what failed
// first, and every cell of the summary's models table.
func assertKeyText(t *testing.T, r Run, text string) {
	t.Helper()
	assert.Contains(t, text, "wakebench: "+r.Report.Status)
	if r.Report.Simulated != nil {
		assert.Contains(t, text, r.Report.Simulated.Label())
	}
	for _, f := range r.Report.Failures {
		assert.Contains(t, text, f.Error)
	}
	for _, c := range r.Report.Checks {
		if c.Fails() {
			assert.Contains(t, text, c.String(), "the first failed check")
			break
		}
	}
	rows := 0
	for _, line := range strings.Split(report.Summary(r.Report).Markdown(), "\n") {
		if !strings.HasPrefix(line, "| A ") && !strings.HasPrefix(line, "| B ") {
			continue
		}
		for _, cell := range strings.Split(strings.Trim(line, "| "), " | ") {
			assert.Contains(t, text, strings.TrimSpace(cell))
		}
		rows++
	}
	assert.Positive(t, rows, "the summary's model rows")
}

var pages = flag.String("pages", "", "comma-separated report.html and fleet.html files a run wrote, for TestPagesInChromium (.ci/run: make bench's out/report.html, make fleet's out/fleet/fleet/fleet.html)")

// TestPagesInChromium renders the pages a run wrote (-pages; .ci/run
// names make bench's report.html and make fleet's fleet.html) as
// TestInChromium renders its own: nothing overflows at either width,
// nothing is fetched, the verdict is there as text.
func TestPagesInChromium(t *testing.T) {
	if *pages == "" {
		t.Skip("no -pages: TestInChromium renders the package's own pages")
	}
	bctx := browser(t, chromiumPath(t))
	for _, path := range strings.Split(*pages, ",") {
		abs, err := filepath.Abs(path)
		require.NoError(t, err)
		for _, width := range []int64{1280, 400} {
			t.Run(fmt.Sprintf("%s/%dpx", path, width), func(t *testing.T) {
				bad, fetched, text, _ := open(t, bctx, abs, width)
				assert.Empty(t, bad, "boxes overflowing at %d px", width)
				assert.Empty(t, fetched, "the page fetched something")
				assert.Regexp(t, `wakebench(?: fleet)?: (PASS|FAIL|NOT RUN)`, strings.ReplaceAll(text, "\n", " "))
			})
		}
	}
}

// browser starts headless Chromium for the test, flags as this
// workplace's probe found needed (no background networking: the machine's
// network is closed), and stops it when the test ends.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(bctx), "start Chromium (%s)", exe)
	return bctx
}

// open loads the page at path in a new tab width pixels wide and returns
// what overflowJS found, every resource the page fetched, the page's text
// and a screenshot of its first screen.
func open(t *testing.T, bctx context.Context, path string, width int64) (bad, fetched []string, text string, shot []byte) {
	t.Helper()
	tctx, cancelTab := chromedp.NewContext(bctx)
	defer cancelTab()
	require.NoError(t, chromedp.Do(tctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate("file://"+path)))
	var err error
	bad, err = chromedp.Run(tctx, chromedp.Evaluate[[]string](overflowJS))
	require.NoError(t, err)
	fetched, err = chromedp.Run(tctx, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name)`))
	require.NoError(t, err)
	text, err = chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	shot, err = chromedp.Run(tctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	return bad, fetched, text, shot
}
