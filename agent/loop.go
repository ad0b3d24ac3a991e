package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/internal/cpu"
)

// built is the result of building an engine in the background; prev is
// the finished engine of the same stage it continues, if any.
type built struct {
	asg  Assignment
	eng  *engineRun
	prev *engineRun
	err  error
}

// loop is the agent's state, owned by one goroutine.
type loop struct {
	a      *Agent
	logger hclog.Logger

	link       *link
	pending    []pending
	seq        uint64
	lastWM     *watermark
	lastHeard  time.Time
	heartbeat  time.Duration
	asg        *Assignment
	eng        *engineRun
	building   bool
	built      chan built
	phases     []phase // due phases waiting for the engine or their time
	stopReason string
	nbg        int
	checks     chan []Problem // the join check's result
	checked    bool           // the join check has been started
	fatal      *Problem       // the fatal problem told to the coordinator
	silentStop *silentStop    // the load this agent stopped for the coordinator's silence
}

// silentStop is a stage's load stopped because the coordinator fell
// silent.
type silentStop struct {
	stage int
	epoch uint64
	at    time.Time
}

// heardAfterSilence tells a coordinator that comes back after this agent
// stopped its load for its silence: a fatal problem, so that it accounts
// the sessions that did not run as lost (coverage, degraded window) and
// moves them to the agents that kept running, instead of measuring a level
// that was not there.
func (l *loop) heardAfterSilence() {
	st := l.silentStop
	if st == nil || l.link == nil {
		return
	}
	l.silentStop = nil
	l.tell(Problem{Step: StepRun, Stage: st.stage, Epoch: st.epoch, Class: ClassEngine, Fatal: true,
		Message: fmt.Sprintf("stopped its load %s ago after %s without word from the coordinator",
			time.Since(st.at).Round(time.Second), l.a.cfg.CoordinatorTimeout)})
}

func newLoop(a *Agent) *loop {
	return &loop{a: a, logger: a.logger, heartbeat: DefaultHeartbeatInterval, built: make(chan built, 1), checks: make(chan []Problem, 1)}
}

// errStop ends the loop after the coordinator said stop.
var errStop = errors.New("stopped by coordinator")

func (l *loop) run(ctx context.Context, links <-chan *link, fatal <-chan error) error {
	report := time.NewTicker(l.a.cfg.ReportInterval)
	defer report.Stop()
	beat := time.NewTimer(jitter(l.heartbeat, rand.Float64()))
	defer beat.Stop()
	phaseTimer := time.NewTimer(time.Hour)
	defer phaseTimer.Stop()
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	lastWatch := time.Now()
	defer l.shutdown()

	for {
		var in <-chan any
		var linkDone <-chan struct{}
		if l.link != nil {
			in, linkDone = l.link.in, l.link.done
		}
		var engDone <-chan struct{}
		if l.eng != nil && !l.eng.finished && l.eng.started {
			engDone = l.eng.done
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-fatal:
			return err
		case lk := <-links:
			l.connected(ctx, lk)
		case ps := <-l.checks:
			l.nbg--
			for _, p := range ps {
				l.tell(p)
			}
			if l.fatal == nil && l.link != nil {
				l.link.send(ready{Epoch: 0}) // checked: it can run
			}
		case <-linkDone:
			l.logger.Warn("connection to coordinator lost")
			l.link = nil
			l.a.metrics.connected.Set(0)
		case m := <-in:
			l.lastHeard = time.Now()
			l.heardAfterSilence()
			if err := l.handle(ctx, m); err != nil {
				if errors.Is(err, errStop) {
					return nil
				}
				return err
			}
		case b := <-l.built:
			l.building = false
			l.onBuilt(ctx, b)
		case <-engDone:
			l.eng.finished = true
			l.logger.Debug("load stopped", "stage", l.eng.stage)
			l.flush()
			if err := l.eng.err; err != nil && l.asg != nil {
				l.tell(Problem{Step: StepRun, Stage: l.eng.stage, Epoch: l.eng.epoch, Class: classOf(err),
					Message: redact(err.Error(), l.asg.Spec, ""), Fatal: true})
			}
		case <-report.C:
			l.flush()
		case <-beat.C:
			beat.Reset(jitter(l.heartbeat, rand.Float64()))
			if l.link != nil {
				var hb heartbeatOut
				if l.eng != nil && !l.eng.finished {
					hb.Next, hb.Active = l.eng.tix.snapshot()
					st := l.eng.e.Stats()
					hb.Streams, hb.Sessions = st.InFlight, st.Sessions
				}
				hb.At = time.Now()
				hb.CPU, hb.CPUOK = cpu.Process()
				l.link.send(hb)
			}
		case <-phaseTimer.C:
		case <-watch.C:
			now := time.Now()
			if gap := now.Sub(lastWatch); gap > l.a.cfg.CoordinatorTimeout/2 {
				// This process was paused; it could not hear anyone.
				l.lastHeard = l.lastHeard.Add(gap)
			}
			lastWatch = now
			if len(in) > 0 {
				break // messages are waiting: the coordinator is not silent
			}
			if l.eng != nil && l.eng.started && !l.eng.finished && l.eng.cancel != nil &&
				coordinatorLost(l.lastHeard, time.Now(), l.a.cfg.CoordinatorTimeout) {
				l.logger.Warn("coordinator silent, stopping load", "timeout", l.a.cfg.CoordinatorTimeout)
				l.eng.cancel()
				l.eng.cancel = nil
				l.silentStop = &silentStop{stage: l.eng.stage, epoch: l.eng.epoch, at: time.Now()}
			}
		}
		if d := l.applyPhases(ctx, time.Now()); d > 0 {
			phaseTimer.Reset(d)
		}
	}
}

// connected adopts a new link: drop what the coordinator has applied,
// resend the rest in order, then the latest watermark.
func (l *loop) connected(ctx context.Context, lk *link) {
	if l.link != nil {
		l.link.kill()
	}
	l.link = lk
	l.a.metrics.connected.Set(1)
	l.lastHeard = time.Now()
	if lk.welcome.Heartbeat > 0 {
		l.heartbeat = lk.welcome.Heartbeat
	}
	l.ack(lk.welcome.Acked)
	l.logger.Info("connected to coordinator", "index", lk.welcome.Index, "acked_seq", lk.welcome.Acked, "resending", len(l.pending))
	for _, p := range l.pending {
		lk.send(report{Seq: p.seq, Window: p.w})
		l.a.metrics.reports.Inc()
	}
	if l.lastWM != nil {
		lk.send(*l.lastWM)
	}
	if l.fatal != nil {
		lk.send(*l.fatal) // the coordinator may not have heard it
	}
	switch spec := lk.welcome.Spec; {
	case spec != nil && l.a.check != nil && !l.checked:
		l.checked = true
		l.nbg++
		go func() { l.checks <- l.a.check(ctx, *spec) }()
	case l.fatal == nil && (l.checked || l.a.check == nil):
		lk.send(ready{Epoch: 0}) // nothing (more) to check: it can run
	}
}

// tell sends p to the coordinator (and keeps a fatal one to resend after
// a reconnect and to return from Run).
func (l *loop) tell(p Problem) {
	if p.Fatal {
		l.logger.Error("cannot run", "step", p.Step, "class", p.Class, "error", p.Message)
		l.fatal = &p
	} else {
		l.logger.Warn("problem", "step", p.Step, "class", p.Class, "message", p.Message)
	}
	if l.link != nil {
		l.link.send(p)
	}
}

func (l *loop) ack(seq uint64) {
	n := 0
	for n < len(l.pending) && l.pending[n].seq <= seq {
		n++
	}
	l.pending = l.pending[n:]
	l.a.metrics.pending.Set(float64(len(l.pending)))
	if l.a.onAck != nil {
		l.a.onAck(seq)
	}
}

func (l *loop) handle(ctx context.Context, m any) error {
	switch m := m.(type) {
	case heartbeatIn:
	case ack:
		l.ack(m.Seq)
	case Assignment:
		l.assign(ctx, m)
	case phase:
		l.phases = append(l.phases, m)
	case stop:
		l.stopReason = m.Reason
		l.logger.Info("coordinator said stop", "reason", m.Reason)
		if l.fatal != nil {
			return fmt.Errorf("%w: %s: %s", ErrCannotRun, l.fatal.Class, l.fatal.Message)
		}
		return errStop
	case welcome:
		// Only the first message of a stream; handled by connected.
	}
	return nil
}
