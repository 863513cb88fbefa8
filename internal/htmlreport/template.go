package htmlreport

import "html/template"

// pageTmpl is report.html's and fleet.html's page: no script, no
// external resource; every box keeps its content (wide tables scroll
// inside their own box, pictures scale to the page's width, long words
// break), so the page never scrolls sideways at any width.
var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1180px; padding: 0 16px 48px; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif; color: #1b1b1b; background: #fff; overflow-wrap: anywhere; }
header { padding: 16px 0 8px; border-bottom: 1px solid #ddd; }
h1 { margin: 0 0 4px; font-size: 28px; }
h2 { margin-top: 32px; border-bottom: 1px solid #eee; padding-bottom: 4px; }
h3 { margin-top: 24px; }
.verdict { display: inline-block; padding: 2px 12px; border-radius: 4px; color: #fff; }
.PASS { background: #1a7f37; }
.FAIL { background: #cf222e; }
.NOT.RUN { background: #6e7781; }
.sim { margin: 8px 0; padding: 8px 12px; background: #fff8c5; border: 1px solid #d4a72c; border-radius: 4px; }
.first { margin: 8px 0; padding: 8px 12px; background: #ffebe9; border: 1px solid #cf222e; border-radius: 4px; }
.first p { margin: 4px 0; }
.muted { color: #57606a; }
nav ul { list-style: none; padding: 0; margin: 8px 0; display: flex; flex-wrap: wrap; gap: 4px 16px; }
.scroll { overflow-x: auto; max-width: 100%; margin: 8px 0; }
table { border-collapse: collapse; font-size: 13px; overflow-wrap: normal; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
table.num td { font-variant-numeric: tabular-nums; }
tr.fail td, td.fail { background: #ffebe9; }
tr.outlier td { background: #fff1e5; }
.figure { max-width: 100%; margin: 8px 0; }
.figure svg { display: block; width: 100%; height: auto; max-width: 900px; }
pre, code { font-family: ui-monospace, "Liberation Mono", monospace; font-size: 13px; }
pre { white-space: pre-wrap; }
footer { margin-top: 40px; font-size: 13px; }
</style>
</head>
<body>
<header>
<h1>wakebench: <span class="verdict {{.Status}}" id="status">{{.Status}}</span></h1>
{{if .Simulated}}<div class="sim" id="simulated">{{.Simulated}}</div>{{end}}
<div class="muted" id="setup">{{.Setup}}</div>
{{if .First}}<div class="first" id="first-failed"><strong>What failed first</strong>{{range .First}}<p>{{.}}</p>{{end}}</div>{{end}}
<div id="counts">{{.Counts}}</div>
<nav><ul>{{range .Sections}}<li><a href="#{{.ID}}">{{.Title}}</a></li>{{end}}</ul></nav>
</header>
<main>
{{range .Sections}}<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{if .Intro}}<p class="muted">{{.Intro}}</p>{{end}}
{{.Body}}
</section>
{{end}}</main>
<footer class="muted">Written by wakebench from the run's report.json, summary.md, timeline.svg and bench.txt, which hold the same figures.{{if .Simulated}} Simulated run.{{end}}</footer>
</body>
</html>
`))
