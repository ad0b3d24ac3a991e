package calibrate

import (
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
