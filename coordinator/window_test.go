package coordinator

import (
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestCoverageKeepsAStintBeforeALoss: an agent whose connection is cut
// for longer than the heartbeat timeout is lost, then the same process
// comes back. Its coverage of the window keeps the reports and seconds of
// both stints, and the time away is lost time: nothing it reported before
// the cut disappears from the accounting.
func TestCoverageKeepsAStintBeforeALoss(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := newWindow(1, 0, KindMeasure, t0, hdr.Default)
	w.end = t0.Add(60 * time.Second)
	m := &member{id: "a", incarnation: 7, index: 0}
	rep := report{Window: record.NewWindow(1, hdr.Default)}
	rep.Window.Counters.Requests = 10

	w.addMember(m, t0)
	for range 3 {
		if err := w.apply(m, rep, nil); err != nil {
			t.Fatal(err)
		}
	}
	m.lostAt = t0.Add(20 * time.Second)
	if !w.lose(m, t0.Add(25*time.Second)) {
		t.Fatal("lose: the agent did not contribute")
	}
	w.addMember(m, t0.Add(30*time.Second)) // back after 10 s away
	for range 2 {
		if err := w.apply(m, rep, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := w.result()
	if len(res.Coverage) != 1 {
		t.Fatalf("coverage %+v, want one entry for the one process", res.Coverage)
	}
	c := res.Coverage[0]
	if c.Reports != 5 || c.Requests != 50 {
		t.Errorf("reports %d, requests %d; want 5 and 50 (both stints)", c.Reports, c.Requests)
	}
	if c.Seconds != 50 || c.LostSeconds != 10 || c.Lost {
		t.Errorf("seconds %g, lost %g, lost flag %t; want 20+30 s run, 10 s lost, not lost at the end", c.Seconds, c.LostSeconds, c.Lost)
	}
	if !res.Degraded {
		t.Error("the window is not degraded although an agent was away")
	}
}
