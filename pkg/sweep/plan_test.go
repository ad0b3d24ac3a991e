package sweep

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// blocks returns the plan as "run:mode[levels]" blocks, one per switch.
func blocks(p *Plan) []string {
	var out []string
	for _, st := range p.Steps {
		switch st.Kind {
		case StepSwitch:
			out = append(out, st.Mode+":")
		case StepMeasure:
			out[len(out)-1] += itoa(st.Level) + " "
		}
	}
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

func itoa(n int) string { return joinInts([]int{n}) }

func TestPlanOrder(t *testing.T) {
	tests := []struct {
		name     string
		runs     int
		modes    []string
		want     []string
		switches int
	}{
		{"one run", 1, []string{"kv", "rr"}, []string{"kv:10 20 30", "rr:10 20 30"}, 2},
		{"two runs alternate", 2, []string{"kv", "rr"}, []string{"kv:10 20 30", "rr:10 20 30", "rr:10 20 30", "kv:10 20 30"}, 4},
		{"three runs", 3, []string{"kv", "rr"}, []string{
			"kv:10 20 30", "rr:10 20 30", "rr:10 20 30", "kv:10 20 30", "kv:10 20 30", "rr:10 20 30",
		}, 6},
		{"three modes reverse", 2, []string{"a", "b", "c"}, []string{
			"a:10 20 30", "b:10 20 30", "c:10 20 30", "c:10 20 30", "b:10 20 30", "a:10 20 30",
		}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			s.Runs = tc.runs
			s.Levels = []int{10, 20, 30}
			s.Modes = nil
			for _, m := range tc.modes {
				s.Modes = append(s.Modes, Mode{Name: m})
			}
			p := NewPlan(s, nil)
			if got := blocks(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("blocks %q, want %q", got, tc.want)
			}
			if p.Switches() != tc.switches {
				t.Errorf("switches %d, want %d", p.Switches(), tc.switches)
			}
			if p.Total != tc.runs*len(tc.modes)*3 || p.Done != 0 || len(p.Remaining()) != p.Total {
				t.Errorf("total %d done %d remaining %d", p.Total, p.Done, len(p.Remaining()))
			}
			// Runs are numbered and every run covers every point once.
			seen := map[Key]bool{}
			for _, k := range p.Remaining() {
				if seen[k] {
					t.Errorf("point %v twice", k)
				}
				seen[k] = true
			}
		})
	}
}

// TestPlanSteps checks one block's steps in order, and the estimate.
func TestPlanSteps(t *testing.T) {
	s := validSpec() // 2 modes x 2 levels x 1 run
	s.SwitchEstimate = Duration(2 * time.Minute)
	p := NewPlan(s, nil)
	var kinds []string
	for _, st := range p.Steps[:9] {
		kinds = append(kinds, string(st.Kind)+itoa(st.Level))
	}
	want := "switch0 gate0 prime0 warmup10 measure10 cooldown10 warmup20 measure20 cooldown20"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("steps %s\nwant  %s", got, want)
	}
	// 2 switches x 2m + 4 levels x (60s + 300s + 30s).
	if got, want := p.EstimatedDuration(), 4*time.Minute+4*390*time.Second; got != want {
		t.Errorf("estimate %s, want %s", got, want)
	}
	last := p.Steps[len(p.Steps)-1]
	if last.Start+last.Duration != p.EstimatedDuration() {
		t.Errorf("last step ends at %s, estimate %s", last.Start+last.Duration, p.EstimatedDuration())
	}
	for _, st := range p.Steps {
		if st.Kind == StepMeasure && st.Snapshots != 3 {
			t.Errorf("measure step with %d snapshots", st.Snapshots)
		}
	}
	// No warmup, cooldown or readiness: those steps go.
	s.Warmup, s.Cooldown, s.Readiness.Skip = 0, 0, true
	p = NewPlan(s, nil)
	if len(p.Steps) != 2+4 {
		t.Errorf("%d steps, want 2 switches and 4 measurements", len(p.Steps))
	}
}

// TestPlanModeWarmup: with a mode warm-up, the first level of every mode
// block gets it at the highest level before its own warm-up (also when
// there is no per-level warm-up, and also on resume), the other levels do
// not, and the estimate counts it.
func TestPlanModeWarmup(t *testing.T) {
	s := validSpec() // 2 modes x levels 10, 20 x 1 run
	s.Runs = 2
	s.ModeWarmup = Duration(2 * time.Minute)
	base := NewPlan(validSpec(), nil).EstimatedDuration()
	for _, tc := range []struct {
		name   string
		warmup Duration
		done   map[Key]bool
		want   []string
	}{
		{"warm-up", Duration(time.Minute), nil, []string{"kv 10 2m0s/20 3m0s", "kv 20 0s/0 1m0s", "round_robin 10 2m0s/20 3m0s", "round_robin 20 0s/0 1m0s",
			"round_robin 10 2m0s/20 3m0s", "round_robin 20 0s/0 1m0s", "kv 10 2m0s/20 3m0s", "kv 20 0s/0 1m0s"}},
		{"no warm-up", 0, nil, []string{"kv 10 2m0s/20 2m0s", "round_robin 10 2m0s/20 2m0s", "round_robin 10 2m0s/20 2m0s", "kv 10 2m0s/20 2m0s"}},
		{"resumed", Duration(time.Minute), map[Key]bool{{Run: 1, Mode: "kv", Level: 10}: true, {Run: 1, Mode: "round_robin", Level: 10}: true, {Run: 1, Mode: "round_robin", Level: 20}: true},
			[]string{"kv 20 2m0s/20 3m0s", "round_robin 10 2m0s/20 3m0s", "round_robin 20 0s/0 1m0s", "kv 10 2m0s/20 3m0s", "kv 20 0s/0 1m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Warmup = tc.warmup
			var got []string
			for _, st := range NewPlan(s, tc.done).Steps {
				if st.Kind == StepWarmup {
					got = append(got, fmt.Sprintf("%s %d %s/%d %s", st.Mode, st.Level, st.ModeWarmup, st.ModeWarmupLevel, st.Duration))
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warm-up steps:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	s.Warmup = Duration(time.Minute)
	s.Runs = 1
	if got, want := NewPlan(s, nil).EstimatedDuration(), base+2*2*time.Minute; got != want {
		t.Errorf("estimate %s, want %s (two mode blocks' mode warm-ups more)", got, want)
	}
	var b strings.Builder
	if err := NewPlan(s, nil).WritePlan(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "mode warmup 2m at 20, warmup 1m") {
		t.Errorf("plan does not show the mode warm-up:\n%s", b.String())
	}
	s.RequestRate = 3
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "mode_warmup") {
		t.Errorf("mode warm-up with a request rate: %v, want an error naming mode_warmup", err)
	}
	s.RequestRate, s.ModeWarmup = 0, Duration(-time.Second)
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "mode_warmup -1s must not be negative") {
		t.Errorf("negative mode warm-up: %v", err)
	}
}

// TestPlanResume: done points are skipped; a block with points left still
// starts with its switch, a block with none left is skipped whole.
func TestPlanResume(t *testing.T) {
	s := validSpec()
	s.Runs = 2
	s.Levels = []int{10, 20, 30}
	done := map[Key]bool{
		{1, "kv", 10}: true, {1, "kv", 20}: true, {1, "kv", 30}: true, // run 1 kv complete
		{1, "round_robin", 10}: true, // run 1 rr: 20, 30 left
		{2, "round_robin", 99}: true, // a point the spec no longer has
	}
	p := NewPlan(s, done)
	if got, want := blocks(p), []string{"round_robin:20 30", "round_robin:10 20 30", "kv:10 20 30"}; !reflect.DeepEqual(got, want) {
		t.Errorf("blocks %q, want %q", got, want)
	}
	if p.Steps[0].Kind != StepSwitch || p.Steps[0].Mode != "round_robin" || p.Steps[0].Run != 1 {
		t.Errorf("first step %+v, want the switch to round_robin", p.Steps[0])
	}
	if p.Switches() != 3 || p.Total != 12 || p.Done != 4 || len(p.Remaining()) != 8 {
		t.Errorf("switches %d total %d done %d remaining %d", p.Switches(), p.Total, p.Done, len(p.Remaining()))
	}
	// Everything done: nothing to do.
	all := map[Key]bool{}
	for _, k := range NewPlan(s, nil).Remaining() {
		all[k] = true
	}
	if p := NewPlan(s, all); len(p.Steps) != 0 || p.EstimatedDuration() != 0 {
		t.Errorf("all done: %d steps", len(p.Steps))
	}
}

func TestWritePlan(t *testing.T) {
	s, err := Load("testdata/sweep.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p := NewPlan(s, map[Key]bool{{1, "kv", 20}: true})
	if err := p.WritePlan(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{
		"sweep plan: 3 runs x 2 modes (kv, round_robin) x 9 levels (20,30,40,50,60,70,80,100,120) = 54 points, 1 done, 53 to run",
		"switch to kv, gate, prime",
		"warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s",
		"switches: 6",
		"estimated duration: 6h",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("plan lacks %q:\n%s", w, out)
		}
	}
	// Header, 6 switch rows and 53 level rows; 5 lines around the table.
	if rows := strings.Count(out, "\n") - 5; rows != 1+6+53 {
		t.Errorf("%d table rows:\n%s", rows, out)
	}
}

func ExamplePlan_WritePlan() {
	s := Default()
	s.Target, s.Model, s.Output = "http://frontend:8000", "llama", "out"
	s.Levels = []int{20, 40}
	s.Modes = []Mode{{Name: "kv"}, {Name: "round_robin"}}
	s.Switch = &SwitchSpec{Kind: KindNone}
	s.Runs = 2
	_ = NewPlan(s, nil).WritePlan(os.Stdout)
	// Output:
	// sweep plan: 2 runs x 2 modes (kv, round_robin) x 2 levels (20,40) = 8 points
	//
	// #   START   RUN  MODE         LEVEL  STEPS
	// 1   0s      1    kv           -      switch to kv, gate, prime
	// 2   3m      1    kv           20     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 3   9m30s   1    kv           40     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 4   16m     1    round_robin  -      switch to round_robin, gate, prime
	// 5   19m     1    round_robin  20     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 6   25m30s  1    round_robin  40     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 7   32m     2    round_robin  -      switch to round_robin, gate, prime
	// 8   35m     2    round_robin  20     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 9   41m30s  2    round_robin  40     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 10  48m     2    kv           -      switch to kv, gate, prime
	// 11  51m     2    kv           20     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	// 12  57m30s  2    kv           40     warmup 1m, measure 5m (3 snapshots of 1m40s), cooldown 30s
	//
	// switches: 4
	// estimated duration: 1h4m (switch + readiness estimated at 3m each)
}
