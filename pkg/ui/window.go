package ui

import (
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// window is one stage's measurement as the feed received it: every
// measure-phase report or interval of the stage merged, as the results
// merge them. Its figures are computed when asked and cached until more
// data comes. Only the newest window keeps its histograms (drop).
type window struct {
	mode          string
	level         int
	start, end    time.Time
	closed, dirty bool
	tally         tally
	hist          [nShown]*hdr.Histogram // nil once dropped
	fig           Figures
}

func newWindow(cfg hdr.Config, lb loadmetrics.Labels, now time.Time) *window {
	w := &window{mode: lb.Mode, level: lb.Level, start: now, dirty: true}
	for i := range w.hist {
		w.hist[i] = cfg.New()
	}
	return w
}

func (w *window) add(d *record.Window) {
	if w.hist[0] == nil {
		return
	}
	w.tally.add(&d.Counters)
	for i, m := range shown {
		if h := d.Hist[m]; h != nil && h.Count() > 0 {
			_ = w.hist[i].Merge(h)
		}
	}
	w.dirty = true
}

func (w *window) close(now time.Time) {
	w.closed, w.end, w.dirty = true, now, true
}

// drop computes the final figures and lets the histograms go.
func (w *window) drop() {
	if w.hist[0] == nil {
		return
	}
	end := w.end
	if !w.closed {
		end = time.Now()
	}
	w.figures(end)
	w.hist = [nShown]*hdr.Histogram{}
}

// figures returns the window's figures at now (its length so far while
// open).
func (w *window) figures(now time.Time) Figures {
	if !w.dirty && w.closed || w.hist[0] == nil {
		return w.fig
	}
	end := now
	if w.closed {
		end = w.end
	}
	secs := end.Sub(w.start).Seconds()
	if w.dirty {
		w.fig = figures(w.tally, w.hist, secs)
		w.dirty = false
	} else {
		// Only the rates move with time.
		f := figures(w.tally, [nShown]*hdr.Histogram{nilHist, nilHist, nilHist, nilHist}, secs)
		w.fig.Seconds, w.fig.RPS, w.fig.OutputTPS, w.fig.InputTPS = f.Seconds, f.RPS, f.OutputTPS, f.InputTPS
	}
	w.fig.Label = fmt.Sprintf("%s %d", w.mode, w.level)
	if w.mode == "" {
		w.fig.Label = fmt.Sprintf("level %d", w.level)
	}
	w.fig.Mode, w.fig.Level, w.fig.Closed = w.mode, w.level, w.closed
	return w.fig
}

// nilHist is an empty histogram for figures that need no quantiles.
var nilHist = hdr.Default.New()
