package coordinator

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// run is the state of one run, owned by Run's goroutine.
type run struct {
	cfg     Config
	logger  hclog.Logger
	metrics *metrics

	agents  map[string]*member // by agent id, lost ones included
	byIndex map[int]*member    // live members by index
	epoch   uint64

	state    runState
	deadline time.Time // of the current wait (join, ready)
	stage    int
	level    int
	st       *stageRun
	nextID   uint32
	windows  []*window // every window of the run, by id order
	byID     map[uint32]*window
	out      *writer
	err      error
	finished []*StageResult
	stopSent bool
	lastStep time.Time
	// lastReady is the count last passed to OnAgents (-1: none yet).
	lastReady int

	// Between stages (stIdle): the stage to start next, the end of the
	// cooldown, and the BeforeStage hook's progress.
	next        int
	idleUntil   time.Time
	hookDue     bool // Run must start BeforeStage(next)
	hookRunning bool
}

type runState int

const (
	stWaiting   runState = iota // for cfg.Agents to join
	stAssigning                 // assignments sent, waiting for Ready
	stRunning                   // windows open on schedule
	stDraining                  // drain sent, waiting for windows to close
	stIdle                      // between stages: cooldown, then BeforeStage
	stDone
)

func newRun(cfg Config, logger hclog.Logger, now time.Time) *run {
	r := &run{
		cfg:       cfg,
		logger:    logger,
		agents:    make(map[string]*member),
		byIndex:   make(map[int]*member),
		byID:      make(map[uint32]*window),
		deadline:  now.Add(cfg.JoinTimeout),
		nextID:    1,
		lastReady: -1,
	}
	if cfg.OutDir != "" {
		r.out = &writer{dir: cfg.OutDir, logger: logger}
	}
	return r
}

func (r *run) handle(e event, now time.Time) {
	switch e := e.(type) {
	case joinEvent:
		e.reply <- r.join(e.hello, e.conn, now)
	case msgEvent:
		r.message(e.conn, e.msg, now)
	case leaveEvent:
		m := r.agents[e.conn.agentID]
		if m != nil && m.conn == e.conn {
			m.conn = nil
			if !m.lost && r.state != stDone {
				m.logger.Warn("agent disconnected", "error", e.err)
			}
		}
		e.conn.close()
	case lostEvent:
		if m := r.agents[e.id]; m != nil && !m.lost {
			r.lose(m, now, e.reason)
		}
	case concurrencyEvent:
		if r.st == nil || r.state != stRunning {
			r.logger.Warn("concurrency change ignored: no stage is running", "level", e.level)
			return
		}
		r.logger.Info("changing concurrency", "from", r.level, "to", e.level)
		r.level = e.level
		r.metrics.load.SetTarget(e.level)
		r.reshard(nil, now)
	}
}

// step advances the run to now; it reports true when Run should return.
func (r *run) step(now time.Time) bool {
	r.excuseStall(now)
	// Loss detection: silence past the heartbeat timeout.
	for _, m := range r.agents {
		if !m.lost && now.Sub(m.lastSeen) > r.cfg.HeartbeatTimeout {
			r.lose(m, now, "heartbeat timeout")
		}
	}
	// A running BeforeStage is not interrupted here: its result ends the
	// run (beforeStageDone).
	if r.err != nil && r.state != stDone && r.state != stDraining && (r.state != stIdle || !r.hookRunning) {
		r.drain(now)
	}
	switch r.state {
	case stWaiting:
		// An agent counts once it has checked its environment against
		// the spec, so nothing is assigned to one that cannot run.
		failed, checked := len(r.failedAgents()), 0
		for _, m := range r.byIndex {
			if m.checked {
				checked++
			}
		}
		if checked >= r.cfg.Agents {
			r.idle(0, now)
		} else if failed > 0 && checked == len(r.byIndex) && checked+failed >= r.cfg.Agents {
			// Every expected agent has answered; the failed ones will not
			// run (checkFailed ended the run if none is left).
			r.logger.Warn("starting without the agents that failed", "agents", len(r.byIndex), "failed", failed, "expected", r.cfg.Agents)
			r.idle(0, now)
		} else if now.After(r.deadline) {
			r.err = fmt.Errorf("wait for agents: %d of %d joined in %v", len(r.byIndex), r.cfg.Agents, r.cfg.JoinTimeout)
			r.finish("no agents")
			return true
		}
	case stAssigning:
		ready := len(r.byIndex) > 0
		for _, m := range r.byIndex {
			if m.readyEpoch < r.epoch && m.conn != nil {
				ready = false
			}
		}
		if ready || now.After(r.deadline) {
			if !ready {
				r.logger.Warn("starting without every agent ready", "timeout", r.cfg.ReadyTimeout)
			}
			r.schedule(now)
		}
	case stRunning:
		r.advance(now)
	case stDraining:
		if r.closeWindows(now) {
			r.endStage(now)
		}
	case stIdle:
		if !r.hookRunning && !now.Before(r.idleUntil) {
			if r.cfg.BeforeStage == nil {
				r.beforeStageDone(nil, now)
			} else {
				r.hookDue, r.hookRunning = true, true
				r.logger.Debug("before stage", "stage", r.next)
			}
		}
	case stDone:
		return true
	}
	if r.state == stRunning {
		r.closeWindows(now)
	}
	r.metrics.publish(r.windows, now, false)
	r.noteAgents()
	return r.state == stDone
}

// inFlight is the sessions the agents said they run in their last
// heartbeats, while a stage runs.
func (r *run) inFlight() int {
	if r.state != stRunning && r.state != stDraining {
		return 0
	}
	n := 0
	for _, m := range r.byIndex {
		n += len(m.active)
	}
	return n
}

// noteAgents tells OnAgents how many agents are ready, when that changed.
func (r *run) noteAgents() {
	if r.cfg.OnAgents == nil {
		return
	}
	ready := 0
	for _, m := range r.byIndex {
		if m.checked {
			ready++
		}
	}
	if ready != r.lastReady {
		r.lastReady = ready
		r.cfg.OnAgents(ready, r.cfg.Agents)
	}
}

func (r *run) errReason() string {
	if r.err != nil {
		return r.err.Error()
	}
	return "done"
}

// finish tells every agent to stop.
func (r *run) finish(reason string) {
	if !r.stopSent {
		r.stopSent = true
		for _, m := range r.agents {
			if m.conn != nil {
				m.conn.send(stop{Reason: reason})
			}
		}
	}
	r.state = stDone
}

// abort ends the run on cancellation, closing what can be closed: the
// stage it cuts short goes into the result marked Interrupted.
func (r *run) abort(reason string, now time.Time) {
	if r.st != nil && (r.state == stAssigning || r.state == stRunning || r.state == stDraining) {
		for _, w := range r.windows {
			if !w.closed && w.stage == r.st.idx {
				w.close("cancelled", now)
				r.metrics.windowClosed(w)
				if r.cfg.OnWindowClosed != nil {
					r.cfg.OnWindowClosed(w.result())
				}
			}
		}
		r.closeStage(true)
		r.logger.Info("stage interrupted", "stage", r.st.idx, "requests", r.st.res.Measured.Counters.Requests)
	}
	r.finish(reason)
}

// result builds the Result from the run state.
func (r *run) result() *Result {
	res := &Result{Stages: r.finished, Agents: r.statuses()}
	for _, w := range r.windows {
		res.Windows = append(res.Windows, w.result())
	}
	return res
}
