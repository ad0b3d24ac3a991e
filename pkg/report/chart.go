package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Chart file names (SVG; PNG copies share the stem).
const (
	ChartTTFT    = "ttft_p95.svg"
	ChartHitRate = "hit_rate.svg"
	ChartOutput  = "output_tps.svg"
	// ChartServerHitRate is drawn when the points were scraped: the
	// server's hit rate beside the client's.
	ChartServerHitRate = "server_hit_rate.svg"
)

var chartTitles = map[string]string{
	ChartTTFT:          "TTFT p95 vs concurrency",
	ChartHitRate:       "KV-cache hit rate vs concurrency",
	ChartOutput:        "Output throughput vs concurrency",
	ChartServerHitRate: "KV-cache hit rate, server-side (solid) and client-side (dashed)",
}

// chartTitle returns the title of a chart file (SVG or PNG).
func chartTitle(file string) string {
	if t, ok := chartTitles[strings.TrimSuffix(file, filepath.Ext(file))+".svg"]; ok {
		return t
	}
	return file
}

// chartSpec is one chart: a value per (mode, level) and its axis.
type chartSpec struct {
	file, yLabel string
	// scale converts a Row value to the axis unit.
	f     func(*Row) float64
	scale float64
	// sla draws the SLA line(s).
	sla bool
	// yMax fixes the top of the y axis (0: from the data).
	yMax float64
	// col is the TSV column f reads: points whose TSV lacked it are not
	// drawn (never as 0). opt, when set, replaces f for a figure that may
	// not have been measured (nil: not drawn); dashed, when set, is drawn
	// beside it dashed (the client-side figure of a server-side chart).
	col    string
	opt    func(*Row) *float64
	dashed func(*Row) float64
}

// writeCharts writes the SVG charts (and PNG copies when png) into dir and
// returns their paths.
func (a *analysis) writeCharts(dir string, png bool) ([]string, error) {
	specs := []chartSpec{
		{file: ChartTTFT, yLabel: "TTFT p95 (ms)", f: func(r *Row) float64 { return r.TTFTP95 }, scale: 1000, sla: true, col: "ttft_p95_sec"},
		{file: ChartHitRate, yLabel: "KV-cache hit rate (%, token-weighted)", f: func(r *Row) float64 { return r.HitRate }, scale: 100, yMax: 110, col: "kv_hit_rate"},
		{file: ChartOutput, yLabel: "Output throughput (tokens/s)", f: func(r *Row) float64 { return r.OutputTPS }, scale: 1, col: "output_tps"},
	}
	if a.anyServer() {
		specs = append(specs, chartSpec{
			file: ChartServerHitRate, yLabel: "KV-cache hit rate (%, token-weighted)", scale: 100, yMax: 110,
			opt:    func(r *Row) *float64 { return r.ServerHitRate },
			dashed: func(r *Row) float64 { return r.HitRate },
		})
	}
	var files []string
	for _, sp := range specs {
		p, err := a.chart(sp)
		if err != nil {
			return nil, fmt.Errorf("draw chart %s: %w", sp.file, err)
		}
		formats := []string{"svg"}
		if png {
			formats = append(formats, "png")
		}
		for _, f := range formats {
			wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, f)
			if err != nil {
				return nil, fmt.Errorf("draw chart %s: %w", sp.file, err)
			}
			var b bytes.Buffer
			if _, err := wt.WriteTo(&b); err != nil {
				return nil, fmt.Errorf("draw chart %s: %w", sp.file, err)
			}
			path := filepath.Join(dir, strings.TrimSuffix(sp.file, ".svg")+"."+f)
			if err := writeFileAtomic(path, b.Bytes()); err != nil {
				return nil, err
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// value is the figure sp draws for r (opt's when set; the caller has
// checked it is measured).
func (sp chartSpec) value(r *Row) float64 {
	if sp.opt != nil {
		return *sp.opt(r)
	}
	return sp.f(r)
}

// anyServer reports whether any point has a server-side hit rate.
func (a *analysis) anyServer() bool {
	for _, c := range a.cells {
		if c.pooled.ServerHitRate != nil {
			return true
		}
	}
	return false
}

// errPoints are points with vertical error bars (the 95% interval).
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// chart draws one chart: a line per mode over the levels, with the runs'
// 95% interval as error bars when there are two or more runs.
func (a *analysis) chart(sp chartSpec) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = chartTitles[sp.file]
	if a.s.ID != "" {
		p.Title.Text += " (sweep " + a.s.ID + ")"
	}
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = "Concurrency (sessions)"
	p.Y.Label.Text = sp.yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	var ticks []plot.Tick
	for _, l := range a.levels {
		ticks = append(ticks, plot.Tick{Value: float64(l), Label: fmt.Sprint(l)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)

	ymax := 0.0
	for i, m := range a.modes {
		var pts plotter.XYs
		var errs plotter.YErrors
		hasErr := false
		for _, l := range a.levels {
			c := a.cell(m, l)
			if c == nil || (sp.col != "" && !c.pooled.Measured(sp.col)) {
				continue
			}
			if sp.opt != nil && sp.opt(&c.pooled) == nil {
				continue
			}
			y := sp.scale * sp.value(&c.pooled)
			pts = append(pts, plotter.XY{X: float64(l), Y: y})
			spr := spread{}
			if sp.f != nil {
				spr = a.spreadOf(m, l, sp.f)
			}
			h := 0.0
			if spr.N >= 2 && !math.IsNaN(spr.HalfCI) {
				h = sp.scale * spr.HalfCI
				hasErr = true
			}
			errs = append(errs, struct{ Low, High float64 }{h, h})
			ymax = math.Max(ymax, y+h)
		}
		if len(pts) == 0 {
			continue
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(2)
		scatter.Color = plotutil.Color(i)
		scatter.Shape = plotutil.Shape(i)
		p.Add(line, scatter)
		label := m
		switch m {
		case a.s.Baseline:
			label += " (baseline)"
		case a.s.Candidate:
			label += " (candidate)"
		}
		p.Legend.Add(label, line, scatter)
		if hasErr {
			eb, err := plotter.NewYErrorBars(errPoints{pts, errs})
			if err != nil {
				return nil, err
			}
			eb.Color = plotutil.Color(i)
			p.Add(eb)
		}
		if sp.dashed != nil {
			// The client-side figure of the same points, dashed.
			var cpts plotter.XYs
			for _, pt := range pts {
				cpts = append(cpts, plotter.XY{X: pt.X, Y: sp.scale * sp.dashed(&a.cell(m, int(pt.X)).pooled)})
			}
			cl, err := plotter.NewLine(cpts)
			if err != nil {
				return nil, err
			}
			cl.Color, cl.Width, cl.Dashes = plotutil.Color(i), vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(cl)
			p.Legend.Add(m+", client-side", cl)
		}
	}
	if sp.sla && len(a.levels) > 0 {
		x0, x1 := float64(a.levels[0]), float64(a.levels[len(a.levels)-1])
		if x0 == x1 {
			x0, x1 = x0-1, x1+1
		}
		add := func(d float64, label string, dashes []vg.Length, c color.Color) error {
			l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: d}, {X: x1, Y: d}})
			if err != nil {
				return err
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			l.Dashes = dashes
			p.Add(l)
			p.Legend.Add(label, l)
			ymax = math.Max(ymax, d)
			return nil
		}
		if err := add(ms(a.s.SLA), "SLA "+fmtDur(a.s.SLA), []vg.Length{vg.Points(6), vg.Points(3)}, color.Gray{Y: 40}); err != nil {
			return nil, err
		}
		if a.fallback != nil {
			if err := add(ms(a.s.FallbackSLA), "fallback SLA "+fmtDur(a.s.FallbackSLA), []vg.Length{vg.Points(2), vg.Points(2)}, color.Gray{Y: 110}); err != nil {
				return nil, err
			}
		}
	}
	p.Y.Min = 0
	if sp.yMax > 0 {
		p.Y.Max = sp.yMax // room for the legend above 100%
	} else if ymax > 0 {
		p.Y.Max = ymax * 1.15 // room for the legend
	} else {
		p.Y.Max = 1
	}
	return p, nil
}
