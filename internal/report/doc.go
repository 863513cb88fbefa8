package report

import (
	"slices"
	"strings"
)

// Doc is a run's summary as a table model: headings, paragraphs, lists
// and tables, built once (Summary) and written by each renderer:
// Markdown (summary.md, the run's last lines on stdout) and HTML
// (report.html, package htmlreport). Text is plain text whose only markup
// is typed (Strong, Code, Em), so a renderer never parses it back: an
// error's "<nil>" or "*" is text in every output.
type Doc struct {
	Blocks  []Block
	section string // the section the next block is in: the last Heading's
}

// BlockKind says what a Block is.
type BlockKind int

// The kinds of block.
const (
	Heading BlockKind = iota
	Paragraph
	List
	Table
)

// Block is one heading, paragraph, list or table of a Doc.
type Block struct {
	Kind    BlockKind
	Section string     // the section it is in: its heading's Section (SectionGate, …); "" before the first
	Level   int        // a heading's: 1 (the verdict) or 2
	Text    string     // a heading's or a paragraph's (a paragraph's "\n" are its line breaks)
	Items   []ListItem // a list's
	Header  []string   // a table's column heads
	Rows    [][]string // a table's rows, a cell per column head
}

// ListItem is one item of a list, with its sub-items.
type ListItem struct {
	Text string
	Sub  []string
}

// SectionGate is the regression gate's section (report.html shows its
// own, with each metric's power, instead).
const SectionGate = "gate"

// The inline markup of a Doc's text: each span between a pair of these
// runes (from Unicode's private use area, which no figure or error text
// holds), written by Strong, Code and Em.
const (
	strongOpen, strongClose = '\uE000', '\uE001'
	codeOpen, codeClose     = '\uE002', '\uE003'
	emOpen, emClose         = '\uE004', '\uE005'
)

// Strong is s in bold.
func Strong(s string) string { return string(strongOpen) + s + string(strongClose) }

// Code is s as code (a config key, a command).
func Code(s string) string { return string(codeOpen) + s + string(codeClose) }

// Em is s in italics.
func Em(s string) string { return string(emOpen) + s + string(emClose) }

// marks are the rune that opens or closes each kind of span.
var marks = map[rune]struct {
	kind string
	open bool
}{
	strongOpen: {"strong", true}, strongClose: {"strong", false},
	codeOpen: {"code", true}, codeClose: {"code", false},
	emOpen: {"em", true}, emClose: {"em", false},
}

// Inline is text for a renderer: its plain text through plain, each
// span's marks replaced by open and close of its kind ("strong", "code",
// "em"). Spans are always balanced: a mark that opens a span already
// open, or closes one that is not, is dropped (an error's text that held
// one of the runes cannot restyle the rest), and what is still open at
// the end is closed.
func Inline(text string, plain func(string) string, open, close func(kind string) string) string {
	var b strings.Builder
	var stack []string // the spans open, innermost last
	start := 0
	for i, r := range text {
		m, ok := marks[r]
		if !ok {
			continue
		}
		b.WriteString(plain(text[start:i]))
		start = i + len(string(r))
		switch {
		case m.open && !slices.Contains(stack, m.kind):
			stack = append(stack, m.kind)
			b.WriteString(open(m.kind))
		case !m.open && len(stack) > 0 && stack[len(stack)-1] == m.kind:
			stack = stack[:len(stack)-1]
			b.WriteString(close(m.kind))
		}
	}
	b.WriteString(plain(text[start:]))
	for len(stack) > 0 {
		b.WriteString(close(stack[len(stack)-1]))
		stack = stack[:len(stack)-1]
	}
	return b.String()
}

// markdownMarks are the Markdown of each kind of span.
var markdownMarks = map[string]string{"strong": "**", "code": "`", "em": "_"}

// md is text in Markdown.
func md(text string) string {
	mark := func(kind string) string { return markdownMarks[kind] }
	return Inline(text, func(s string) string { return s }, mark, mark)
}

// Markdown is d as Markdown (GitHub's tables): each block ends its line,
// a blank line between blocks.
func (d Doc) Markdown() string {
	var b strings.Builder
	for i, bl := range d.Blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		switch bl.Kind {
		case Heading:
			b.WriteString(strings.Repeat("#", bl.Level) + " " + md(bl.Text) + "\n")
		case Paragraph:
			b.WriteString(md(bl.Text) + "\n")
		case List:
			for _, it := range bl.Items {
				b.WriteString("- " + md(it.Text) + "\n")
				for _, s := range it.Sub {
					b.WriteString("  - " + md(s) + "\n")
				}
			}
		case Table:
			b.WriteString(row(bl.Header) + "\n|" + strings.Repeat("---|", len(bl.Header)) + "\n")
			for _, r := range bl.Rows {
				b.WriteString(row(r) + "\n")
			}
		}
	}
	return b.String()
}

// row is a table row in Markdown ("| a | b | |": an empty cell is one
// space).
func row(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		if c != "" {
			b.WriteString(" " + md(c))
		}
		b.WriteString(" |")
	}
	return b.String()
}

// Heading starts section with a heading of level: the blocks added
// after it are in section.
func (d *Doc) Heading(level int, section, text string) {
	d.section = section
	d.add(Block{Kind: Heading, Level: level, Text: text})
}

// Para adds a paragraph (its "\n" are line breaks).
func (d *Doc) Para(text string) { d.add(Block{Kind: Paragraph, Text: text}) }

// List adds a list of items; none adds nothing.
func (d *Doc) List(items ...ListItem) {
	if len(items) > 0 {
		d.add(Block{Kind: List, Items: items})
	}
}

// Table adds a table: its column heads and its rows, a cell per head.
func (d *Doc) Table(header []string, rows [][]string) {
	d.add(Block{Kind: Table, Header: header, Rows: rows})
}

// add adds b in the section of the heading before it.
func (d *Doc) add(b Block) {
	b.Section = d.section
	d.Blocks = append(d.Blocks, b)
}
