package calibrate

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// TestCompareMinP95Turns: a p95 twice the published one is out of
// tolerance, unless the cell holds fewer turns than MinP95Turns; its p50
// is checked either way.
func TestCompareMinP95Turns(t *testing.T) {
	pub, err := LoadPublished(published)
	if err != nil {
		t.Fatal(err)
	}
	l := pub.Levels[0]
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	pt := func(turns int, p50 float64) []Point {
		return []Point{{Sessions: l.Sessions, Mode: sim.ModeKV, Requests: turns, TTFTP50: ms(p50), TTFTP95: ms(2 * l.KVP95)}}
	}
	tol := Tolerance{TTFT: 0.25, HitPoints: 1, Saturation: 1, MinP95Turns: 400}
	if bad := Compare(io.Discard, pub, pt(399, l.KVP50), tol); len(bad) != 0 {
		t.Errorf("399 turns: %q, want the p95 not checked", bad)
	}
	if bad := Compare(io.Discard, pub, pt(399, 2*l.KVP50), tol); len(bad) != 1 || !strings.Contains(bad[0], "p50") {
		t.Errorf("399 turns, p50 doubled: %q, want the p50 out", bad)
	}
	if bad := Compare(io.Discard, pub, pt(400, l.KVP50), tol); len(bad) != 1 || !strings.Contains(bad[0], "p95") {
		t.Errorf("400 turns: %q, want the p95 out", bad)
	}
	tol.MinP95Turns = 0
	if bad := Compare(io.Discard, pub, pt(10, l.KVP50), tol); len(bad) != 1 || !strings.Contains(bad[0], "p95") {
		t.Errorf("no minimum: %q, want the p95 out", bad)
	}
}

// TestSLARange: on the published sweep (kv p95 330, 325, 385, 400, 417,
// 448 ms at 20-70 sessions; round robin 427 ms at 20, against 400) a band
// of 0 accepts only the published breakpoints, kv 50 and round robin none;
// a 5% band accepts kv 30-60 (385, 400 and 417 are within 5% of 400) and
// still only none for round robin (427 is 6.75% over). Compare marks a
// breakpoint outside the range and passes one inside.
func TestSLARange(t *testing.T) {
	pub, err := LoadPublished(published)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode   sim.Mode
		band   float64
		lo, hi int
	}{
		{sim.ModeKV, 0, 50, 50},
		{sim.ModeRoundRobin, 0, 0, 0},
		{sim.ModeKV, 0.05, 30, 60},
		{sim.ModeRoundRobin, 0.05, 0, 0},
	} {
		if lo, hi := pub.SLARange(c.mode, c.band); lo != c.lo || hi != c.hi {
			t.Errorf("%s, band %v: %d-%d, want %d-%d", c.mode, c.band, lo, hi, c.lo, c.hi)
		}
	}
	// kv's p95 at 50 sessions above the SLA moves its breakpoint to 40;
	// round robin's p95 is the published one at every level.
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	var pts []Point
	for _, l := range pub.Levels {
		kv := l.KVP95
		if l.Sessions == 50 {
			kv = 410
		}
		pts = append(pts, Point{Sessions: l.Sessions, Mode: sim.ModeKV, TTFTP50: ms(l.KVP50), TTFTP95: ms(kv)},
			Point{Sessions: l.Sessions, Mode: sim.ModeRoundRobin, TTFTP50: ms(l.RRP50), TTFTP95: ms(l.RRP95)})
	}
	tol := Tolerance{TTFT: 0.25, HitPoints: 1, Saturation: 10, SLA: true}
	if bad := Compare(io.Discard, pub, pts, tol); len(bad) != 1 || !strings.Contains(bad[0], "up to 40 sessions, published 50") {
		t.Errorf("band 0, kv holding up to 40: %q, want the kv breakpoint out", bad)
	}
	tol.SLABand = 0.05
	if bad := Compare(io.Discard, pub, pts, tol); len(bad) != 0 {
		t.Errorf("5%% band, kv holding up to 40: %q, want it accepted", bad)
	}
	pts[0].TTFTP95 = ms(401) // kv at 20 sessions: holds none
	if bad := Compare(io.Discard, pub, pts, tol); len(bad) != 1 || !strings.Contains(bad[0], "up to none sessions") {
		t.Errorf("5%% band, kv holding none: %q, want the kv breakpoint out", bad)
	}
}

// TestRunSweepsError: a run that cannot start fails RunSweeps with its own
// error, named by sweep and mode, and no averaged points.
func TestRunSweepsError(t *testing.T) {
	o := Options{Profile: "no-such-profile", TimeScale: 10, Levels: []int{1},
		Modes: []sim.Mode{sim.ModeKV, sim.ModeRoundRobin}, Window: time.Second, Seed: 1}
	avg, _, err := RunSweeps(t.Context(), o, 2, false, nil)
	if err == nil || avg != nil {
		t.Fatalf("RunSweeps = %v, %v; want an error and no points", avg, err)
	}
	if !strings.Contains(err.Error(), "no-such-profile") || !strings.Contains(err.Error(), "sweep ") || errors.Is(err, context.Canceled) {
		t.Errorf("error %q: want the failing run's own error, named by sweep", err)
	}
}
