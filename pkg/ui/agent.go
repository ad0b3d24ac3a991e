package ui

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// agent is one agent's health as its reports show it.
type agent struct {
	id       string
	lastSeen time.Time
	// requests and failed per second of the last minute, by Unix second.
	secs     [61]agentSec
	lagP95   float64 // ms, of the last report with samples
	lagMax   float64
	coverage *float64
	lost     bool
}

type agentSec struct {
	sec          int64
	requests, ko int64
}

func (a *agent) report(w *record.Window, now time.Time) {
	a.lastSeen = now
	sec := now.Unix()
	s := &a.secs[int(sec%int64(len(a.secs)))]
	if s.sec != sec {
		*s = agentSec{sec: sec}
	}
	s.requests += w.Counters.Requests
	s.ko += w.Counters.Failed
	if h := w.Hist[record.Lag]; h != nil && h.Count() > 0 {
		a.lagP95, a.lagMax = ms(h.Percentile(95)), ms(h.Percentile(100))
	}
}

func (a *agent) view(now time.Time) Agent {
	v := Agent{ID: a.id, LagP95: a.lagP95, LagMax: a.lagMax, Coverage: a.coverage, Lost: a.lost}
	if !a.lastSeen.IsZero() {
		v.LastReport = now.Sub(a.lastSeen).Seconds()
	}
	from := now.Unix() - int64(RollingSpan/time.Second)
	var n int64
	for _, s := range a.secs {
		if s.sec > from && s.sec <= now.Unix() {
			n += s.requests + s.ko
		}
	}
	v.RPS = float64(n) / RollingSpan.Seconds()
	return v
}
