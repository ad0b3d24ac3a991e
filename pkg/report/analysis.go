package report

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// cell is everything known of one (mode, level): its runs and the figures
// across runs.
type cell struct {
	mode  string
	level int
	// runs are the per-run rows, by run.
	runs []Row
	// pooled are the figures across runs: from the merged windows when every
	// run has one (fromHist), else the mean of the runs' rows.
	pooled   Row
	fromHist bool
	// mergeErr is why windows could not be merged, when they could not.
	mergeErr error
}

// analysis is a sweep digested for the outputs.
type analysis struct {
	s     *Sweep
	cells map[cellKey]*cell
	// modes are the modes with data, in report order; levels every level
	// with data, ascending.
	modes  []string
	levels []int
	// primary is the SLA evaluation at s.SLA; fallback at s.FallbackSLA
	// when the fallback rule applies (fallbackWhy says why), else nil.
	primary     slaEval
	fallback    *slaEval
	fallbackWhy string
	// averaged reports that some cell's figures were averaged from rows,
	// not merged from histograms.
	averaged bool
}

// analyze digests s, which must be valid.
func analyze(s *Sweep) *analysis {
	s = s.withDefaults()
	a := &analysis{s: s, cells: make(map[cellKey]*cell)}
	windows := make(map[cellKey][]*Point)
	for i := range s.Points {
		p := &s.Points[i]
		k := cellKey{p.Mode, p.Level}
		c := a.cells[k]
		if c == nil {
			c = &cell{mode: p.Mode, level: p.Level}
			a.cells[k] = c
		}
		c.runs = append(c.runs, RowOf(p))
		windows[k] = append(windows[k], p)
	}
	for k, c := range a.cells {
		sort.Slice(c.runs, func(i, j int) bool { return c.runs[i].Run < c.runs[j].Run })
		c.pooled, c.fromHist, c.mergeErr = pool(windows[k], c.runs)
		poolServer(&c.pooled, c.runs)
		if !c.fromHist {
			a.averaged = true
		}
	}
	for _, m := range s.Modes {
		for _, l := range s.Levels {
			if a.cells[cellKey{m, l}] != nil {
				a.modes = append(a.modes, m)
				break
			}
		}
	}
	for _, l := range s.Levels {
		for _, m := range a.modes {
			if a.cells[cellKey{m, l}] != nil {
				a.levels = append(a.levels, l)
				break
			}
		}
	}
	a.primary = a.evaluate(s.SLA, func(c *cell) float64 { return c.pooled.TTFTP95 })
	a.fallbackWhy = a.fallbackReason()
	if a.fallbackWhy != "" {
		fb := a.evaluate(s.FallbackSLA, func(c *cell) float64 { return c.pooled.TTFTP95 })
		if sameBreakpoints(a.primary, fb) {
			// The same verdict again would be the same paragraph again.
			fb.Headline = fmt.Sprintf("The breakpoints there are the same as at %s: the fallback does not tell the modes apart either.", fmtDur(s.SLA))
		}
		a.fallback = &fb
	}
	return a
}

// pool returns the figures of one (mode, level) across runs: merged from
// the windows when every point has one, else the mean of rows.
func pool(ps []*Point, rows []Row) (Row, bool, error) {
	haveAll := len(ps) > 0
	for _, p := range ps {
		if p.Window == nil {
			haveAll = false
		}
	}
	if haveAll {
		r, err := mergeRow(ps)
		if err == nil {
			return r, true, nil
		}
		return meanRow(rows), false, err
	}
	return meanRow(rows), false, nil
}

// mergeRow merges the points' windows and computes the row of the whole:
// percentiles of the merged histograms, rates over the summed window
// lengths.
func mergeRow(ps []*Point) (Row, error) {
	merged := record.NewWindow(0, ps[0].Window.Config)
	var total time.Duration
	var cov float64
	start, end := ps[0].MeasureStart, ps[0].MeasureEnd
	var skew time.Duration
	degraded := false
	for _, p := range ps {
		if err := merged.Merge(p.Window); err != nil {
			return Row{}, fmt.Errorf("merge run %d mode %s level %d: %w", p.Run, p.Mode, p.Level, err)
		}
		total += time.Duration(windowSeconds(p) * float64(time.Second))
		cov += p.Coverage
		if p.MeasureStart.Before(start) {
			start = p.MeasureStart
		}
		if p.MeasureEnd.After(end) {
			end = p.MeasureEnd
		}
		skew = max(skew, p.StartSkew)
		degraded = degraded || p.Degraded
	}
	epoch := time.Unix(0, 0)
	r := RowOf(&Point{Mode: ps[0].Mode, Level: ps[0].Level, RPS: ps[0].RPS, Window: merged,
		MeasureStart: epoch, MeasureEnd: epoch.Add(total), SLO: commonSLO(ps)})
	r.MeasureStart, r.MeasureEnd = start.UTC(), end.UTC()
	r.Coverage = cov / float64(len(ps))
	r.Degraded = degraded
	r.StartSkewMS = float64(skew) / float64(time.Millisecond)
	r.Run = 0
	return r, nil
}

// floatFields lists the Row fields averaged across runs.
var floatFields = []func(*Row) *float64{
	func(r *Row) *float64 { return &r.RPS },
	func(r *Row) *float64 { return &r.TTFTP50 },
	func(r *Row) *float64 { return &r.TTFTP95 },
	func(r *Row) *float64 { return &r.HitRate },
	func(r *Row) *float64 { return &r.ErrorPct },
	func(r *Row) *float64 { return &r.ActualRPS },
	func(r *Row) *float64 { return &r.TOPS },
	func(r *Row) *float64 { return &r.TTFTP99 },
	func(r *Row) *float64 { return &r.TTFTMean },
	func(r *Row) *float64 { return &r.TPOTP50 },
	func(r *Row) *float64 { return &r.TPOTP95 },
	func(r *Row) *float64 { return &r.TPOTP99 },
	func(r *Row) *float64 { return &r.ITLP50 },
	func(r *Row) *float64 { return &r.ITLP95 },
	func(r *Row) *float64 { return &r.ITLP99 },
	func(r *Row) *float64 { return &r.E2EP50 },
	func(r *Row) *float64 { return &r.E2EP95 },
	func(r *Row) *float64 { return &r.E2EP99 },
	func(r *Row) *float64 { return &r.InputTPS },
	func(r *Row) *float64 { return &r.OutputTPS },
	func(r *Row) *float64 { return &r.Turn1HitRate },
	func(r *Row) *float64 { return &r.LaterHitRate },
	func(r *Row) *float64 { return &r.Coverage },
}

// meanRow averages rows field by field (counts are summed, the skew is the
// largest, degraded if any is). Percentiles averaged this way are not
// percentiles of the whole; the report says so.
// commonSLO is the points' goodput objectives when they all share them,
// else "" (goodput counted against different objectives does not pool).
func commonSLO(ps []*Point) string {
	for _, p := range ps[1:] {
		if p.SLO != ps[0].SLO {
			return ""
		}
	}
	return ps[0].SLO
}

// meanOpt is the mean of the set values, nil unless every row has one.
func meanOpt(rows []Row, f func(*Row) *float64) *float64 {
	var sum float64
	for i := range rows {
		v := f(&rows[i])
		if v == nil {
			return nil
		}
		sum += *v
	}
	m := sum / float64(len(rows))
	return &m
}

func meanRow(rows []Row) Row {
	if len(rows) == 0 {
		return Row{}
	}
	out := Row{Mode: rows[0].Mode, Concurrency: rows[0].Concurrency,
		MeasureStart: rows[0].MeasureStart, MeasureEnd: rows[0].MeasureEnd}
	n := float64(len(rows))
	for i := range rows {
		r := &rows[i]
		for _, f := range floatFields {
			*f(&out) += *f(r) / n
		}
		out.Requests += r.Requests
		out.Errors += r.Errors
		out.Degraded = out.Degraded || r.Degraded
		out.StartSkewMS = math.Max(out.StartSkewMS, r.StartSkewMS)
		if !r.MeasureStart.IsZero() && (out.MeasureStart.IsZero() || r.MeasureStart.Before(out.MeasureStart)) {
			out.MeasureStart = r.MeasureStart
		}
		if r.MeasureEnd.After(out.MeasureEnd) {
			out.MeasureEnd = r.MeasureEnd
		}
	}
	out.Goodput = meanOpt(rows, func(r *Row) *float64 { return r.Goodput })
	out.SLOAttainment = meanOpt(rows, func(r *Row) *float64 { return r.SLOAttainment })
	for i := range rows {
		// A figure some run did not measure is not measured across runs.
		out.absent |= rows[i].absent
	}
	return out
}

// poolServer sets the server-side figures of out, the figures of one
// (mode, level) across runs: the mean of the runs' values, the highest
// for the maxima; nil unless every run measured the figure.
func poolServer(out *Row, rows []Row) {
	if len(rows) == 0 {
		return
	}
	mean := func(f func(*Row) *float64) *float64 { return meanOpt(rows, f) }
	out.ServerHitRate = mean(func(r *Row) *float64 { return r.ServerHitRate })
	out.QueueMean = mean(func(r *Row) *float64 { return r.QueueMean })
	out.QueueMax = maxOpt(rows, func(r *Row) *float64 { return r.QueueMax })
	out.KVUsageMax = maxOpt(rows, func(r *Row) *float64 { return r.KVUsageMax })
	out.Preemptions = mean(func(r *Row) *float64 { return r.Preemptions })
	out.WorkerSkew = mean(func(r *Row) *float64 { return r.WorkerSkew })
	out.SpecAcceptRate = mean(func(r *Row) *float64 { return r.SpecAcceptRate })
}

// maxOpt is the highest of the set values, nil unless every row has one.
func maxOpt(rows []Row, f func(*Row) *float64) *float64 {
	var m *float64
	for i := range rows {
		v := f(&rows[i])
		if v == nil {
			return nil
		}
		if m == nil || *v > *m {
			m = v
		}
	}
	return m
}

// cell returns the cell of (mode, level), or nil.
func (a *analysis) cell(mode string, level int) *cell { return a.cells[cellKey{mode, level}] }

// runs returns the sorted distinct run numbers of the sweep.
func (a *analysis) runs() []int {
	seen := make(map[int]bool)
	var out []int
	for _, c := range a.cells {
		for _, r := range c.runs {
			if !seen[r.Run] {
				seen[r.Run] = true
				out = append(out, r.Run)
			}
		}
	}
	sort.Ints(out)
	return out
}

// spreadOf returns the spread of f over the runs of (mode, level).
func (a *analysis) spreadOf(mode string, level int, f func(*Row) float64) spread {
	c := a.cell(mode, level)
	if c == nil {
		return newSpread(nil)
	}
	vs := make([]float64, len(c.runs))
	for i := range c.runs {
		vs[i] = f(&c.runs[i])
	}
	return newSpread(vs)
}

// maxRuns is the largest number of runs of any cell.
func (a *analysis) maxRuns() int {
	n := 0
	for _, c := range a.cells {
		n = max(n, len(c.runs))
	}
	return n
}
