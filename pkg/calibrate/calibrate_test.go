package calibrate

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/benchresult"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

const published = "testdata/dynamo-llama-3.1-70b-fp8-h100-tp2.json"

// TestCalibrate runs the published sweep on the simulator over HTTP, at a
// time scale, and compares. Each mode's levels run in order on one
// simulator primed with 120 s (simulated) of the top level, as the
// publication's three back-to-back sweeps ran on one deployment.
// TestCalibrateSimulated checks the same model in simulated time only;
// what this test adds is HTTP, the client and the host's scheduling, all
// multiplied by the time scale, so a busy host inflates its figures.
//
// FLEETBENCH_CALIBRATE=short is the short variant that `make test` runs
// on its own after the other tests (the simulator's latencies are wall
// clock, so it must not share the CPU with the race-detected suite):
// levels 20, 60 and 120, one run, time scale 10, a 30 s warm-up and 120 s
// windows (simulated), the two modes at once, about one minute of wall
// time. Without the variable the test is skipped. Short windows hold two to seven hundred
// turns (with 60 s windows, 100 turns at 20 sessions put round robin's p95
// anywhere from 1.36 to 1.50 times the published figure from run to run)
// and a loaded host stretches them, so it checks looser tolerances: TTFT
// within +-50%, hit rates within 8 points, requests/s within +-30%, no
// SLA check, and p95 only in cells of 400 turns or more (20 sessions hold
// about 190: kv's p95 there was 1.57 times the published one in one run
// of `make test` in three, where one turn more or less of a cold first
// prefill above the p95 moves it).
//
// FLEETBENCH_CALIBRATE=full (make calibrate) runs every published level in
// both modes with the publication's 60 s warm-up and 300 s windows and the
// issue's tolerances: TTFT +-25%, hit rates 3 points, saturation +-20%,
// and the SLA breakpoints within a 5% band (see below), at time scale 4
// (about 14 minutes; with 180 s windows at time scale 6, ~290 turns at 20
// sessions made kv's p95 a coarse figure). Like the publication it averages three sweeps (seeds
// Seed, Seed+1, Seed+2); the sweeps and their two modes run at the same
// time, six simulators, which at time scale 4 load the host as three at 8
// did while every millisecond the host adds counts half as much.
// FLEETBENCH_CALIBRATE_SCALE overrides the time scale;
// FLEETBENCH_CALIBRATE_LEVELS, _SEED and _SWEEPS the levels, the
// workload's seed and the number of sweeps.
func TestCalibrate(t *testing.T) {
	pub, err := LoadPublished(published)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Profile: pub.Profile, TimeScale: 10, Levels: []int{20, 60, 120},
		Modes:  []sim.Mode{sim.ModeKV, sim.ModeRoundRobin},
		Warmup: 30 * time.Second, Window: 120 * time.Second, Prime: 120 * time.Second,
		PromptTokens: pub.PromptTokens, MaxTokens: pub.MaxTokens, Seed: 1,
	}
	tol := Tolerance{TTFT: 0.50, HitPoints: 0.08, Saturation: 0.30, MinP95Turns: 400}
	sweeps := 1
	if os.Getenv("FLEETBENCH_CALIBRATE") == "full" {
		o.TimeScale, o.Warmup, o.Window = 4, 60*time.Second, 300*time.Second
		sweeps = 3
		o.Levels = nil
		for _, l := range pub.Levels {
			o.Levels = append(o.Levels, l.Sessions)
		}
		// Every p95 checked. The breakpoint within a 5% band: the published
		// kv p95s at 40, 50 and 60 sessions (385, 400, 417 ms) are within
		// 5% of the 400 ms SLA, and a three-sweep average of one level
		// varies by about that much from run to run in wall clock (kv at
		// 50 sessions: 370, 386, 390 and 406 ms over four runs), so they
		// cannot decide it: kv must hold 20-30 and not 70, and round robin
		// none (427 ms at 20 is 6.75% over). TestCalibrateSimulated checks
		// the exact breakpoints, kv 50 and round robin none.
		tol = Tolerance{TTFT: 0.25, HitPoints: 0.03, Saturation: 0.20, SLA: true, SLABand: 0.05}
	} else if os.Getenv("FLEETBENCH_CALIBRATE") != "short" {
		t.Skip("set FLEETBENCH_CALIBRATE=short (make test runs it alone) or full (make calibrate)")
	}
	// The collector's target of the fleetbench commands (main calls
	// load.TuneGC): at the default of 100 the three sweeps' clients and
	// simulators collect four times as often, and every pause is
	// multiplied by the time scale.
	before := debug.SetGCPercent(100)
	debug.SetGCPercent(before)
	load.TuneGC()
	t.Cleanup(func() { debug.SetGCPercent(before) })
	if s := os.Getenv("FLEETBENCH_CALIBRATE_SCALE"); s != "" {
		if o.TimeScale, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	if err := envOverrides(&o, &sweeps); err != nil {
		t.Fatal(err)
	}
	t.Logf("profile %s, time scale %v, warm-up %v, window %v (simulated), levels %v, %d sweep(s) and their modes at once",
		o.Profile, o.TimeScale, o.Warmup, o.Window, o.Levels, sweeps)
	pts, each, err := RunSweeps(t.Context(), o, sweeps, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	bad := Compare(&sb, pub, pts, tol)
	t.Log("\n" + sb.String() + eachSweep(pub, o.Seed, each))
	emitFigures(t, "Calibrate/wall", bad, pts)
	for _, p := range pts {
		if p.Failed > 0 {
			t.Errorf("%s at %d sessions: %d failed turns", p.Mode, p.Sessions, p.Failed)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d figure(s) out of tolerance (see the table)", len(bad))
	}
}

// TestCalibrateSimulated plays the published sweep on sim.Virtual, the
// discrete-event simulator: the same engines, router and document chats as
// TestCalibrate, in simulated time only, so its figures are the model's
// and do not depend on the host (TestCalibrate's wall-clock figures add
// HTTP, the client and the host's scheduling, multiplied by the time
// scale). It uses the publication's 60 s warm-up and 300 s windows and
// the tolerances (TTFT +-25%, hit rates 3 points, saturation
// +-20%) and gives the same figures on every run. By default it runs
// levels 20, 60 and 120 (a few seconds; longer under the race detector)
// and does not check the SLA breakpoints, which need every level;
// FLEETBENCH_CALIBRATE=full runs every level and checks them too. Like
// the publication it averages three sweeps (seeds Seed, Seed+1, Seed+2).
// FLEETBENCH_CALIBRATE_LEVELS, _SEED and _SWEEPS override the levels, the
// workload's seed and the number of sweeps.
// It is one goroutine with nothing to race, and the race detector makes it
// ~7x slower, so it is skipped there: `make test` runs it after the
// race-detected suite with the short wall-clock calibration.
func TestCalibrateSimulated(t *testing.T) {
	pub, o := simulatedRun(t, []int{20, 60, 120})
	tol := Tolerance{TTFT: 0.25, HitPoints: 0.03, Saturation: 0.20}
	if os.Getenv("FLEETBENCH_CALIBRATE") == "full" {
		o.Levels = nil
		for _, l := range pub.Levels {
			o.Levels = append(o.Levels, l.Sessions)
		}
		tol.SLA = true
	}
	sweeps := 3
	if err := envOverrides(&o, &sweeps); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pts, each, err := RunSweeps(t.Context(), o, sweeps, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	bad := Compare(&sb, pub, pts, tol)
	t.Logf("simulated time, average of %d sweep(s) from seed %d, levels %v, %v of CPU time\n%s%s",
		sweeps, o.Seed, o.Levels, time.Since(start).Round(time.Millisecond), sb.String(), eachSweep(pub, o.Seed, each))
	emitFigures(t, "Calibrate/simulated", bad, pts)
	for _, p := range pts {
		if p.Failed > 0 {
			t.Errorf("%s at %d sessions: %d failed turns", p.Mode, p.Sessions, p.Failed)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d figure(s) out of tolerance (see the table)", len(bad))
	}
}

// eachSweep says where each sweep alone would put the SLA breakpoints.
func eachSweep(pub *Published, seed int64, each [][]Point) string {
	if len(each) < 2 {
		return ""
	}
	var sb strings.Builder
	for i, pts := range each {
		h := Holds(pub, pts)
		fmt.Fprintf(&sb, "sweep %d (seed %d) alone: holds the SLA up to %s (kv), %s (round_robin)\n",
			i+1, seed+int64(i), none(h[sim.ModeKV]), none(h[sim.ModeRoundRobin]))
	}
	return sb.String()
}

// envOverrides applies FLEETBENCH_CALIBRATE_LEVELS, _SEED and _SWEEPS.
func envOverrides(o *Options, sweeps *int) error {
	if s := os.Getenv("FLEETBENCH_CALIBRATE_LEVELS"); s != "" {
		o.Levels = nil
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("parse FLEETBENCH_CALIBRATE_LEVELS: %w", err)
			}
			o.Levels = append(o.Levels, n)
		}
	}
	if s := os.Getenv("FLEETBENCH_CALIBRATE_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("parse FLEETBENCH_CALIBRATE_SEED: %w", err)
		}
		o.Seed = n
	}
	if s := os.Getenv("FLEETBENCH_CALIBRATE_SWEEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("parse FLEETBENCH_CALIBRATE_SWEEPS %q: want a whole number of at least 1", s)
		}
		*sweeps = n
	}
	return nil
}

// TestSaturation plays the published workload on sim.Virtual beyond the
// published levels, up to the fleet's batch capacity (4 replicas x 64
// sequences = 256 sessions), and prints requests per second at each level:
// the publication stops at 120 sessions, where it reports ~5.2 requests/s
// and calls the deployment saturated, so how the simulator continues past
// it is stated here rather than fitted. It checks that the curve
// flattens: each level adds less throughput per added session than the
// one before it, and 256 sessions (2.1x 120) give less than 1.5x the
// requests per second of 120. One sweep, simulated time, a few seconds.
func TestSaturation(t *testing.T) {
	levels := []int{20, 60, 120, 160, 200, 256}
	_, o := simulatedRun(t, levels)
	pts, _, err := RunSweeps(t.Context(), o, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	rps := map[sim.Mode]map[int]float64{}
	var sb strings.Builder
	for _, p := range pts {
		if rps[p.Mode] == nil {
			rps[p.Mode] = map[int]float64{}
		}
		rps[p.Mode][p.Sessions] = p.RPS
		fmt.Fprintf(&sb, "%-12s %4d sessions: %.2f requests/s, TTFT p50 %v p95 %v\n", p.Mode, p.Sessions, p.RPS,
			p.TTFTP50.Round(time.Millisecond), p.TTFTP95.Round(time.Millisecond))
	}
	t.Logf("simulated time, one sweep (seed 1); published: ~5.2 requests/s at 120 sessions, nothing beyond\n%s", sb.String())
	for mode, r := range rps {
		for i := 2; i < len(levels); i++ {
			a, b, c := levels[i-2], levels[i-1], levels[i]
			before := (r[b] - r[a]) / float64(b-a)
			after := (r[c] - r[b]) / float64(c-b)
			if after >= before {
				t.Errorf("%s: %.4f requests/s per session from %d to %d sessions, %.4f from %d to %d: want the gain to shrink", mode, after, b, c, before, a, b)
			}
		}
		if r[256] >= 1.5*r[120] {
			t.Errorf("%s: %.2f requests/s at 256 sessions, %.2f at 120: want less than 1.5x", mode, r[256], r[120])
		}
	}
}

// simulatedRun loads the published sweep and returns the options that play
// its workload on sim.Virtual at levels with the publication's procedure
// (primed, 60 s warm-up, 300 s windows), both modes, seed 1. Such a run is
// one goroutine with nothing to race, and the race detector makes it ~7x
// slower, so the test is skipped there: `make test` runs it after the
// race-detected suite with the short wall-clock calibration.
func simulatedRun(t *testing.T, levels []int) (*Published, Options) {
	t.Helper()
	if raceEnabled {
		t.Skip("single-goroutine and ~7x slower under the race detector; make test runs it without")
	}
	pub, err := LoadPublished(published)
	if err != nil {
		t.Fatal(err)
	}
	return pub, Options{
		Profile: pub.Profile, Levels: levels,
		Modes:  []sim.Mode{sim.ModeKV, sim.ModeRoundRobin},
		Warmup: 60 * time.Second, Window: 300 * time.Second, Prime: 120 * time.Second,
		PromptTokens: pub.PromptTokens, MaxTokens: pub.MaxTokens, Seed: 1,
	}
}

// emitFigures files a calibration's verdict for `make calibrate`'s results
// file (benchresult.Emit): the figures out of tolerance, the failed turns
// and the cells compared.
func emitFigures(t *testing.T, name string, bad []string, pts []Point) {
	t.Helper()
	failed := 0
	for _, p := range pts {
		failed += p.Failed
	}
	if err := benchresult.Emit(benchresult.CalibratePackage, name,
		benchresult.Metric{Value: float64(len(bad)), Unit: "out-of-tolerance"},
		benchresult.Metric{Value: float64(failed), Unit: "failed-turns"},
		benchresult.Metric{Value: float64(len(pts)), Unit: "points"},
	); err != nil {
		t.Errorf("record the calibration's figures: %v", err)
	}
}
