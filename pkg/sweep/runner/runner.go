package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// DefaultRestoreTimeout bounds putting the stack back in its original mode
// after the sweep, which also runs after an interrupt.
const DefaultRestoreTimeout = 2 * time.Minute

// Level is one level to measure: its point and its timings.
type Level struct {
	Key sweep.Key
	// RequestRate, when positive, makes the level an open loop (Key.Level
	// then caps concurrent conversations).
	RequestRate float64
	Warmup      time.Duration
	Measure     time.Duration
	// ModeWarmup runs ModeWarmupLevel, unmeasured, before Warmup (the
	// first level of a mode block; Spec.ModeWarmup).
	ModeWarmup      time.Duration
	ModeWarmupLevel int
	// Snapshots is the number of equal measured windows Measure is cut
	// into; the level's measurement is their merge.
	Snapshots int
}

// Measurement is what a Measurer measured at one level.
type Measurement struct {
	// Window merges the level's measured windows across agents (never an
	// average of their percentiles).
	Window *record.Window
	// Snapshots are the measured windows, in time order.
	Snapshots []*record.Window
	// Start and End bound the measured time.
	Start, End time.Time
	// Coverage, Degraded, StartSkew and Agents are as in report.Point.
	Coverage  float64
	Degraded  bool
	StartSkew time.Duration
	Agents    int
	// AgentNotes says, one line each, which agents failed, were lost or
	// warned during the level (report.Point.AgentNotes).
	AgentNotes []string
	// Server is what the serving stack's own /metrics said over the
	// measured time (report.Point.Server); nil when not scraped.
	Server *servermetrics.Window
}

// Measurer runs load at one level: a warm-up, then the measured time. It
// returns ctx's error (and no measurement) when ctx ends first.
type Measurer interface {
	Measure(ctx context.Context, l Level) (*Measurement, error)
}

// MeasurerFunc adapts a function to Measurer.
type MeasurerFunc func(ctx context.Context, l Level) (*Measurement, error)

// Measure calls f.
func (f MeasurerFunc) Measure(ctx context.Context, l Level) (*Measurement, error) { return f(ctx, l) }

var _ Measurer = MeasurerFunc(nil)

// Fleet runs a sweep's levels in order on one set of agents that stays
// connected between them (no conversation carries over from one level to
// the next). Before level i starts, it calls Hooks.Before(ctx, i) and waits
// for it with no load running; once level i is measured it calls
// Hooks.Done(i, m) before the next Before. The calls are made one at a time
// (from any goroutine); an error of either ends Run with that error. A
// level cut short by ctx is not passed to Done. Run returns ctx's error
// when ctx ends first.
type Fleet interface {
	Run(ctx context.Context, levels []Level, h Hooks) error
}

// Hooks are the runner's steps between a Fleet's levels.
type Hooks struct {
	Before func(ctx context.Context, i int) error
	Done   func(i int, m *Measurement) error
}

// PerLevel adapts a Measurer to a Fleet: Before, Measure and Done for each
// level in turn.
type PerLevel struct{ Measurer Measurer }

var _ Fleet = PerLevel{}

// Run measures levels one by one.
func (p PerLevel) Run(ctx context.Context, levels []Level, h Hooks) error {
	for i, lv := range levels {
		if err := h.Before(ctx, i); err != nil {
			return err
		}
		m, err := p.Measurer.Measure(ctx, lv)
		if err != nil {
			return err
		}
		if err := h.Done(i, m); err != nil {
			return err
		}
	}
	return nil
}

// Gate is the readiness gate after a switch; *ready.Gate implements it.
type Gate interface {
	Ready(ctx context.Context) (*ready.Report, error)
	Prime(ctx context.Context, rep *ready.Report) error
}

var _ Gate = (*ready.Gate)(nil)

// Adder records finished points; *report.Writer implements it.
type Adder interface {
	Add(p *report.Point) (report.Row, error)
}

var _ Adder = (*report.Writer)(nil)

// Status is what the runner is doing, reported to Config.OnStatus at the
// start of every step. A level is one status (Kind StepWarmup, or
// StepMeasure without a warm-up) that covers its warm-up and measurement;
// its cooldown is another. Restoring the original mode is a StepSwitch
// with Run 0.
type Status struct {
	// Step is the plan's step; for a level, Step.Duration is warm-up plus
	// measurement.
	Step sweep.Step
	// Warmup and Measure are the level's timings (levels only).
	Warmup, Measure time.Duration
	// Started is when the step began.
	Started time.Time
	// After is the planned time of the steps after this one (switches
	// counted at the spec's estimate).
	After time.Duration
	// Done and Total count the points measured (this sweep and before a
	// resume) and planned.
	Done, Total int
}

// Config configures a Runner. Spec and Plan are read-only.
type Config struct {
	Spec *sweep.Spec
	Plan *sweep.Plan
	// Switchers has the switch of every mode (Spec.Switchers).
	Switchers map[string]sweep.Switcher
	// Gate is the readiness gate; nil skips readiness (Spec.Readiness.Skip).
	Gate Gate
	// Fleet runs the levels; when nil, Measurer runs each level in turn
	// (PerLevel).
	Fleet    Fleet
	Measurer Measurer
	// Output records each point as its level ends.
	Output Adder
	// Restore switches the stack back to the mode it was in before the
	// sweep (read with sweep.Current) once the sweep ends.
	Restore bool
	// Preflight, when set, is called once, after the plan's first switch
	// and gate and before its first prime or level: it checks the target
	// that switch brought up (ready.Preflight). Its error ends the run.
	Preflight func(ctx context.Context) error
	// OnStatus, when set, is called at every step, one call at a time
	// (from Run's goroutine or the Fleet's).
	OnStatus func(Status)
	// Logger may be nil.
	Logger hclog.Logger
	// Now and Sleep default to the real clock; tests replace them.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Result is what Run did. The caller owns it.
type Result struct {
	// Points are the points measured by this Run, in plan order.
	Points []report.Point
	// Switches is the number of mode switches made for the plan (not
	// counting the restore).
	Switches int
	// Readiness has one report per gate passed, in order.
	Readiness []*ready.Report
	// Original is the mode read before the first switch ("" when the
	// switch cannot read it); Restored reports that it was switched back.
	Original string
	Restored bool
}

// Runner executes one plan. Create it with New and call Run once.
type Runner struct {
	cfg Config
	log hclog.Logger
}

// New checks cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	var errs []error
	if cfg.Spec == nil || cfg.Plan == nil {
		errs = append(errs, errors.New("spec and plan are required"))
	}
	if cfg.Fleet == nil && cfg.Measurer == nil {
		errs = append(errs, errors.New("a fleet or a measurer is required"))
	}
	if cfg.Output == nil {
		errs = append(errs, errors.New("output is required"))
	}
	if cfg.Plan != nil {
		for _, st := range cfg.Plan.Steps {
			if st.Kind == sweep.StepSwitch && cfg.Switchers[st.Mode] == nil {
				errs = append(errs, fmt.Errorf("mode %q has no switcher", st.Mode))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new sweep runner: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Fleet == nil {
		cfg.Fleet = PerLevel{Measurer: cfg.Measurer}
	}
	return &Runner{cfg: cfg, log: cfg.Logger.Named("sweep")}, nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run executes the plan's steps in order. Each level's point goes to
// Output as soon as the level is measured; a level cut short by ctx is not
// written. After the last step, or on an error or interrupt, it restores
// the original mode when Config.Restore is set and the sweep switched away
// from it. It returns what it did with the first error.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	res := &Result{}
	steps := r.cfg.Plan.Steps
	if len(steps) == 0 {
		r.log.Info("nothing to run: every point is done")
		return res, nil
	}
	if r.cfg.Restore {
		res.Original = r.readCurrent(ctx, steps[0].Mode)
	}
	err := r.run(ctx, res)
	if r.cfg.Restore && res.Original != "" && res.Switches > 0 {
		if rerr := r.restore(ctx, res); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	if err == nil {
		r.notify(Status{Step: sweep.Step{Kind: StepDone}, Started: r.cfg.Now(), Done: r.cfg.Plan.Done + len(res.Points), Total: r.cfg.Plan.Total})
	}
	return res, err
}

// segment is one level of the plan and the steps before it (switch, gate,
// prime, the previous level's cooldown).
type segment struct {
	pre   []int // step indices
	level Level
	first int // index of the level's first step (warm-up or measure)
	last  int // index of its measure step
}

// segments cuts steps into levels; tail is the steps after the last level.
func (r *Runner) segments(steps []sweep.Step) (segs []segment, tail []int, err error) {
	var pre []int
	for i := 0; i < len(steps); i++ {
		st := steps[i]
		if st.Kind != sweep.StepWarmup && st.Kind != sweep.StepMeasure {
			pre = append(pre, i)
			continue
		}
		// A level is its warm-up step (if any) and its measure step.
		sg := segment{pre: pre, first: i, level: Level{Key: st.Key(), RequestRate: r.cfg.Spec.RequestRate}}
		pre = nil
		if st.Kind == sweep.StepWarmup {
			sg.level.Warmup = st.Duration - st.ModeWarmup
			sg.level.ModeWarmup, sg.level.ModeWarmupLevel = st.ModeWarmup, st.ModeWarmupLevel
			i++
			if i >= len(steps) || steps[i].Kind != sweep.StepMeasure || steps[i].Key() != st.Key() {
				return nil, nil, fmt.Errorf("plan: warm-up of %s is not followed by its measurement", st.Key())
			}
		}
		sg.last = i
		sg.level.Measure, sg.level.Snapshots = steps[i].Duration, max(steps[i].Snapshots, 1)
		segs = append(segs, sg)
	}
	return segs, pre, nil
}

// run hands the plan's levels to the Fleet and runs the other steps from
// its hooks, between levels.
func (r *Runner) run(ctx context.Context, res *Result) error {
	steps := r.cfg.Plan.Steps
	segs, tail, err := r.segments(steps)
	if err != nil {
		return err
	}
	done := r.cfg.Plan.Done
	var rep *ready.Report
	// The first error of a hook, returned as it is (the Fleet may wrap it).
	var hookErr error
	fail := func(err error) error {
		if hookErr == nil {
			hookErr = err
		}
		return err
	}
	levels := make([]Level, len(segs))
	for i, sg := range segs {
		levels[i] = sg.level
	}
	// The preflight runs once, where the target the first switch started
	// is gated and about to take its first request.
	preflight := r.cfg.Preflight
	checkTarget := func(ctx context.Context) error {
		if preflight == nil {
			return nil
		}
		check := preflight
		preflight = nil
		if err := check(ctx); err != nil {
			return fmt.Errorf("preflight after the first switch: %w", err)
		}
		return nil
	}
	hooks := Hooks{
		Before: func(ctx context.Context, i int) error {
			sg := segs[i]
			for _, j := range sg.pre {
				if steps[j].Kind == sweep.StepPrime {
					if err := checkTarget(ctx); err != nil {
						return fail(err)
					}
				}
				if err := r.step(ctx, res, j, &rep, done); err != nil {
					return fail(err)
				}
			}
			if err := checkTarget(ctx); err != nil {
				return fail(err)
			}
			lv := sg.level
			st := steps[sg.first]
			st.Duration = lv.ModeWarmup + lv.Warmup + lv.Measure
			r.notify(Status{Step: st, Warmup: lv.ModeWarmup + lv.Warmup, Measure: lv.Measure, Started: r.cfg.Now(),
				After: after(steps, sg.last+1), Done: done, Total: r.cfg.Plan.Total})
			k := lv.Key
			if lv.ModeWarmup > 0 {
				r.log.Info("level starting", "run", k.Run, "mode", k.Mode, "level", k.Level,
					"mode_warmup", lv.ModeWarmup, "mode_warmup_level", lv.ModeWarmupLevel, "warmup", lv.Warmup, "measure", lv.Measure)
			} else {
				r.log.Info("level starting", "run", k.Run, "mode", k.Mode, "level", k.Level, "warmup", lv.Warmup, "measure", lv.Measure)
			}
			return nil
		},
		Done: func(i int, m *Measurement) error {
			p, err := r.level(ctx, segs[i].level, m)
			if err != nil {
				return fail(err)
			}
			res.Points = append(res.Points, *p)
			done++
			return nil
		},
	}
	if len(segs) > 0 {
		if err := r.cfg.Fleet.Run(ctx, levels, hooks); err != nil {
			if hookErr != nil {
				return hookErr
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("measure %s: %w", r.current(segs, len(res.Points)), err)
		}
	}
	for _, j := range tail {
		if err := r.step(ctx, res, j, &rep, done); err != nil {
			return err
		}
	}
	return nil
}

// current names the level being measured when Done had been called n
// times.
func (r *Runner) current(segs []segment, n int) sweep.Key {
	return segs[min(n, len(segs)-1)].level.Key
}

// step runs one step that is not a level: a switch, a gate, a prime or a
// cooldown. rep carries the last gate's report to its prime.
func (r *Runner) step(ctx context.Context, res *Result, i int, rep **ready.Report, done int) error {
	steps := r.cfg.Plan.Steps
	st := steps[i]
	status := Status{Step: st, Started: r.cfg.Now(), After: after(steps, i+1), Done: done, Total: r.cfg.Plan.Total}
	switch st.Kind {
	case sweep.StepSwitch:
		r.notify(status)
		if err := r.cfg.Switchers[st.Mode].Switch(ctx, st.Mode); err != nil {
			return fmt.Errorf("run %d: switch to %s: %w", st.Run, st.Mode, err)
		}
		res.Switches++
	case sweep.StepGate:
		if r.cfg.Gate == nil {
			return nil
		}
		r.notify(status)
		g, err := r.cfg.Gate.Ready(ctx)
		if err != nil {
			return fmt.Errorf("run %d mode %s: %w", st.Run, st.Mode, err)
		}
		*rep = g
		res.Readiness = append(res.Readiness, g)
	case sweep.StepPrime:
		if r.cfg.Gate == nil || *rep == nil {
			return nil
		}
		r.notify(status)
		if err := r.cfg.Gate.Prime(ctx, *rep); err != nil {
			return fmt.Errorf("run %d mode %s: prime: %w", st.Run, st.Mode, err)
		}
		r.log.Info("ready", "run", st.Run, "mode", st.Mode, "stages", (*rep).String())
	case sweep.StepCooldown:
		r.notify(status)
		if err := r.cfg.Sleep(ctx, st.Duration); err != nil {
			return err
		}
	}
	return nil
}

// StepDone is the Kind of the last Status, sent when every step is done
// (and the mode restored).
const StepDone sweep.StepKind = "done"

// level records the point of one measured level.
func (r *Runner) level(ctx context.Context, lv Level, m *Measurement) (*report.Point, error) {
	k := lv.Key
	if ctx.Err() != nil {
		// A measurement that raced the interrupt may be cut short: the
		// resumed sweep measures this level again.
		return nil, ctx.Err()
	}
	if m == nil || m.Window == nil {
		return nil, fmt.Errorf("measure %s: no measurement", k)
	}
	p := &report.Point{
		Run: k.Run, Mode: k.Mode, Level: k.Level, RPS: lv.RequestRate,
		Window: m.Window, Snapshots: m.Snapshots, MeasureStart: m.Start, MeasureEnd: m.End,
		Coverage: m.Coverage, Degraded: m.Degraded, StartSkew: m.StartSkew, Agents: m.Agents,
		AgentNotes: m.AgentNotes, SLO: r.cfg.Spec.SLO().String(), Server: m.Server,
	}
	row, err := r.cfg.Output.Add(p)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", k, err)
	}
	r.log.Info("level done", "run", k.Run, "mode", k.Mode, "level", k.Level, "requests", row.Requests,
		"errors", row.Errors, "ttft_p95", secDur(row.TTFTP95), "kv_hit_rate", fmt.Sprintf("%.3f", row.HitRate),
		"degraded", row.Degraded)
	return p, nil
}

func secDur(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Microsecond)
}

// after sums the planned durations of steps[from:].
func after(steps []sweep.Step, from int) time.Duration {
	var d time.Duration
	for _, st := range steps[min(from, len(steps)):] {
		d += st.Duration
	}
	return d
}

func (r *Runner) notify(s Status) {
	if r.cfg.OnStatus != nil {
		r.cfg.OnStatus(s)
	}
}

// readCurrent reads the stack's mode before the sweep with the switch of
// the first mode to run; "" when it cannot be read.
func (r *Runner) readCurrent(ctx context.Context, mode string) string {
	cur, err := sweep.Current(ctx, r.cfg.Switchers[mode])
	switch {
	case errors.Is(err, sweep.ErrNoCurrent):
		r.log.Info("the switch cannot read the current mode; it will not be restored after the sweep")
		return ""
	case err != nil:
		r.log.Warn("read the current mode; it will not be restored after the sweep", "error", err)
		return ""
	}
	r.log.Info("mode before the sweep", "mode", cur)
	return cur
}

// restore switches back to res.Original, with the switch of that mode when
// it is one of the sweep's, else the first mode's. It runs after an
// interrupt too, on a context of its own.
func (r *Runner) restore(ctx context.Context, res *Result) error {
	sw := r.cfg.Switchers[res.Original]
	if sw == nil {
		sw = r.cfg.Switchers[r.cfg.Plan.Steps[0].Mode]
	}
	if last := r.lastSwitched(res); last == res.Original {
		r.log.Info("the stack is already in its original mode", "mode", last)
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultRestoreTimeout)
	defer cancel()
	r.notify(Status{Step: sweep.Step{Kind: sweep.StepSwitch, Mode: res.Original}, Started: r.cfg.Now()})
	if err := sw.Switch(rctx, res.Original); err != nil {
		return fmt.Errorf("restore mode %s: %w", res.Original, err)
	}
	res.Restored = true
	r.log.Info("original mode restored", "mode", res.Original)
	return nil
}

// lastSwitched is the mode of the last switch made.
func (r *Runner) lastSwitched(res *Result) string {
	n := 0
	for _, st := range r.cfg.Plan.Steps {
		if st.Kind == sweep.StepSwitch {
			n++
			if n == res.Switches {
				return st.Mode
			}
		}
	}
	return ""
}
