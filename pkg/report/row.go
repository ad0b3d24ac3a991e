package report

import (
	"math"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// Row is one TSV row: the figures of one (run, mode, level). Latencies are
// in seconds, rates per second of the measurement window, hit rates 0..1
// fractions (token-weighted), ErrorPct in percent of requests sent. A Row
// is a plain value.
type Row struct {
	Mode        string
	Concurrency int
	// RPS is the open-loop target rate, 0 for a closed loop.
	RPS              float64
	TTFTP50, TTFTP95 float64
	HitRate          float64
	ErrorPct         float64
	// ActualRPS is completed requests per second; TOPS output tokens per
	// second (equal to OutputTPS, kept for the dashboards' column).
	ActualRPS                float64
	TOPS                     float64
	MeasureStart, MeasureEnd time.Time

	// The columns after the 11 the dashboards read. A TSV without them
	// leaves them zero (Run 0 is numbered by the reader).
	Run                        int
	TTFTP99, TTFTMean          float64
	TPOTP50, TPOTP95, TPOTP99  float64
	ITLP50, ITLP95, ITLP99     float64
	E2EP50, E2EP95, E2EP99     float64
	InputTPS, OutputTPS        float64
	Requests, Errors           int64
	Turn1HitRate, LaterHitRate float64
	Coverage                   float64
	Degraded                   bool
	StartSkewMS                float64
	// Goodput is the requests per second that met every goodput objective
	// (vLLM's request_goodput) and SLOAttainment their share of the
	// requests sent (0–1); nil when goodput was not measured (no SLO, or a
	// TSV without the columns): an empty cell, never 0.
	Goodput, SLOAttainment *float64
	// The server's own figures over the measured time (pkg/servermetrics), nil
	// when not measured (not scraped, no such metric, no TSV column): an
	// empty cell, never 0. ServerHitRate and SpecAcceptRate are 0–1
	// fractions, KVUsageMax too; WorkerSkew is max ÷ mean requests per
	// worker.
	ServerHitRate, QueueMean, QueueMax, KVUsageMax, Preemptions, WorkerSkew, SpecAcceptRate *float64

	// absent marks the columns a TSV lacked or left empty (by index in
	// columns): figures not measured, which read as zero fields.
	absent colSet
}

// colSet is a set of column indices.
type colSet uint64

// Measured reports whether the figure of the TSV column name was measured:
// false when the row was read from a TSV that lacked the column or left
// it empty. Every column of a row computed from a window is measured
// (optional figures are nil pointers instead).
func (r *Row) Measured(name string) bool {
	i, ok := columnIndex[name]
	return !ok || r.absent&(1<<i) == 0
}

// RowOf computes p's row from its Window (or returns a copy of p.Row, with
// p's run, mode and level, when p has no Window). Rates are divided by
// MeasureEnd−MeasureStart, or by the window's first-send to last-end span
// when those are unset.
func RowOf(p *Point) Row {
	if p.Window == nil {
		if p.Row == nil {
			return Row{Mode: p.Mode, Concurrency: p.Level, Run: p.Run}
		}
		// The point is authoritative for its identity (Load renumbers runs).
		r := *p.Row
		r.Run, r.Mode, r.Concurrency = p.Run, p.Mode, p.Level
		return r
	}
	w := p.Window
	r := Row{
		Mode:         p.Mode,
		Concurrency:  p.Level,
		RPS:          p.RPS,
		MeasureStart: p.MeasureStart.UTC(),
		MeasureEnd:   p.MeasureEnd.UTC(),
		Run:          p.Run,
		Requests:     w.Counters.Requests,
		Errors:       w.Counters.Failed,
		HitRate:      w.HitRate(),
		Coverage:     p.Coverage,
		Degraded:     p.Degraded,
		StartSkewMS:  float64(p.StartSkew) / float64(time.Millisecond),
	}
	if sent := r.Requests + r.Errors; sent > 0 {
		r.ErrorPct = 100 * float64(r.Errors) / float64(sent)
	}
	if secs := windowSeconds(p); secs > 0 {
		r.ActualRPS = float64(w.Counters.Requests) / secs
		r.OutputTPS = float64(w.Counters.OutputTokens) / secs
		r.InputTPS = float64(w.Counters.InputTokens) / secs
		r.TOPS = r.OutputTPS
	}
	ttft := w.Summary(record.TTFT)
	r.TTFTP50, r.TTFTP95, r.TTFTP99, r.TTFTMean = sec(ttft.P50), sec(ttft.P95), sec(ttft.P99), sec(ttft.Mean)
	tpot := w.Summary(record.TPOT)
	r.TPOTP50, r.TPOTP95, r.TPOTP99 = sec(tpot.P50), sec(tpot.P95), sec(tpot.P99)
	itl := w.Summary(record.ITL)
	r.ITLP50, r.ITLP95, r.ITLP99 = sec(itl.P50), sec(itl.P95), sec(itl.P99)
	e2e := w.Summary(record.E2E)
	r.E2EP50, r.E2EP95, r.E2EP99 = sec(e2e.P50), sec(e2e.P95), sec(e2e.P99)
	r.Turn1HitRate, r.LaterHitRate = turnHitRates(w)
	setServer(&r, p.Server)
	if b := servermetrics.ClientBalance(w.Workers); b.RequestSkew != nil {
		// The responses named their workers: exact per request, where
		// the server's counters give it per endpoint.
		r.WorkerSkew = b.RequestSkew
	}
	if p.SLO != "" {
		good := float64(w.Counters.Good)
		if secs := windowSeconds(p); secs > 0 {
			r.Goodput = &[]float64{good / secs}[0]
		}
		if sent := w.Counters.Requests + w.Counters.Failed; sent > 0 {
			r.SLOAttainment = &[]float64{good / float64(sent)}[0]
		}
	}
	return r
}

// setServer copies the server-side figures of w into r; nothing when w is
// nil (not scraped).
func setServer(r *Row, w *servermetrics.Window) {
	if w == nil {
		return
	}
	t := w.Total
	r.ServerHitRate, r.QueueMean, r.QueueMax, r.KVUsageMax = t.HitRate, t.QueueMean, t.QueueMax, t.KVUsageMax
	r.Preemptions, r.SpecAcceptRate, r.WorkerSkew = t.Preemptions, t.SpecAcceptRate, w.WorkerSkew()
}

// windowSeconds is the length of p's measurement window in seconds.
func windowSeconds(p *Point) float64 {
	d := p.MeasureEnd.Sub(p.MeasureStart)
	if d <= 0 && p.Window != nil {
		d = p.Window.LastEnd.Sub(p.Window.FirstSend)
	}
	return d.Seconds()
}

// turnHitRates returns the token-weighted hit rate of turn 1 and of every
// later turn.
func turnHitRates(w *record.Window) (first, later float64) {
	var lp, lc int64
	for i, t := range w.Turns {
		if t == nil {
			continue
		}
		if i == 1 {
			first = t.HitRate()
			continue
		}
		lp += t.PromptTokens
		lc += t.CachedTokens
	}
	if lp > 0 {
		later = float64(lc) / float64(lp)
	}
	return first, later
}

func sec(d time.Duration) float64 { return d.Seconds() }

// secDur converts seconds to a Duration, rounded to the nanosecond.
func secDur(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
