package ui

import (
	"sort"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// Spans of the live figures.
const (
	// RollingSpan is the span of the rolling figures (the reference demo's
	// last minute).
	RollingSpan = 60 * time.Second
	// History is how far back the charts' series go, one point a second.
	History = 120 * time.Second
	// PointSpan is the span each chart point covers (the point's second
	// and the ones before it), so a point is not one second's noise.
	PointSpan = 10 * time.Second
	// maxWindows bounds the measurement windows kept for the page.
	maxWindows = 12
	// maxErrors bounds the latest distinct error messages kept.
	maxErrors = 8
)

// The latency metrics the page shows, in this order in every array.
var shown = [...]record.Metric{record.TTFT, record.TPOT, record.ITL, record.E2E}

const nShown = len(shown)

// tally is the counters of some seconds of turns.
type tally struct {
	ok, failed, in, out, cached int64
}

func (t *tally) add(c *record.Counters) {
	t.ok += c.Requests
	t.failed += c.Failed
	t.in += c.InputTokens
	t.out += c.OutputTokens
	t.cached += c.CachedTokens
}

func (t *tally) sum(o tally) {
	t.ok += o.ok
	t.failed += o.failed
	t.in += o.in
	t.out += o.out
	t.cached += o.cached
}

// second is one closed second of the feed: its counters and the non-empty
// buckets of its latency histograms (a few hundred at most, where a full
// histogram holds 170 KB), and its chart point once computed.
type second struct {
	sec              int64 // Unix second; 0 when unused
	tally            tally
	buckets          [nShown][]hdr.Bucket
	inFlight, target int
	point            *Point
}

// Feed is the live view of a run, fed the same calls as its Prometheus
// load metrics (it is a loadmetrics.Sink: the coordinator's loop, or a single
// engine's meter, hands it every merged report or drained interval), so
// its figures come from the same HDR histograms as the results, merged,
// never averaged. It keeps the last seconds compactly, the measurement
// windows, the latest distinct errors and each agent's health, and
// computes a Snapshot on demand. Its methods are safe for concurrent use
// and return quickly; it starts no goroutine.
type Feed struct {
	mu  sync.Mutex
	cfg hdr.Config
	now func() time.Time

	// first is the feed's first second with data or a stage (0: none);
	// cur the second being filled; ring the closed ones by sec % len.
	first    int64
	curSec   int64
	curTally tally
	cur      [nShown]*hdr.Histogram
	ring     []second
	scratch  [nShown]*hdr.Histogram

	running            bool
	labels             loadmetrics.Labels
	target, inFlight   int
	windows            []*window // oldest first; the last may be open
	errs               []ErrorLine
	agents             map[string]*agent
	sweep              func(time.Time) *Sweep
	serverHitRate      *float64
	serverHitRateLabel string
}

// NewFeed returns an empty feed.
func NewFeed() *Feed {
	f := &Feed{cfg: hdr.Default, now: time.Now, agents: map[string]*agent{}}
	f.ring = make([]second, int((History+PointSpan+RollingSpan)/time.Second)+2)
	for i := range f.cur {
		f.cur[i] = f.cfg.New()
		f.scratch[i] = f.cfg.New()
	}
	return f
}

var _ loadmetrics.Sink = (*Feed)(nil)

// Touch is part of loadmetrics.Sink; the feed needs nothing before data.
func (f *Feed) Touch(loadmetrics.Labels) {}

// Add adds a window's data (an agent's report, or a recorder's interval)
// received now, under lb: to the current second, and for the measure
// phase to the stage's measurement window.
func (f *Feed) Add(w *record.Window, lb loadmetrics.Labels) {
	if w == nil {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roll(now.Unix())
	f.started(now.Unix())
	f.curTally.add(&w.Counters)
	for i, m := range shown {
		if h := w.Hist[m]; h != nil && h.Count() > 0 {
			// One geometry everywhere (hdr.Default): only an overflow
			// could drop values, and the live view can bear it.
			_ = f.cur[i].Merge(h)
		}
	}
	for _, e := range w.TopErrors(0) {
		f.noteError(e, now)
	}
	if lb.Phase == loadmetrics.PhaseMeasure {
		f.measureWindow(lb, now).add(w)
	}
}

// SetStage records the level being run and its phase.
func (f *Feed) SetStage(lb loadmetrics.Labels, target int) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started(now.Unix())
	f.running, f.labels, f.target = true, lb, target
	if lb.Phase == loadmetrics.PhaseMeasure {
		f.measureWindow(lb, now)
	}
}

// SetTarget records a live change of the sessions asked for.
func (f *Feed) SetTarget(target int) {
	f.mu.Lock()
	f.target = target
	f.mu.Unlock()
}

// ClearStage records that no level runs: the stage's measurement window
// is closed.
func (f *Feed) ClearStage() {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running, f.target = false, 0
	if n := len(f.windows); n > 0 && !f.windows[n-1].closed {
		f.windows[n-1].close(now)
	}
}

// SetInFlight records the sessions running.
func (f *Feed) SetInFlight(n int) {
	f.mu.Lock()
	f.inFlight = n
	f.mu.Unlock()
}

// SetSweep makes the snapshots carry the sweep's progress, read from fn
// at each snapshot (fn must be safe to call from any goroutine).
func (f *Feed) SetSweep(fn func(now time.Time) *Sweep) {
	f.mu.Lock()
	f.sweep = fn
	f.mu.Unlock()
}

// SetServerHitRate records the serving stack's own prefix-cache hit rate
// (0..1) over the measurement named label, read with --scrape.
func (f *Feed) SetServerHitRate(label string, rate float64) {
	f.mu.Lock()
	f.serverHitRate, f.serverHitRateLabel = &rate, label
	f.mu.Unlock()
}

// measureWindow returns the measurement window of lb, starting one when
// the last is closed or of another level; f.mu is held.
func (f *Feed) measureWindow(lb loadmetrics.Labels, now time.Time) *window {
	if n := len(f.windows); n > 0 {
		last := f.windows[n-1]
		if last.mode == lb.Mode && last.level == lb.Level && (!last.closed || !f.running) {
			// A late report after the close still belongs to it.
			return last
		}
		if !last.closed {
			last.close(now)
		}
		// Only the newest windows keep histograms.
		last.drop()
	}
	w := newWindow(f.cfg, lb, now)
	f.windows = append(f.windows, w)
	if len(f.windows) > maxWindows {
		f.windows = f.windows[1:]
	}
	return w
}

// started notes the feed's first second; f.mu is held.
func (f *Feed) started(sec int64) {
	if f.first == 0 {
		f.first = sec
	}
}

// roll closes the current second when sec is a later one; f.mu is held.
func (f *Feed) roll(sec int64) {
	if f.curSec == sec {
		return
	}
	if f.curSec != 0 && f.curSec < sec {
		s := f.slot(f.curSec)
		s.tally = f.curTally
		s.inFlight, s.target = f.inFlight, f.target
		for i, h := range f.cur {
			if h.Count() == 0 {
				continue
			}
			h.Buckets(func(b hdr.Bucket) { s.buckets[i] = append(s.buckets[i], b) })
			h.Reset()
		}
	}
	f.curSec, f.curTally = sec, tally{}
}

// slot returns the ring slot of Unix second sec, emptied if it held
// another second; f.mu is held.
func (f *Feed) slot(sec int64) *second {
	s := &f.ring[int(sec%int64(len(f.ring)))]
	if s.sec != sec {
		b := s.buckets
		*s = second{sec: sec}
		for i := range b {
			s.buckets[i] = b[i][:0]
		}
		s.inFlight, s.target = f.inFlight, f.target
	}
	return s
}

// aggregate merges the closed seconds from..to (Unix seconds, inclusive)
// into f.scratch and returns their tally; f.mu is held.
func (f *Feed) aggregate(from, to int64) tally {
	var t tally
	for i := range f.scratch {
		f.scratch[i].Reset()
	}
	for sec := from; sec <= to; sec++ {
		s := &f.ring[int(sec%int64(len(f.ring)))]
		if s.sec != sec {
			continue
		}
		t.sum(s.tally)
		for i, bs := range s.buckets {
			for _, b := range bs {
				// The bucket's lowest value lands on its own index.
				_ = f.scratch[i].RecordValues(b.Lowest, b.Count)
			}
		}
	}
	return t
}

// noteError keeps e among the latest distinct errors; f.mu is held.
func (f *Feed) noteError(e record.ErrorStat, now time.Time) {
	msg := e.Example
	if msg == "" {
		msg = e.Message
	}
	for i := range f.errs {
		if f.errs[i].Class == string(e.Class) && f.errs[i].key == e.Message {
			l := f.errs[i]
			l.Count += e.Count
			l.Last, l.Message = now.UnixMilli(), msg
			copy(f.errs[1:i+1], f.errs[:i])
			f.errs[0] = l
			return
		}
	}
	l := ErrorLine{Class: string(e.Class), Message: msg, Count: e.Count, Last: now.UnixMilli(), key: e.Message}
	f.errs = append([]ErrorLine{l}, f.errs...)
	if len(f.errs) > maxErrors {
		f.errs = f.errs[:maxErrors]
	}
}

// AgentReport records an interval report of agent id (the coordinator's
// OnReport): its requests and failures, and its schedule lag, received
// now.
func (f *Feed) AgentReport(id string, w *record.Window) {
	if w == nil {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agent(id).report(w, now)
}

// AgentHealth records the health h that agent id's heartbeat told (the
// coordinator's OnHealth), received now.
func (f *Feed) AgentHealth(id string, h Health) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agent(id).heartbeat(h, now)
}

// agent returns agent id's health, created on first use; f.mu is held.
func (f *Feed) agent(id string) *agent {
	a := f.agents[id]
	if a == nil {
		a = &agent{id: id}
		f.agents[id] = a
	}
	return a
}

// AgentCoverage records what agent id contributed to a closed window:
// the share of the window it ran load (0..1) and whether it was lost.
func (f *Feed) AgentCoverage(id string, coverage float64, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agent(id)
	a.coverage, a.lost = &coverage, lost
}

// Snapshot returns the figures at now: the rolling minute, the chart
// series, the measurement windows, the stage, the errors, the agents and
// the sweep's progress.
func (f *Feed) Snapshot(now time.Time) *Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	sec := now.Unix()
	f.roll(sec)
	last := sec - 1 // the last closed second
	s := &Snapshot{
		Time: now.UnixMilli(),
		Stage: Stage{Running: f.running, Mode: f.labels.Mode, Level: f.labels.Level, Phase: f.phase(),
			Target: f.target, InFlight: f.inFlight},
	}
	// Over the last minute, or since the first second when the feed is
	// younger: rates are per second of data, not of an empty past.
	from := last - int64(RollingSpan/time.Second) + 1
	if f.first != 0 {
		from = max(from, f.first)
	}
	t := f.aggregate(from, last)
	s.Rolling = figures(t, f.scratch, float64(max(last-from+1, 0)))
	s.Rolling.Label = "last minute"
	hfrom := last - int64(History/time.Second) + 1
	if f.first == 0 {
		hfrom = last + 1
	}
	for at := max(hfrom, f.first); at <= last; at++ {
		if p := f.point(at); p != nil {
			s.Series = append(s.Series, *p)
		}
	}
	for _, w := range f.windows {
		s.Windows = append(s.Windows, w.figures(now))
	}
	s.Errors = append([]ErrorLine(nil), f.errs...)
	ids := make([]string, 0, len(f.agents))
	for id := range f.agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.Agents = append(s.Agents, f.agents[id].view(now))
	}
	if f.serverHitRate != nil {
		s.ServerHitRate = &ServerHitRate{Rate: *f.serverHitRate, Label: f.serverHitRateLabel}
	}
	if f.sweep != nil {
		s.Sweep = f.sweep(now)
	}
	return s
}

// phase is the stage's phase for the page; f.mu is held.
func (f *Feed) phase() string {
	if !f.running {
		return "idle"
	}
	if f.labels.Phase == loadmetrics.PhaseWarmup {
		return "warm-up"
	}
	return f.labels.Phase
}

// point returns the chart point of closed second at, computed once; nil
// before the feed's first data; f.mu is held.
func (f *Feed) point(at int64) *Point {
	s := &f.ring[int(at%int64(len(f.ring)))]
	if s.sec == at && s.point != nil {
		return s.point
	}
	from := max(at-int64(PointSpan/time.Second)+1, f.first)
	t := f.aggregate(from, at)
	fig := figures(t, f.scratch, float64(at-from+1))
	p := &Point{T: at, RPS: fig.RPS, OutputTPS: fig.OutputTPS, ErrorRate: fig.ErrorRate,
		TTFT: fig.TTFT, TPOT: fig.TPOT, ITL: fig.ITL, E2E: fig.E2E}
	s = f.slot(at)
	p.InFlight, p.Target = s.inFlight, s.target
	s.point = p
	return p
}

// figures are the figures of t and the histograms hs over secs seconds.
func figures(t tally, hs [nShown]*hdr.Histogram, secs float64) Figures {
	fig := Figures{Seconds: secs, Requests: t.ok, Errors: t.failed}
	if n := t.ok + t.failed; n > 0 {
		fig.ErrorRate = float64(t.failed) / float64(n)
	}
	if secs > 0 {
		fig.RPS = float64(t.ok) / secs
		fig.OutputTPS = float64(t.out) / secs
		fig.InputTPS = float64(t.in) / secs
	}
	if t.in > 0 {
		r := float64(t.cached) / float64(t.in)
		fig.HitRate = &r
	}
	q := func(h *hdr.Histogram) Quantiles {
		if h.Count() == 0 {
			return Quantiles{}
		}
		return Quantiles{P50: ms(h.Percentile(50)), P95: ms(h.Percentile(95)), P99: ms(h.Percentile(99))}
	}
	fig.TTFT, fig.TPOT, fig.ITL, fig.E2E = q(hs[0]), q(hs[1]), q(hs[2]), q(hs[3])
	return fig
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sweeping reports whether the feed shows a sweep (the slider is then
// read-only).
func (f *Feed) sweeping() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sweep != nil
}
