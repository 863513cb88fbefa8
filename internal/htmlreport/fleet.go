package htmlreport

import (
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/wakebench/wakebench/internal/report"
)

// Fleet is what fleet.html shows of a fleet run (package fleetreport
// fills it): the nodes to look at first, each outlier-rule figure over
// the nodes with the outliers marked, and fleet.md's tables.
type Fleet struct {
	Status string
	// Simulated says which nodes ran on vllmsim ("" when none did).
	Simulated string
	Setup     string     // e.g. "7 nodes, 3 GPU kinds"
	Attention []string   // the nodes to look at: FAIL nodes and outliers, with why
	Summary   report.Doc // fleet.md's table model
	Metrics   []FleetMetric
}

// FleetMetric is one figure of the outlier rule over the nodes: a row per
// GPU kind (and model), a point per node.
type FleetMetric struct {
	Title, Unit string
	Rows        []FleetRow
}

// FleetRow is one GPU kind's nodes for one model.
type FleetRow struct {
	Name   string // e.g. "NVIDIA L20 · model A"
	Points []FleetPoint
}

// FleetPoint is one node's value; Outlier when the rule named the node
// for this figure.
type FleetPoint struct {
	Node    string
	Value   float64
	Outlier bool
	// Simulated: the node ran on vllmsim (its figure is simulated).
	Simulated bool
}

// WriteFleet writes fleet.html.
func WriteFleet(w io.Writer, f Fleet) error {
	v := view{Title: "wakebench fleet: " + f.Status, Status: f.Status, Simulated: f.Simulated, Setup: f.Setup, First: f.Attention}
	if len(f.Attention) == 0 {
		v.Counts = "Every node passed and none is an outlier of its kind."
	}
	var figs strings.Builder
	for _, m := range f.Metrics {
		rows := make([]Row, len(m.Rows))
		for i, r := range m.Rows {
			rows[i] = Row{Name: r.Name, Marked: map[int]bool{}}
			for j, p := range r.Points {
				rows[i].Values = append(rows[i].Values, p.Value)
				if p.Outlier {
					rows[i].Marked[j] = true
				}
			}
		}
		title := m.Title
		if anySimulated(m.Rows) {
			title += " (simulated nodes in the table)"
		}
		svg, err := stripSVG(title, m.Unit, summarize(rows))
		if err != nil {
			return fmt.Errorf("fleet.html: %w", err)
		}
		fmt.Fprintf(&figs, "<h3>%s</h3>\n%s", esc(m.Title), figure(svg))
		figs.WriteString(`<div class="scroll"><table class="num"><thead><tr><th>GPU kind · model</th><th>node</th><th>` + esc(m.Unit) + `</th><th>outlier</th><th>simulated</th></tr></thead><tbody>`)
		for _, r := range m.Rows {
			for _, p := range r.Points {
				cls, mark, sim := "", "", ""
				if p.Outlier {
					cls, mark = ` class="outlier"`, "OUTLIER"
				}
				if p.Simulated {
					sim = "simulated"
				}
				fmt.Fprintf(&figs, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>", cls, esc(r.Name), esc(p.Node), Num(p.Value), mark, sim)
			}
		}
		figs.WriteString("</tbody></table></div>\n")
	}
	if figs.Len() > 0 {
		v.Sections = append(v.Sections, section{ID: "nodes", Title: "Nodes by figure",
			Intro: "Each figure the outlier rule judges, a point per node, a row per GPU kind and model; outliers are red and named OUTLIER in the table.",
			Body:  template.HTML(figs.String())})
	}
	v.Sections = append(v.Sections, section{ID: "summary", Title: "Fleet report", Intro: "fleet.md's tables.", Body: summaryHTML(f.Summary)})
	if err := pageTmpl.Execute(w, v); err != nil {
		return fmt.Errorf("fleet.html: %w", err)
	}
	return nil
}

func anySimulated(rows []FleetRow) bool {
	for _, r := range rows {
		for _, p := range r.Points {
			if p.Simulated {
				return true
			}
		}
	}
	return false
}
