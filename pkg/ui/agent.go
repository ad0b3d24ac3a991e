package ui

import (
	"time"

	"github.com/fleetbench/fleetbench/internal/cpu"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// Health is an agent's health as its heartbeat tells it.
type Health struct {
	// At is when the agent read it, by the agent's clock; zero: when the
	// feed received it. The cores used are over two readings' At.
	At time.Time
	// CPU is the agent process's CPU time so far, user and system; CPUOK
	// is false when it was not read.
	CPU   time.Duration
	CPUOK bool
	// Streams is the requests the agent is streaming, Sessions the
	// conversations it runs.
	Streams  int64
	Sessions int64
}

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

	// From heartbeats: the last one's time and health, and the cores used
	// between the last two readings of the agent's CPU time.
	beatAt   time.Time
	health   Health
	cpuAt    time.Time
	cpuUsed  time.Duration
	cores    float64
	hasCores bool
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

// heartbeat records the health h an agent's heartbeat told at now: its
// streams and sessions, and its cores used since its previous reading of
// CPU time (none after a reading that went backwards: a new process).
func (a *agent) heartbeat(h Health, now time.Time) {
	a.beatAt, a.health = now, h
	if !h.CPUOK {
		return
	}
	at := h.At
	if at.IsZero() {
		at = now
	}
	a.cores, a.hasCores = cpu.Cores(a.cpuAt, a.cpuUsed, at, h.CPU)
	a.cpuAt, a.cpuUsed = at, h.CPU
}

func (a *agent) view(now time.Time) Agent {
	v := Agent{ID: a.id, LagP95: a.lagP95, LagMax: a.lagMax, Coverage: a.coverage, Lost: a.lost}
	if !a.beatAt.IsZero() {
		streams, sessions := a.health.Streams, a.health.Sessions
		v.Streams, v.Sessions = &streams, &sessions
		v.LastHeartbeat = now.Sub(a.beatAt).Seconds()
		if a.hasCores {
			cores := a.cores
			v.CPU = &cores
		}
	}
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
