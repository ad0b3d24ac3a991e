package coordinator

import (
	"fmt"
	"slices"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// stageRun is the schedule of the running stage.
type stageRun struct {
	idx       int
	stage     Stage
	res       *StageResult
	start     time.Time
	ends      time.Time   // planned end of the measured time (grows on re-run)
	bounds    []time.Time // start of each planned window
	kinds     []Kind
	opened    int // windows opened so far
	phaseOut  int // phases sent so far
	drainAt   time.Time
	drained   bool
	reruns    int
	cur       *window
	judged    bool      // FailFast has looked at the stage
	nextJudge time.Time // when Config.Judge looks next
	// levelAt is the index of the window at whose phase the level changes
	// from the mode warm-up's to the stage's; 0: none.
	levelAt int
}

// idle leaves the agents idle until until, then runs BeforeStage(i) and
// starts stage i.
func (r *run) idle(i int, until time.Time) {
	r.state, r.next, r.idleUntil = stIdle, i, until
}

// beforeStageDone starts the next stage once BeforeStage(next) returned
// err (nil without a hook).
func (r *run) beforeStageDone(err error, now time.Time) {
	r.hookRunning = false
	if r.state != stIdle {
		return // the run ended meanwhile
	}
	switch {
	case err != nil:
		r.err = fmt.Errorf("before stage %d: %w", r.next, err)
	case len(r.byIndex) == 0:
		r.err = fmt.Errorf("start stage %d: every agent: %w", r.next, ErrAgentLost)
	default:
		r.startStage(r.next, now)
		return
	}
	r.finish(r.errReason())
}

// startStage sends the stage's assignments.
func (r *run) startStage(i int, now time.Time) {
	s := r.cfg.Stages[i]
	r.stage, r.level = i, s.Level
	if s.ModeWarmup > 0 && s.ModeWarmupLevel > 0 {
		r.level = s.ModeWarmupLevel
	}
	r.st = &stageRun{idx: i, stage: s, res: &StageResult{
		Index: i, Level: s.Level, RequestRate: s.RequestRate, Mode: s.Mode, Offsets: make(map[string]time.Duration),
	}}
	for _, m := range r.byIndex {
		m.joined, m.finished, m.hasWM = now, false, false
	}
	// The share of agents that failed runs on the others: the stage is
	// measured with fewer agents than planned.
	r.st.res.Degraded = len(r.failedAgents()) > 0
	r.state, r.deadline = stAssigning, now.Add(r.cfg.ReadyTimeout)
	r.logger.Info("stage assigned", "stage", i, "level", s.Level, "mode", s.Mode, "agents", len(r.byIndex))
	r.reshard(nil, now)
}

// schedule fixes the stage's window bounds and broadcasts the start.
func (r *run) schedule(now time.Time) {
	st := r.st
	st.start = now.Add(r.cfg.StartDelay)
	st.res.Start = st.start
	t := st.start
	if st.stage.ModeWarmup > 0 {
		st.bounds, st.kinds = append(st.bounds, t), append(st.kinds, KindWarmup)
		t = t.Add(st.stage.ModeWarmup)
		st.levelAt = 1
	}
	if st.stage.Warmup > 0 {
		st.bounds, st.kinds = append(st.bounds, t), append(st.kinds, KindWarmup)
		t = t.Add(st.stage.Warmup)
	}
	win := r.cfg.Window
	if st.stage.Window > 0 {
		win = st.stage.Window
	}
	if win <= 0 || win > st.stage.Duration {
		win = st.stage.Duration
	}
	measureEnd := t.Add(st.stage.Duration)
	for ; t.Before(measureEnd); t = t.Add(win) {
		st.bounds, st.kinds = append(st.bounds, t), append(st.kinds, KindMeasure)
	}
	st.ends = measureEnd
	// The stage's series exist, at 0, from before its first report, so
	// rate() and increase() over them count every request.
	for _, k := range slices.Compact(slices.Clone(st.kinds)) {
		r.metrics.load.Touch(loadLabels(k, st.stage.Mode, r.level))
	}
	r.measureSpan(st.ends)
	r.state = stRunning
	r.logger.Info("stage scheduled", "stage", st.idx, "start_at", st.start, "windows", len(st.bounds))
	r.advance(now)
}

// extend appends one measured window (PolicyRerun).
func (st *stageRun) extend() {
	win := st.ends.Sub(st.bounds[len(st.bounds)-1])
	st.bounds, st.kinds = append(st.bounds, st.ends), append(st.kinds, KindMeasure)
	st.ends = st.ends.Add(win)
}

// measureSpan tells Config.OnMeasureSpan the running stage's measured
// time: from its first measured window's start to end (st.ends unless the
// stage drains early). A drain before the measured time began gives an
// empty span at its start.
func (r *run) measureSpan(end time.Time) {
	st := r.st
	if r.cfg.OnMeasureSpan == nil || st == nil {
		return
	}
	start := st.ends
	for i, k := range st.kinds {
		if k == KindMeasure {
			start = st.bounds[i]
			break
		}
	}
	r.cfg.OnMeasureSpan(st.idx, start, later(end, start))
}

// advance sends phases due within PhaseLead and opens windows whose start
// has come; at the end of the measured time it drains.
func (r *run) advance(now time.Time) {
	st := r.st
	lead := now.Add(r.cfg.PhaseLead)
	for st.phaseOut < len(st.bounds) && (st.phaseOut == 0 || !st.bounds[st.phaseOut].After(lead)) {
		if st.phaseOut == st.levelAt && st.levelAt > 0 && r.level != st.stage.Level {
			// The mode warm-up is over: the stage's own level, from the
			// next window on (a phase lead early, like any phase).
			r.logger.Info("mode warm-up done", "stage", st.idx, "from", r.level, "to", st.stage.Level)
			r.level = st.stage.Level
			r.metrics.load.SetTarget(r.level)
			r.reshard(nil, now)
		}
		w := r.openWindow(st.bounds[st.phaseOut], st.kinds[st.phaseOut], now)
		r.broadcast(phase{Window: w.id, Kind: w.kind, StartAt: w.start, Level: r.level, Mode: st.stage.Mode})
		st.phaseOut++
	}
	// The current window is the last opened one whose start has passed.
	for _, w := range r.windows {
		if w.stage == st.idx && !w.start.After(now) {
			st.cur = w
		}
	}
	if st.cur != nil {
		r.metrics.load.SetStage(loadLabels(st.cur.kind, st.cur.mode, st.cur.level), r.level)
	}
	if r.cfg.FailFast > 0 && !st.judged && !now.Before(st.start.Add(r.cfg.FailFast)) {
		st.judged = true
		if class, example, ok := r.allFailed(st.idx); ok {
			r.logger.Error("every request failed the same way; stopping early", "stage", st.idx, "after", r.cfg.FailFast, "class", class)
			r.err = fmt.Errorf("%w in the first %s of stage %d (level %d), all %s (%s); stopped early",
				ErrAllFailed, r.cfg.FailFast, st.idx, st.stage.Level, class, example)
		}
	}
	if r.cfg.Judge != nil && r.err == nil {
		r.judge(now)
	}
	allFinished := len(r.byIndex) > 0
	for _, m := range r.byIndex {
		allFinished = allFinished && m.finished
	}
	switch {
	case !st.ends.After(lead):
		r.drainAtTime(st.ends, now)
	case allFinished && st.stage.Conversations > 0:
		r.logger.Info("every agent ran out of conversations", "stage", st.idx)
		r.drainAtTime(now, now)
	}
}

// judge calls Config.Judge with the stage's measured windows so far, once
// per JudgeInterval after the measurement began.
func (r *run) judge(now time.Time) {
	st := r.st
	var first *window
	for _, w := range r.windows {
		if w.stage == st.idx && w.kind == KindMeasure && !w.start.After(now) {
			first = w
			break
		}
	}
	if first == nil {
		return
	}
	if st.nextJudge.IsZero() {
		st.nextJudge = first.start.Add(JudgeInterval)
	}
	if now.Before(st.nextJudge) {
		return
	}
	st.nextJudge = now.Add(JudgeInterval)
	merged := record.NewWindow(0, r.cfg.Histogram)
	for _, w := range r.windows {
		if w.stage != st.idx || w.kind != KindMeasure || w.rerun || w.start.After(now) {
			continue
		}
		if err := merged.Merge(w.merged()); err != nil {
			r.logger.Warn("merge for judging", "window", w.id, "error", err)
			return
		}
	}
	if err := r.cfg.Judge(st.idx, merged, now.Sub(first.start)); err != nil {
		r.logger.Error("stopping early", "stage", st.idx, "error", err)
		r.err = err
	}
}

// allFailed returns the one class every request of stage so far failed
// with, as reported, and an example message; ok is false when a request
// succeeded, none ended, or the failures differ in class.
func (r *run) allFailed(stage int) (class, example string, ok bool) {
	var c record.Counters
	var top []record.ErrorStat
	for _, w := range r.windows {
		if w.stage == stage {
			c.Add(&w.data.Counters)
			if t := w.data.TopErrors(1); len(t) > 0 && len(top) == 0 {
				top = t
			}
		}
	}
	if c.Requests > 0 || c.Failed == 0 || len(c.FailedByClass) != 1 {
		return "", "", false
	}
	for k := range c.FailedByClass {
		class = string(k)
	}
	example = "no message"
	if len(top) > 0 {
		example = top[0].Example
		if example == "" {
			example = top[0].Message
		}
	}
	return class, example, true
}

func (r *run) drain(now time.Time) {
	if r.st == nil || r.state == stIdle {
		r.finish(r.errReason())
		return
	}
	r.drainAtTime(now, now)
}

// drainAtTime tells agents to stop at t and fixes the windows' ends.
func (r *run) drainAtTime(t, now time.Time) {
	st := r.st
	st.drained, st.drainAt = true, t
	if !t.Equal(st.ends) {
		r.measureSpan(t)
	}
	// Every announced window stays (agents may have switched to it); the
	// last one ends at t, or at its start if it had not begun.
	last := r.lastWindow(st.idx)
	if last != nil {
		last.end = later(t, last.start)
		st.cur = last
		r.broadcast(phase{Window: last.id, Kind: KindDrain, StartAt: t, Level: r.level, Mode: st.stage.Mode})
	}
	r.state = stDraining
	r.logger.Info("stage draining", "stage", st.idx, "at", t)
}

// openWindow creates the next window of the stage.
func (r *run) openWindow(start time.Time, kind Kind, now time.Time) *window {
	st := r.st
	w := newWindow(r.nextID, st.idx, kind, start, r.cfg.Histogram)
	w.level, w.mode = r.level, st.stage.Mode
	r.nextID++
	// Until the next window is planned, the window ends at the stage's end.
	w.end = st.ends
	if prev := r.lastWindow(st.idx); prev != nil {
		prev.end = start
	}
	for _, m := range r.byIndex {
		w.addMember(m, start)
	}
	r.windows = append(r.windows, w)
	r.byID[w.id] = w
	st.res.Windows = append(st.res.Windows, w.id)
	st.opened++
	return w
}

func (r *run) lastWindow(stage int) *window {
	for i := len(r.windows) - 1; i >= 0; i-- {
		if r.windows[i].stage == stage {
			return r.windows[i]
		}
	}
	return nil
}

// closeWindows closes every window whose agents are all past it or whose
// grace has run out; it reports whether the stage's windows are all closed.
func (r *run) closeWindows(now time.Time) bool {
	all := true
	for _, w := range r.windows {
		if w.closed {
			continue
		}
		if w.stage != r.st.idx {
			continue
		}
		if w.end.After(now) || (r.state != stDraining && r.st.cur == w) {
			all = false
			continue
		}
		by := ""
		if w.watermarksPassed() {
			by = "watermarks"
		} else if now.Sub(w.end) > r.cfg.Grace {
			by = "grace"
		}
		if by == "" {
			all = false
			continue
		}
		w.close(by, now)
		r.metrics.windowClosed(w)
		r.logger.Info("window closed", "window", w.id, "kind", w.kind, "closed_by", by,
			"requests", w.data.Counters.Requests, "degraded", w.degraded)
		if r.cfg.OnWindowClosed != nil {
			r.cfg.OnWindowClosed(w.result())
		}
		if r.out != nil {
			if err := r.out.write(w); err != nil {
				r.logger.Error("write window", "window", w.id, "error", err)
			}
		}
	}
	return all
}

// endStage merges the stage's windows and starts the next stage or ends.
func (r *run) endStage(now time.Time) {
	st := r.st
	r.closeStage(false)
	r.logger.Info("stage done", "stage", st.idx, "requests", st.res.Measured.Counters.Requests,
		"start_skew", st.res.StartSkew, "degraded", st.res.Degraded)
	if r.err == nil && st.idx+1 < len(r.cfg.Stages) && len(r.byIndex) > 0 {
		r.idle(st.idx+1, now.Add(st.stage.Cooldown))
		return
	}
	if r.err == nil && len(r.byIndex) == 0 {
		r.err = fmt.Errorf("run stage %d: every agent: %w", st.idx, ErrAgentLost)
	}
	r.finish(r.errReason())
}

// closeStage merges the running stage's windows (all closed) into its
// result and hands it over.
func (r *run) closeStage(interrupted bool) {
	st := r.st
	r.metrics.load.ClearStage()
	st.res.Interrupted = interrupted
	st.res.Agents = r.statuses()
	st.res.Measured = record.NewWindow(0, r.cfg.Histogram)
	offsets := make([]time.Duration, 0, len(st.res.Offsets))
	for _, o := range st.res.Offsets {
		offsets = append(offsets, o)
	}
	if len(offsets) > 0 {
		st.res.StartSkew = slices.Max(offsets) - slices.Min(offsets)
	}
	for _, w := range r.windows {
		if w.stage != st.idx || w.kind != KindMeasure || w.rerun {
			continue
		}
		m, err := w.result().Merged()
		if err == nil {
			err = st.res.Measured.Merge(m)
		}
		if err != nil {
			r.logger.Error("merge stage", "window", w.id, "error", err)
		}
	}
	r.finished = append(r.finished, st.res)
	if r.cfg.OnStageDone != nil {
		r.cfg.OnStageDone(st.res)
	}
}
