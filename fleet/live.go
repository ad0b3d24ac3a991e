package fleet

import (
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
	"github.com/fleetbench/fleetbench/pkg/ui"
)

// Live is the live dashboard a run feeds (pkg/ui). Feed takes every call
// the Prometheus load metrics take (the coordinator's merged reports, or
// a single engine's drained intervals) and the agents' reports; Control,
// when set, is handed what changes the running level once it exists, and
// nil when the level can no longer change.
type Live struct {
	Feed    *ui.Feed
	Control func(ui.Controller)
}

// wire adds the live view to a coordinator's configuration and options:
// its load, the agents' reports, heartbeats and coverage in closed
// windows.
func (l *Live) wire(cc *coordinator.Config, opts []coordinator.Option) []coordinator.Option {
	if l == nil || l.Feed == nil {
		return opts
	}
	feed := l.Feed
	onReport, onClosed := cc.OnReport, cc.OnWindowClosed
	cc.OnReport = func(id string, window uint32, w *record.Window) {
		if onReport != nil {
			onReport(id, window, w)
		}
		feed.AgentReport(id, w)
	}
	onHealth := cc.OnHealth
	cc.OnHealth = func(id string, h coordinator.AgentHealth) {
		if onHealth != nil {
			onHealth(id, h)
		}
		feed.AgentHealth(id, ui.Health{At: h.At, CPU: h.CPU, CPUOK: h.CPUOK, Streams: h.Streams, Sessions: h.Sessions})
	}
	cc.OnWindowClosed = func(w *coordinator.WindowResult) {
		if onClosed != nil {
			onClosed(w)
		}
		if w.Kind != coordinator.KindMeasure {
			return
		}
		for _, cv := range w.Coverage {
			share := 0.0
			if t := cv.Seconds + cv.LostSeconds; t > 0 {
				share = cv.Seconds / t
			}
			feed.AgentCoverage(cv.Agent, share, cv.Lost)
		}
	}
	return append(opts, coordinator.WithLive(feed))
}

// Labels of the server-side KV hit rate on the page: the serving stack's
// own prefix-cache hit rate (--scrape), over the measured window being
// run so far, or over the last measured window read whole. Each is
// followed by the window's length so far.
const (
	ServerHitRateSoFar = "server, measured window so far"
	ServerHitRateLabel = "server, last measured window"
)

// serverSoFar shows the server-side KV hit rate of w, the measured window
// being run, so far. Safe on a nil Live.
func (l *Live) serverSoFar(w *servermetrics.Window) { l.serverHitRate(ServerHitRateSoFar, w) }

// serverWindow shows the server-side KV hit rate of w, a measured
// window's server metrics read whole. Safe on a nil Live.
func (l *Live) serverWindow(w *servermetrics.Window) { l.serverHitRate(ServerHitRateLabel, w) }

// serverHitRate shows w's server-side hit rate under label; a window
// without one (no such metric, no traffic yet) leaves the last shown.
func (l *Live) serverHitRate(label string, w *servermetrics.Window) {
	if l == nil || l.Feed == nil || w == nil || w.Total.HitRate == nil {
		return
	}
	if d := w.End.Sub(w.Start); d > 0 {
		unit := time.Second
		if d < 10*time.Second {
			unit = 100 * time.Millisecond
		}
		label = fmt.Sprintf("%s, %s", label, d.Round(unit))
	}
	l.Feed.SetServerHitRate(label, *w.Total.HitRate)
}

// setTarget shows a live change of the sessions asked for. Safe on a nil
// Live.
func (l *Live) setTarget(n int) {
	if l != nil && l.Feed != nil {
		l.Feed.SetTarget(n)
	}
}

// attach hands c to Control; the returned func takes it back.
func (l *Live) attach(c ui.Controller) (detach func()) {
	if l == nil || l.Control == nil {
		return func() {}
	}
	l.Control(c)
	return func() { l.Control(nil) }
}

// sweepView is the dashboard's view of a sweep's status at now, with the
// terminal's status line.
func sweepView(s runner.Status, now time.Time, line string) *ui.Sweep {
	st := s.Step
	elapsed := max(now.Sub(s.Started), 0)
	v := &ui.Sweep{Mode: st.Mode, Level: st.Level, Run: st.Run, Done: s.Done, Total: s.Total, Line: line}
	var left time.Duration
	switch st.Kind {
	case sweep.StepSwitch:
		v.Phase = "switch"
		if st.Run == 0 {
			v.Phase = "restore"
		}
		left = max(st.Duration-elapsed, 0)
	case sweep.StepGate:
		v.Phase = "readiness"
	case sweep.StepPrime:
		v.Phase = "prime"
	case sweep.StepWarmup, sweep.StepMeasure:
		left = max(s.Warmup+s.Measure-elapsed, 0)
		switch {
		case elapsed < s.Warmup:
			v.Phase = "warm-up"
		case elapsed >= s.Warmup+s.Measure:
			v.Phase = "drain"
		default:
			v.Phase = "measure"
		}
	case sweep.StepCooldown:
		v.Phase = "cooldown"
		left = max(st.Duration-elapsed, 0)
	case runner.StepDone:
		v.Phase = "done"
	}
	v.StepLeft, v.SweepLeft = left.Seconds(), (left + s.After).Seconds()
	return v
}
