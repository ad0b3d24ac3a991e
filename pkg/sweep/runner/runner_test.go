package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/sweep"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// journal records what the fakes were asked to do, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// fakeSwitch is a switch that can read its mode, like the sim switch.
type fakeSwitch struct {
	j       *journal
	mode    *string
	current bool
	fail    string // mode whose switch fails
}

func (f *fakeSwitch) Switch(_ context.Context, mode string) error {
	if mode == f.fail {
		return errors.New("switch refused")
	}
	f.j.add("switch %s", mode)
	*f.mode = mode
	return nil
}

func (f *fakeSwitch) Current(context.Context) (string, error) {
	if !f.current {
		return "", sweep.ErrNoCurrent
	}
	return *f.mode, nil
}

type fakeGate struct{ j *journal }

func (g fakeGate) Ready(context.Context) (*ready.Report, error) {
	g.j.add("gate")
	return &ready.Report{Start: t0}, nil
}

func (g fakeGate) Prime(_ context.Context, rep *ready.Report) error {
	g.j.add("prime")
	rep.Stages = append(rep.Stages, ready.StageResult{Stage: ready.StagePrime, Status: ready.StatusPassed})
	return nil
}

// fakeAdder keeps the points added.
type fakeAdder struct {
	j      *journal
	points []report.Point
}

func (a *fakeAdder) Add(p *report.Point) (report.Row, error) {
	a.j.add("add %s", sweep.Key{Run: p.Run, Mode: p.Mode, Level: p.Level})
	a.points = append(a.points, *p)
	return report.RowOf(p), nil
}

// window returns a measurement window of n requests with the given TTFT.
func window(n int, ttft time.Duration) *record.Window {
	w := record.NewWindow(1, hdr.Default)
	for i := range n {
		w.Add(&record.Sample{Window: 1, Turn: 1, Intended: t0, Result: &client.Result{
			Start: t0.Add(time.Duration(i) * time.Millisecond), TTFT: ttft, E2E: 2 * ttft,
			PromptTokens: 100, OutputTokens: 5, UsageReported: true,
		}})
	}
	return w
}

func measurer(j *journal) Measurer {
	return MeasurerFunc(func(_ context.Context, l Level) (*Measurement, error) {
		j.add("measure %s warmup %s measure %s/%d", l.Key, l.Warmup, l.Measure, l.Snapshots)
		w := window(10, time.Duration(l.Key.Level)*time.Millisecond)
		return &Measurement{Window: w, Snapshots: []*record.Window{w}, Start: t0, End: t0.Add(l.Measure), Coverage: 1, Agents: 2}, nil
	})
}

func testSpec() *sweep.Spec {
	s := sweep.Default()
	s.Target, s.Model, s.Output = "http://sim.test", "m", "out"
	s.Levels = []int{10, 20}
	s.Modes = []sweep.Mode{{Name: "kv"}, {Name: "round_robin"}}
	s.Switch = &sweep.SwitchSpec{Kind: sweep.KindNone}
	s.Runs = 2
	s.Warmup, s.Measure, s.Snapshots, s.Cooldown = sweep.Duration(time.Second), sweep.Duration(3*time.Second), 3, sweep.Duration(time.Second)
	return s
}

type fixture struct {
	j     *journal
	mode  string
	sw    *fakeSwitch
	out   *fakeAdder
	stats []Status
}

func newFixture(current bool) *fixture {
	f := &fixture{j: &journal{}, mode: "least-loaded"}
	f.sw = &fakeSwitch{j: f.j, mode: &f.mode, current: current}
	f.out = &fakeAdder{j: f.j}
	return f
}

func (f *fixture) config(spec *sweep.Spec, done map[sweep.Key]bool) Config {
	return Config{
		Spec: spec, Plan: sweep.NewPlan(spec, done),
		Switchers: map[string]sweep.Switcher{"kv": f.sw, "round_robin": f.sw},
		Gate:      fakeGate{j: f.j}, Measurer: measurer(f.j), Output: f.out, Restore: true,
		OnStatus: func(s Status) { f.stats = append(f.stats, s) },
		Now:      func() time.Time { return t0 },
		Sleep: func(_ context.Context, d time.Duration) error {
			f.j.add("cooldown %s", d)
			return nil
		},
	}
}

func TestRunExecutesPlanInOrder(t *testing.T) {
	f := newFixture(true)
	r, err := New(f.config(testSpec(), nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	block := func(run int, mode string) []string {
		var out []string
		out = append(out, "switch "+mode, "gate", "prime")
		for _, l := range []int{10, 20} {
			k := sweep.Key{Run: run, Mode: mode, Level: l}
			out = append(out, fmt.Sprintf("measure %s warmup 1s measure 3s/3", k), "add "+k.String(), "cooldown 1s")
		}
		return out
	}
	var want []string
	want = append(want, block(1, "kv")...)
	want = append(want, block(1, "round_robin")...)
	// Run 2 takes the modes in reverse.
	want = append(want, block(2, "round_robin")...)
	want = append(want, block(2, "kv")...)
	want = append(want, "switch least-loaded")
	if got := f.j.get(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Switches != 4 || !res.Restored || res.Original != "least-loaded" || len(res.Points) != 8 || len(res.Readiness) != 4 {
		t.Errorf("result: switches %d restored %v original %q points %d readiness %d",
			res.Switches, res.Restored, res.Original, len(res.Points), len(res.Readiness))
	}
	p := f.out.points[0]
	if p.Run != 1 || p.Mode != "kv" || p.Level != 10 || p.Agents != 2 || !p.MeasureEnd.Equal(t0.Add(3*time.Second)) || len(p.Snapshots) != 1 {
		t.Errorf("first point %+v", p)
	}
	// The status of a level covers its warm-up and measurement, and the
	// time after it counts every later step.
	var lv *Status
	for i := range f.stats {
		if f.stats[i].Step.Kind == sweep.StepWarmup {
			lv = &f.stats[i]
			break
		}
	}
	if lv == nil || lv.Warmup != time.Second || lv.Measure != 3*time.Second || lv.Step.Duration != 4*time.Second || lv.Total != 8 {
		t.Fatalf("level status %+v", lv)
	}
	plan := sweep.NewPlan(testSpec(), nil)
	if want := plan.EstimatedDuration() - plan.Steps[0].Duration - 4*time.Second; lv.After != want {
		t.Errorf("after the first level: %v, want %v", lv.After, want)
	}
	n := len(f.stats)
	if restore := f.stats[n-2]; restore.Step.Kind != sweep.StepSwitch || restore.Step.Mode != "least-loaded" || restore.Step.Run != 0 {
		t.Errorf("next to last status %+v, want the restore", restore)
	}
	if last := f.stats[n-1]; last.Step.Kind != StepDone || last.Done != 8 || last.Total != 8 {
		t.Errorf("last status %+v, want done", last)
	}
}

func TestRunResumeSkipsDonePoints(t *testing.T) {
	f := newFixture(true)
	spec := testSpec()
	spec.Runs = 1
	done := map[sweep.Key]bool{{Run: 1, Mode: "kv", Level: 10}: true, {Run: 1, Mode: "kv", Level: 20}: true, {Run: 1, Mode: "round_robin", Level: 10}: true}
	r, err := New(f.config(spec, done))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"switch round_robin", "gate", "prime", "measure run 1, round_robin at 20 sessions warmup 1s measure 3s/3",
		"add run 1, round_robin at 20 sessions", "cooldown 1s", "switch least-loaded"}
	if got := f.j.get(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Switches != 1 || len(res.Points) != 1 {
		t.Errorf("switches %d points %d", res.Switches, len(res.Points))
	}
}

func TestRunInterruptedLevelIsNotWritten(t *testing.T) {
	f := newFixture(true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := f.config(testSpec(), nil)
	n := 0
	cfg.Measurer = MeasurerFunc(func(ctx context.Context, l Level) (*Measurement, error) {
		n++
		if n == 2 {
			// The interrupt arrives while the second level runs; the
			// measurer returns what it had.
			cancel()
			return &Measurement{Window: window(3, time.Millisecond)}, nil
		}
		return measurer(f.j).Measure(ctx, l)
	})
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if len(f.out.points) != 1 || len(res.Points) != 1 {
		t.Errorf("%d points written, want only the first level's", len(f.out.points))
	}
	// The original mode is restored after an interrupt too.
	if ev := f.j.get(); ev[len(ev)-1] != "switch least-loaded" || !res.Restored {
		t.Errorf("events %v, restored %v", ev, res.Restored)
	}
}

func TestRunRestore(t *testing.T) {
	tests := []struct {
		name         string
		current      bool
		restore      bool
		original     string
		wantRestored bool
		wantLast     string
	}{
		{"restored", true, true, "least-loaded", true, "switch least-loaded"},
		{"no restore asked", true, false, "least-loaded", false, "cooldown 1s"},
		{"cannot read the mode", false, true, "least-loaded", false, "cooldown 1s"},
		// Run 2 ends in kv, the original mode: nothing to do.
		{"already there", true, true, "kv", false, "cooldown 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(tt.current)
			f.mode = tt.original
			cfg := f.config(testSpec(), nil)
			cfg.Restore = tt.restore
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ev := f.j.get()
			if res.Restored != tt.wantRestored || ev[len(ev)-1] != tt.wantLast {
				t.Errorf("restored %v, last event %q; want %v, %q", res.Restored, ev[len(ev)-1], tt.wantRestored, tt.wantLast)
			}
		})
	}
}

func TestRunSwitchFailureStops(t *testing.T) {
	f := newFixture(true)
	f.sw.fail = "round_robin"
	r, err := New(f.config(testSpec(), nil))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "switch to round_robin") {
		t.Fatalf("err %v", err)
	}
	if len(res.Points) != 2 || !res.Restored {
		t.Errorf("points %d restored %v: want kv's two levels kept and the mode restored", len(res.Points), res.Restored)
	}
}

func TestRunWithoutGate(t *testing.T) {
	f := newFixture(false)
	spec := testSpec()
	spec.Readiness.Skip = true
	spec.Runs, spec.Warmup, spec.Cooldown = 1, 0, 0
	cfg := f.config(spec, nil)
	cfg.Gate = nil
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"switch kv", "measure run 1, kv at 10 sessions warmup 0s measure 3s/3", "add run 1, kv at 10 sessions",
		"measure run 1, kv at 20 sessions warmup 0s measure 3s/3", "add run 1, kv at 20 sessions", "switch round_robin",
		"measure run 1, round_robin at 10 sessions warmup 0s measure 3s/3", "add run 1, round_robin at 10 sessions",
		"measure run 1, round_robin at 20 sessions warmup 0s measure 3s/3", "add run 1, round_robin at 20 sessions"}
	if got := f.j.get(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNewChecksConfig(t *testing.T) {
	f := newFixture(true)
	cfg := f.config(testSpec(), nil)
	delete(cfg.Switchers, "round_robin")
	cfg.Output = nil
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), `mode "round_robin" has no switcher`) || !strings.Contains(err.Error(), "output is required") {
		t.Errorf("err %v", err)
	}
}

func TestOutputDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	if err := CheckFresh(dir); err != nil {
		t.Fatalf("a missing directory: %v", err)
	}
	spec := testSpec()
	spec.Output = dir
	id := NewID(t0)
	if id != "20260102-030405" {
		t.Errorf("id %q", id)
	}
	w, err := report.NewWriter(dir, Facts(spec, id, "docchat", "test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []sweep.Key{{Run: 1, Mode: "kv", Level: 10}, {Run: 1, Mode: "kv", Level: 20}} {
		p := &report.Point{Run: k.Run, Mode: k.Mode, Level: k.Level, Window: window(20, 5*time.Millisecond),
			MeasureStart: t0, MeasureEnd: t0.Add(time.Second), Coverage: 1, Agents: 1}
		if _, err := w.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CheckFresh(dir); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("CheckFresh on a sweep: %v", err)
	}
	got, err := ReadID(dir)
	if err != nil || got != id {
		t.Fatalf("ReadID %q %v", got, err)
	}
	done, err := Done(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 || !done[sweep.Key{Run: 1, Mode: "kv", Level: 20}] {
		t.Errorf("done %v", done)
	}
	if err := WriteSpec(dir, spec); err != nil {
		t.Fatal(err)
	}
	back, err := sweep.Load(filepath.Join(dir, SpecFile))
	if err != nil || !slices.Equal(back.Levels, spec.Levels) || back.Runs != 2 {
		t.Errorf("spec read back %+v %v", back, err)
	}
	// A password in an (unvalidated) target never reaches the disk.
	withUser := *spec
	withUser.Target = "http://u:hunter2@vllm:8000/v1"
	userDir := t.TempDir()
	if err := WriteSpec(userDir, &withUser); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(userDir, SpecFile)); err != nil || bytes.Contains(b, []byte("hunter2")) {
		t.Errorf("written spec keeps the password (%v):\n%s", err, b)
	}
	r, err := Render(dir, Facts(spec, id, "docchat", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome == nil || r.Outcome.Primary.Headline == "" {
		t.Errorf("no headline")
	}
}

// oneRunFleet is a Fleet that, like one coordinator run, takes every
// level at once and calls the hooks between them; it journals when it
// starts and what it is asked.
type oneRunFleet struct {
	j    *journal
	runs int
}

func (f *oneRunFleet) Run(ctx context.Context, levels []Level, h Hooks) error {
	f.runs++
	f.j.add("fleet run %d levels", len(levels))
	m := measurer(f.j)
	for i, l := range levels {
		if err := h.Before(ctx, i); err != nil {
			return fmt.Errorf("before stage %d: %w", i, err)
		}
		ms, err := m.Measure(ctx, l)
		if err != nil {
			return err
		}
		if err := h.Done(i, ms); err != nil {
			return err
		}
	}
	return nil
}

// TestRunOneFleetForTheSweep runs the plan on a Fleet: one Run for every
// level, the switches, gates and cooldowns between levels from its hooks,
// in the plan's order, and a hook's error returned as it is.
func TestRunOneFleetForTheSweep(t *testing.T) {
	f := newFixture(true)
	fl := &oneRunFleet{j: f.j}
	cfg := f.config(testSpec(), nil)
	cfg.Measurer, cfg.Fleet = nil, fl
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if fl.runs != 1 || len(res.Points) != 8 || res.Switches != 4 {
		t.Errorf("fleet runs %d, points %d, switches %d: want 1, 8, 4", fl.runs, len(res.Points), res.Switches)
	}
	got := f.j.get()
	want := []string{"fleet run 8 levels", "switch kv", "gate", "prime",
		"measure run 1, kv at 10 sessions warmup 1s measure 3s/3", "add run 1, kv at 10 sessions", "cooldown 1s",
		"measure run 1, kv at 20 sessions warmup 1s measure 3s/3", "add run 1, kv at 20 sessions", "cooldown 1s", "switch round_robin"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("events:\n%s\nwant a start of:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	f = newFixture(true)
	f.sw.fail = "round_robin"
	cfg = f.config(testSpec(), nil)
	cfg.Measurer, cfg.Fleet = nil, &oneRunFleet{j: f.j}
	r, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(t.Context())
	if err == nil || strings.Contains(err.Error(), "before stage") || !strings.Contains(err.Error(), "switch to round_robin") {
		t.Errorf("error %v: want the switch's, unwrapped by the fleet", err)
	}
	if len(res.Points) != 2 {
		t.Errorf("%d points before the failed switch, want 2", len(res.Points))
	}
}

// levelsFleet records the levels it is given and measures nothing.
type levelsFleet struct{ levels []Level }

func (f *levelsFleet) Run(_ context.Context, levels []Level, _ Hooks) error {
	f.levels = levels
	return nil
}

// TestRunModeWarmup: the Fleet gets the mode warm-up on the first level of
// every mode block, at the highest level, apart from that level's own
// warm-up.
func TestRunModeWarmup(t *testing.T) {
	f := newFixture(true)
	fl := &levelsFleet{}
	spec := testSpec()
	spec.ModeWarmup = sweep.Duration(5 * time.Second)
	cfg := f.config(spec, nil)
	cfg.Measurer, cfg.Fleet = nil, fl
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range fl.levels {
		got = append(got, fmt.Sprintf("%s %d: %v at %d, %v", l.Key.Mode, l.Key.Level, l.ModeWarmup, l.ModeWarmupLevel, l.Warmup))
	}
	want := []string{"kv 10: 5s at 20, 1s", "kv 20: 0s at 0, 1s", "round_robin 10: 5s at 20, 1s", "round_robin 20: 0s at 0, 1s",
		"round_robin 10: 5s at 20, 1s", "round_robin 20: 0s at 0, 1s", "kv 10: 5s at 20, 1s", "kv 20: 0s at 0, 1s"}
	if !slices.Equal(got, want) {
		t.Errorf("levels:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunPreflightAfterFirstSwitch: the preflight hook runs once, after the
// first switch and gate (which bring the target up) and before the first
// prime; its error stops the sweep before any level.
func TestRunPreflightAfterFirstSwitch(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		f := newFixture(false)
		cfg := f.config(testSpec(), nil)
		cfg.Preflight = func(context.Context) error { f.j.add("preflight"); return nil }
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := f.j.get()
		if want := []string{"switch kv", "gate", "preflight", "prime"}; !slices.Equal(got[:4], want) {
			t.Errorf("first events %v, want %v", got[:4], want)
		}
		if n := slices.Index(got, "preflight"); slices.Contains(got[n+1:], "preflight") {
			t.Errorf("preflight ran more than once:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("fails", func(t *testing.T) {
		f := newFixture(false)
		cfg := f.config(testSpec(), nil)
		cfg.Preflight = func(context.Context) error { return errors.New("model not served") }
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "preflight after the first switch: model not served") {
			t.Fatalf("error %v, want the preflight's", err)
		}
		if len(res.Points) != 0 || slices.Contains(f.j.get(), "prime") {
			t.Errorf("the sweep went on after a failed preflight: %v", f.j.get())
		}
	})
	t.Run("without gate", func(t *testing.T) {
		f := newFixture(false)
		cfg := f.config(testSpec(), nil)
		cfg.Gate = nil
		cfg.Preflight = func(context.Context) error { f.j.add("preflight"); return nil }
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := f.j.get(); !slices.Equal(got[:3], []string{"switch kv", "preflight", "measure run 1, kv at 10 sessions warmup 1s measure 3s/3"}) {
			t.Errorf("first events %v", got[:3])
		}
	})
}
