package coordinator_test

// End-to-end tests of a long-lived fleet: one Run drives several stages
// with the same connected agents, BeforeStage and cooldowns between them,
// the run's hooks, and a run cut short mid-stage.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestStagesShareOneFleet runs three stages on one Run: BeforeStage is
// called before each with no request in flight and none sent while it
// runs, each cooldown is honoured, every agent connects once, and the
// hooks see every window and report.
func TestStagesShareOneFleet(t *testing.T) {
	const agents = 2
	const cooldown = 400 * time.Millisecond
	const hookTime = 300 * time.Millisecond
	target := &countingTarget{pause: 20 * time.Millisecond}
	var dials cutter
	var (
		mu        sync.Mutex
		befores   []int
		stageEnds = map[int]time.Time{}
		windows   int
		reported  int64
		reports   = map[string]int{}
		spans     = map[int][2]time.Time{}
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := coordinator.Config{
		Window: 300 * time.Millisecond,
		Stages: []coordinator.Stage{
			{Level: 2, Mode: "a", Warmup: 200 * time.Millisecond, Duration: 600 * time.Millisecond, Cooldown: cooldown},
			{Level: 4, Mode: "b", Duration: 600 * time.Millisecond, Cooldown: cooldown},
			{Level: 2, Mode: "a", Duration: 600 * time.Millisecond, Cooldown: time.Hour}, // the last is skipped
		},
		BeforeStage: func(ctx context.Context, i int, s coordinator.Stage) error {
			called := time.Now()
			if n := target.inflight.Load(); n != 0 {
				t.Errorf("BeforeStage(%d): %d requests in flight", i, n)
			}
			mu.Lock()
			befores = append(befores, i)
			_, ended := stageEnds[i-1]
			mu.Unlock()
			if i > 0 && !ended {
				t.Errorf("BeforeStage(%d) called before stage %d ended", i, i-1)
			}
			if last := target.lastStart(); i > 0 && called.Sub(last) < cooldown {
				t.Errorf("BeforeStage(%d) called %v after the last request was sent, want >= cooldown %v", i, called.Sub(last), cooldown)
			}
			sleepCtx(ctx, hookTime)
			if n := target.startsAfter(called); n != 0 {
				t.Errorf("BeforeStage(%d): %d requests sent while it ran", i, n)
			}
			return nil
		},
		OnStageDone: func(s *coordinator.StageResult) {
			mu.Lock()
			stageEnds[s.Index] = time.Now()
			mu.Unlock()
		},
		OnWindowClosed: func(*coordinator.WindowResult) {
			mu.Lock()
			windows++
			mu.Unlock()
		},
		OnMeasureSpan: func(stage int, start, end time.Time) {
			mu.Lock()
			spans[stage] = [2]time.Time{start, end}
			mu.Unlock()
		},
		OnReport: func(id string, _ uint32, w *record.Window) {
			mu.Lock()
			reported += w.Counters.Requests + w.Counters.Failed
			reports[id]++
			mu.Unlock()
		},
	}
	res, err := fleet{
		agents: agents,
		cfg:    cfg,
		builder: func(context.Context, agent.Spec) (agent.Target, error) {
			return agent.Target{Source: scriptSource{turns: 3}, Streamer: target.streamer()}, nil
		},
		agentOpts: func(int) []agent.Option { return []agent.Option{agent.WithDialer(dials.dial)} },
	}.run(t, ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := dials.dialCount(); got != agents {
		t.Errorf("agents dialed %d times, want %d (one connection each for every stage)", got, agents)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(befores) != 3 || befores[0] != 0 || befores[1] != 1 || befores[2] != 2 {
		t.Errorf("BeforeStage calls %v, want [0 1 2]", befores)
	}
	if len(res.Stages) != 3 {
		t.Fatalf("%d stage results, want 3", len(res.Stages))
	}
	for i, s := range res.Stages {
		if s.Index != i || s.Mode != cfg.Stages[i].Mode || s.Level != cfg.Stages[i].Level || s.Interrupted {
			t.Errorf("stage %d: index %d mode %q level %d interrupted %v", i, s.Index, s.Mode, s.Level, s.Interrupted)
		}
		if s.Measured.Counters.Requests == 0 {
			t.Errorf("stage %d measured no request", i)
		}
	}
	if windows != len(res.Windows) {
		t.Errorf("OnWindowClosed saw %d windows, the result has %d", windows, len(res.Windows))
	}
	// OnMeasureSpan gave each stage's measured time: its measured windows'
	// bounds.
	for i := range res.Stages {
		var first, last time.Time
		for _, w := range res.Windows {
			if w.Stage != i || w.Kind != coordinator.KindMeasure {
				continue
			}
			if first.IsZero() || w.Start.Before(first) {
				first = w.Start
			}
			if w.End.After(last) {
				last = w.End
			}
		}
		if sp, ok := spans[i]; !ok || !sp[0].Equal(first) || !sp[1].Equal(last) {
			t.Errorf("stage %d: OnMeasureSpan %v, measured windows span %v to %v", i, sp, first, last)
		}
	}
	var total int64
	for _, w := range res.Windows {
		m, err := w.Merged()
		if err != nil {
			t.Fatal(err)
		}
		total += m.Counters.Requests + m.Counters.Failed
	}
	if reported != total || total == 0 {
		t.Errorf("OnReport saw %d requests, the windows hold %d", reported, total)
	}
	if len(reports) != agents {
		t.Errorf("OnReport heard from %d agents, want %d", len(reports), agents)
	}
}

// lastStart is when the latest request was sent.
func (ct *countingTarget) lastStart() time.Time {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	var last time.Time
	for _, s := range ct.starts {
		if s.After(last) {
			last = s
		}
	}
	return last
}

// TestBeforeStageErrorEndsRun checks that an error of BeforeStage ends the
// run with it, keeping the stages already measured.
func TestBeforeStageErrorEndsRun(t *testing.T) {
	errSwitch := errors.New("switch failed")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := fleet{
		agents:  1,
		builder: scriptedBuilder(2, 5*time.Millisecond),
		cfg: coordinator.Config{
			Stages: []coordinator.Stage{{Level: 1, Duration: 300 * time.Millisecond}, {Level: 1, Duration: 300 * time.Millisecond}},
			BeforeStage: func(_ context.Context, i int, _ coordinator.Stage) error {
				if i == 1 {
					return errSwitch
				}
				return nil
			},
		},
	}.run(t, ctx)
	if !errors.Is(err, errSwitch) {
		t.Fatalf("Run error %v, want %v", err, errSwitch)
	}
	if res == nil || len(res.Stages) != 1 || res.Stages[0].Measured.Counters.Requests == 0 {
		t.Fatalf("result %+v: want stage 0 measured", res)
	}
}

// TestCancelledStageIsInterrupted cancels a run mid-stage: the stage is in
// Result.Stages, marked Interrupted, with what was measured.
func TestCancelledStageIsInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var applied atomic.Int64
	res, err := fleet{
		agents:  1,
		builder: scriptedBuilder(2, 5*time.Millisecond),
		cfg: coordinator.Config{
			Window: 200 * time.Millisecond,
			Stages: []coordinator.Stage{{Level: 2, Duration: time.Minute}},
			OnReport: func(_ string, _ uint32, w *record.Window) {
				if applied.Add(w.Counters.Requests) > 20 {
					stop()
				}
			},
		},
	}.run(t, runCtx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error %v, want context.Canceled", err)
	}
	if res == nil || len(res.Stages) != 1 {
		t.Fatalf("result %+v: want the cut stage", res)
	}
	st := res.Stages[0]
	if !st.Interrupted || st.Measured.Counters.Requests == 0 || len(st.Windows) == 0 {
		t.Errorf("stage: interrupted %v, requests %d, windows %v: want interrupted with requests", st.Interrupted, st.Measured.Counters.Requests, st.Windows)
	}
}

// TestOpenLoopCapsInFlight checks that with a request rate every agent
// caps its conversations in flight at its share of the level.
func TestOpenLoopCapsInFlight(t *testing.T) {
	const level = 4
	target := &countingTarget{pause: 150 * time.Millisecond}
	var as assignments
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := fleet{
		agents: 2,
		builder: func(context.Context, agent.Spec) (agent.Target, error) {
			return agent.Target{Source: scriptSource{turns: 3}, Streamer: target.streamer()}, nil
		},
		agentOpts: func(int) []agent.Option { return []agent.Option{as.hook()} },
		cfg: coordinator.Config{Stages: []coordinator.Stage{{
			Level: level, RequestRate: 200, Duration: 1500 * time.Millisecond,
		}}},
	}.run(t, ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !as.applied(level, 2) {
		t.Errorf("no assignment split level %d over 2 agents", level)
	}
	// 200/s of 150 ms turns would keep about 30 in flight uncapped.
	if p := target.peak.Load(); p > level || p < level-1 {
		t.Errorf("peak in flight %d, want the level %d", p, level)
	}
}
