package cpu

import (
	"testing"
	"time"
)

func TestCores(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name       string
		prevAt, at time.Time
		prev, used time.Duration
		want       float64
		wantOK     bool
	}{
		{"first reading", time.Time{}, t0, 0, time.Second, 0, false},
		{"one core", t0, t0.Add(2 * time.Second), time.Second, 3 * time.Second, 1, true},
		{"idle", t0, t0.Add(time.Second), time.Second, time.Second, 0, true},
		{"a quarter", t0, t0.Add(4 * time.Second), 0, time.Second, 0.25, true},
		{"same instant", t0, t0, 0, time.Second, 0, false},
		{"clock went back", t0, t0.Add(-time.Second), 0, time.Second, 0, false},
		{"CPU time went down: another process", t0, t0.Add(time.Second), 5 * time.Second, time.Second, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Cores(tc.prevAt, tc.prev, tc.at, tc.used)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Cores = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestMeterSeesWork: a second sample after this process burned CPU reads
// more than 0 cores (where the CPU time can be read).
func TestMeterSeesWork(t *testing.T) {
	if _, ok := Process(); !ok {
		t.Skip("no process CPU time on this system")
	}
	var m Meter
	if _, ok := m.Sample(time.Now()); ok {
		t.Error("the first sample has no interval, want ok false")
	}
	start := time.Now()
	x := 0
	for time.Since(start) < 50*time.Millisecond {
		x++
	}
	cores, ok := m.Sample(time.Now())
	if !ok || cores <= 0 {
		t.Errorf("after 50 ms of spinning: %v cores, ok %v", cores, ok)
	}
	t.Logf("%.2f cores (%d spins)", cores, x)
}
