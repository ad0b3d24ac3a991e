package report

import (
	"bytes"
	"fmt"
	"strings"
)

// md builds report.md.
type md struct {
	bytes.Buffer
}

func (b *md) p(format string, args ...any) {
	fmt.Fprintf(b, format, args...)
	b.WriteString("\n\n")
}

func (b *md) h2(title string) { b.p("## %s", title) }

// table writes a GitHub-flavoured Markdown table; the first column is
// left-aligned, the others right-aligned (numbers).
func (b *md) table(head []string, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("|")
	for _, h := range head {
		b.WriteString(" " + esc(h) + " |")
	}
	b.WriteString("\n|")
	for i := range head {
		if i == 0 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("|")
		for i := range head {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

const dash = "–"

// msCell spells seconds as milliseconds with one decimal.
func msCell(sec float64) string { return fmt.Sprintf("%.1f", 1000*sec) }

func pctCell(frac float64) string { return fmt.Sprintf("%.1f", 100*frac) }

// val returns f of the pooled row of (mode, level), or ok false.
func (a *analysis) val(mode string, level int, f func(*Row) float64) (float64, bool) {
	c := a.cell(mode, level)
	if c == nil {
		return 0, false
	}
	return f(&c.pooled), true
}

// metricCol is one per-mode column of a table: its name, its value and
// how the value is spelled.
type metricCol struct {
	name string
	f    func(*Row) float64
	// opt, used instead of f when set, is a figure that may not have been
	// measured: nil is spelled "n/a".
	opt  func(*Row) *float64
	cell func(float64) string
	// col, when set, is the TSV column f reads: a row read from a TSV
	// without it (Row.Measured) is spelled "n/a", not 0.
	col string
}

func msCol(name, col string, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: msCell, col: col}
}

func pctCol(name, col string, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: pctCell, col: col}
}

func fixedCol(name, col string, prec int, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }, col: col}
}

func optCell(name string, f func(*Row) *float64, cell func(float64) string) metricCol {
	return metricCol{name: name, opt: f, cell: cell}
}

// perModeTable writes a table with one row per level and, per mode, one
// column per metric.
func (a *analysis) perModeTable(b *md, cols []metricCol) {
	head := []string{"Concurrency"}
	for _, m := range a.modes {
		for _, c := range cols {
			head = append(head, m+" "+c.name)
		}
	}
	var rows [][]string
	for _, l := range a.levels {
		r := []string{fmt.Sprint(l)}
		for _, m := range a.modes {
			for _, c := range cols {
				switch cl := a.cell(m, l); {
				case cl == nil:
					r = append(r, dash)
				case c.col != "" && !cl.pooled.Measured(c.col):
					r = append(r, "n/a")
				case c.opt != nil && c.opt(&cl.pooled) == nil:
					r = append(r, "n/a")
				case c.opt != nil:
					r = append(r, c.cell(*c.opt(&cl.pooled)))
				default:
					r = append(r, c.cell(c.f(&cl.pooled)))
				}
			}
		}
		rows = append(rows, r)
	}
	b.table(head, rows)
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

func signedMs(sec float64) string { return fmt.Sprintf("%+.1f", 1000*sec) }

// relPct spells d/base as a signed percentage, or a dash when base is 0.
func relPct(d, base float64) string {
	if base == 0 {
		return dash
	}
	return fmt.Sprintf("%+.1f", 100*d/base)
}

// ciCell spells a spread as "mean ± half" with scale and decimals.
func ciCell(sp spread, scale float64, prec int) string {
	if sp.N == 0 {
		return dash
	}
	if sp.N < 2 {
		return fmt.Sprintf("%.*f", prec, scale*sp.Mean)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, scale*sp.Mean, prec, scale*sp.HalfCI)
}

func valuesCell(sp spread, scale float64, prec int) string {
	parts := make([]string, len(sp.Values))
	for i, v := range sp.Values {
		parts[i] = fmt.Sprintf("%.*f", prec, scale*v)
	}
	return strings.Join(parts, ", ")
}

// measuredCell is text, or "n/a" when c's figures lack the TSV column col.
func (a *analysis) measuredCell(c *cell, col, text string) string {
	if !c.pooled.Measured(col) {
		return "n/a"
	}
	return text
}

// points returns the points of (mode, level), by run.
func (a *analysis) points(mode string, level int) []*Point {
	var out []*Point
	for i := range a.s.Points {
		if p := &a.s.Points[i]; p.Mode == mode && p.Level == level {
			out = append(out, p)
		}
	}
	return out
}
