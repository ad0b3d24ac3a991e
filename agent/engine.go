package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/shard"
)

// engineRun is one stage's load engine.
type engineRun struct {
	stage    int
	e        *load.Engine
	ix       *shard.Indexer
	tix      *trackingIndexer
	tr       *tracker
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run returned
	started  bool
	finished bool
	epoch    uint64
	close    func() error // the target's, after Run returned
	err      error        // Run's, set before done is closed
}

// reshard applies a's members, restarts and take-overs to the indexer.
func (er *engineRun) reshard(a Assignment) {
	er.ix.SetMembers(a.Members)
	er.ix.Restart(a.Restart)
	for _, t := range a.TakeOver {
		er.ix.TakeOver(t.Index, t.From)
	}
}

// revivable reports whether er ran out of conversations in a stage that
// has not been drained: a new assignment of that stage may hand it more
// (a lost agent's), which a new engine on the same shard cursor runs.
func (er *engineRun) revivable(stage int) bool {
	return er.stage == stage && er.started && er.finished && er.cancel != nil
}

// assign applies an assignment: a new stage (or a stopped engine) builds
// a new engine in the background; otherwise the running one is resharded.
func (l *loop) assign(ctx context.Context, a Assignment) {
	l.asg = &a
	if l.a.onAssign != nil {
		l.a.onAssign(a)
	}
	if l.eng != nil && l.eng.stage == a.Stage && !l.eng.finished && (l.eng.cancel != nil || !l.eng.started) {
		l.eng.reshard(a)
		if err := l.eng.e.SetConcurrency(a.Concurrency); err != nil && !errors.Is(err, load.ErrOpenLoop) {
			l.logger.Warn("set concurrency", "error", err)
		}
		l.eng.epoch = a.Epoch
		l.logger.Debug("resharded", "epoch", a.Epoch, "concurrency", a.Concurrency, "members", len(a.Members), "restart", len(a.Restart))
		if l.link != nil {
			l.link.send(ready{Epoch: a.Epoch})
		}
		return
	}
	if l.building {
		return // onBuilt picks up l.asg
	}
	l.startBuild(ctx, a)
}

func (l *loop) startBuild(ctx context.Context, a Assignment) {
	if l.eng != nil && !l.eng.finished && l.eng.cancel != nil {
		// A new stage while the old one runs: stop it first.
		l.eng.cancel()
		l.eng.cancel = nil
	}
	var prev *engineRun
	if l.eng != nil && l.eng.revivable(a.Stage) {
		prev = l.eng
	}
	l.building = true
	l.nbg++
	go func() {
		eng, err := l.a.newEngine(ctx, a, prev)
		l.built <- built{asg: a, eng: eng, prev: prev, err: err}
	}()
}

func (l *loop) onBuilt(ctx context.Context, b built) {
	l.nbg--
	if b.err != nil {
		l.tell(Problem{Step: StepBuild, Stage: b.asg.Stage, Epoch: b.asg.Epoch, Class: classOf(b.err),
			Message: redact(b.err.Error(), b.asg.Spec, ""), Fatal: true})
		return
	}
	if l.eng != nil && l.eng.started && !l.eng.finished {
		// Wait for the old stage's engine: its windows must finish first.
		if l.eng.cancel != nil {
			l.eng.cancel()
			l.eng.cancel = nil
		}
		<-l.eng.done
		l.eng.finished = true
		l.flush()
	}
	l.eng = b.eng
	if l.asg != nil && l.asg.Epoch > b.asg.Epoch && l.asg.Stage == b.asg.Stage {
		// Assignments arrived while building: apply the latest.
		l.eng.reshard(*l.asg)
		_ = l.eng.e.SetConcurrency(l.asg.Concurrency)
		b.asg = *l.asg
	}
	l.eng.epoch = b.asg.Epoch
	l.logger.Info("stage ready", "stage", b.asg.Stage, "concurrency", b.asg.Concurrency, "index", b.asg.Index, "members", len(b.asg.Members))
	if err := load.CheckFileLimit(b.asg.Concurrency); err != nil {
		// A warning, not a failure: the sessions that get a descriptor
		// run, and the coordinator says why the others fail.
		l.logger.Warn("open-file limit too low for this agent's sessions", "error", err)
		l.tell(Problem{Step: StepBuild, Stage: b.asg.Stage, Epoch: b.asg.Epoch, Class: ClassEngine, Message: err.Error()})
	}
	if l.link != nil {
		l.link.send(ready{Epoch: b.asg.Epoch})
	}
	if b.prev != nil && b.prev.revivable(b.asg.Stage) {
		// The stage runs on and its window is open: go on in it at once.
		l.logger.Debug("continuing the stage's shard", "stage", b.asg.Stage, "window", b.prev.e.Window())
		l.start(ctx, l.eng, b.prev.e.Window(), time.Now(), time.Now())
	}
}

// newEngine builds, configures and warms a stage's engine. It runs on a
// background goroutine and touches no loop state.
// A prev engine of the same stage that ran out of conversations lends its
// shard indexer (cursor, restarts) and tracker, so the new engine goes on
// where it stopped instead of running the shard again.
func (a *Agent) newEngine(ctx context.Context, asg Assignment, prev *engineRun) (*engineRun, error) {
	t, err := a.build(ctx, asg.Spec)
	if err != nil {
		return nil, fmt.Errorf("build target: %w", err)
	}
	cfg := load.Config{
		Concurrency: asg.Concurrency, MaxTokens: asg.Spec.Workload.MaxTokens,
		SessionHeader: asg.Spec.Workload.SessionHeader, Seed: asg.Spec.Workload.Seed,
	}
	if asg.Rate > 0 {
		// Open loop: the level caps the conversations in flight, and this
		// agent's share of it caps its own, so the fleet never exceeds it.
		cfg.Concurrency, cfg.RequestRate, cfg.MaxConcurrency = 0, asg.Rate, asg.Concurrency
	}
	var ix *shard.Indexer
	var tr *tracker
	if prev != nil {
		ix, tr = prev.ix, prev.tr
		(&engineRun{ix: ix}).reshard(asg)
	} else {
		ix = shard.NewIndexer(asg.Index, asg.Members, asg.Limit)
		ix.Restart(asg.Restart)
		tr = newTracker(4*max(asg.Concurrency, 1) + 16)
	}
	tix := &trackingIndexer{ix: ix, src: t.Source, tr: tr}
	opts := append([]load.Option{
		load.WithIndexer(tix),
		load.WithObserver(observer(tr, a.observe)),
		load.WithDrainTimeout(a.cfg.DrainTimeout),
	}, t.Options...)
	e, err := load.New(cfg, t.Source, t.Streamer, a.rec, a.logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("new load engine: %w", err)
	}
	// Goodput: the recorder counts the requests that meet the spec's
	// objectives (or none, when it has none).
	if asg.Spec.SLO.IsZero() {
		a.rec.SetGood(nil)
	} else {
		a.rec.SetGood(asg.Spec.SLO.Good)
	}
	if w, ok := t.Streamer.(Warmer); ok {
		wctx, cancel := context.WithTimeout(ctx, DefaultWarmTimeout)
		err := w.Warm(wctx, max(asg.Concurrency, 1))
		cancel()
		if err != nil {
			a.logger.Warn("warm connection pool", "error", err)
		}
	}
	return &engineRun{stage: asg.Stage, e: e, ix: ix, tix: tix, tr: tr, done: make(chan struct{}), close: t.Close}, nil
}

// applyPhases applies every phase whose start has come and returns how
// long until the next one (0 for none). ctx is the loop's.
func (l *loop) applyPhases(ctx context.Context, now time.Time) time.Duration {
	var next time.Duration
	rest := l.phases[:0]
	for _, p := range l.phases {
		if d := p.StartAt.Sub(now); d > 0 || l.eng == nil || (p.Kind != KindDrain && l.eng.finished) {
			if d > 0 && (next == 0 || d < next) {
				next = d
			}
			if p.Kind == KindDrain && l.eng == nil {
				continue // nothing to drain
			}
			rest = append(rest, p)
			continue
		}
		l.applyPhase(ctx, p, now)
	}
	l.phases = rest
	return next
}

func (l *loop) applyPhase(ctx context.Context, p phase, now time.Time) {
	eng := l.eng
	switch p.Kind {
	case KindDrain:
		if eng.started && eng.cancel != nil {
			l.logger.Debug("draining", "window", p.Window)
			eng.cancel()
			eng.cancel = nil
		} else if !eng.started {
			eng.finished = true
			close(eng.done)
		}
	default:
		eng.e.SetWindow(p.Window)
		if eng.started {
			return
		}
		l.start(ctx, eng, p.Window, p.StartAt, now)
	}
}

// start runs eng's load in window from now; startAt is when the
// coordinator asked for it.
func (l *loop) start(ctx context.Context, eng *engineRun, window uint32, startAt, now time.Time) {
	eng.e.SetWindow(window)
	// The engine keeps the loop's values but not its cancellation: the
	// loop ends it with eng.cancel (a drain, a stop or shutdown) so its
	// turns finish and are reported.
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	eng.cancel, eng.started = cancel, true
	go func() {
		defer close(eng.done)
		if err := eng.e.Run(ectx); err != nil && ectx.Err() == nil {
			l.logger.Error("load engine", "error", err)
			eng.err = err
		}
		if eng.close != nil {
			if err := eng.close(); err != nil {
				l.logger.Warn("close target", "error", err)
			}
		}
	}()
	offset := now.Sub(startAt)
	l.logger.Debug("load started", "window", window, "offset", offset)
	if l.link != nil {
		l.link.send(started{Window: window, Offset: offset})
	}
}
