package htmlreport

import (
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/wakebench/wakebench/internal/report"
)

// Comparison is what a variant run's report.html shows (package variants
// fills it): the verdict and its reasons, for each variant against the
// reference the figures that moved most as each block's change (a point a
// block, the flagged figures marked), and summary.md's tables.
type Comparison struct {
	Status    string
	Simulated string // "" on hardware
	Setup     string // e.g. "3 blocks of 2 variants on one GPU, reference v0.31"
	// BlockFigure names a block's figure of a metric: "median", or
	// "fastest time or highest rate" (protocol.variant_block_figure best).
	BlockFigure string
	Attention   []string
	Summary     report.Doc
	Variants    []ComparisonVariant
}

// ComparisonVariant is one variant's figures against the reference's.
type ComparisonVariant struct {
	Title string // e.g. "v0.33 against v0.31"
	// Rows: a figure each (its name and unit), a point per block (the
	// variant's change against the reference in that block, percent);
	// Flagged when the paired verdict called it worse or better.
	Rows []ComparisonRow
}

// ComparisonRow is one figure of a variant: its change in each block.
type ComparisonRow struct {
	Name     string
	BlockPct []float64
	Flagged  bool
}

// WriteComparison writes a variant run's report.html.
func WriteComparison(w io.Writer, c Comparison) error {
	v := view{Title: "wakebench variants: " + c.Status, Status: c.Status, Simulated: c.Simulated, Setup: c.Setup, First: c.Attention}
	if len(c.Attention) == 0 {
		v.Counts = "Every block's run passed and no variant is worse than the reference beyond the tolerance."
	}
	var figs strings.Builder
	for _, cv := range c.Variants {
		if len(cv.Rows) == 0 {
			continue
		}
		rows := make([]Row, len(cv.Rows))
		for i, r := range cv.Rows {
			rows[i] = Row{Name: r.Name, Values: r.BlockPct, Marked: map[int]bool{}}
			if r.Flagged {
				for j := range r.BlockPct {
					rows[i].Marked[j] = true
				}
			}
		}
		svg, err := stripSVG(cv.Title, "change against the reference in each block (%)", summarize(rows))
		if err != nil {
			return fmt.Errorf("report.html: %w", err)
		}
		fmt.Fprintf(&figs, "<h3>%s</h3>\n%s", esc(cv.Title), figure(svg))
	}
	if figs.Len() > 0 {
		v.Sections = append(v.Sections, section{ID: "blocks", Title: "Each block's change",
			Intro: "For each variant, the figures that moved most: a point a block (the variant's " + c.BlockFigure + " against the reference's in the same block, percent), the median a bar; a figure the paired verdict flagged is red.",
			Body:  template.HTML(figs.String())})
	}
	v.Sections = append(v.Sections, section{ID: "summary", Title: "Comparison", Intro: "summary.md's tables.", Body: summaryHTML(c.Summary)})
	if err := pageTmpl.Execute(w, v); err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	return nil
}
