package agent

import (
	"testing"
	"time"
)

func TestBackoffIsCappedExponential(t *testing.T) {
	base, limit := 100*time.Millisecond, 2*time.Second
	prev := time.Duration(0)
	for n := range 10 {
		hi := backoff(n, base, limit, 0.999999)
		lo := backoff(n, base, limit, 0)
		if hi > limit || lo < base/2 {
			t.Fatalf("attempt %d: backoff in [%v, %v], want within [%v, %v]", n, lo, hi, base/2, limit)
		}
		if hi < prev {
			t.Fatalf("attempt %d: backoff shrank from %v to %v", n, prev, hi)
		}
		prev = hi
	}
	if got := backoff(30, base, limit, 0.999999); got < limit*99/100 {
		t.Fatalf("backoff after many attempts = %v, want about the cap %v", got, limit)
	}
}

func TestCoordinatorLost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"just heard", t0.Add(time.Second), false},
		{"at the timeout", t0.Add(5 * time.Second), false},
		{"past the timeout", t0.Add(5*time.Second + time.Millisecond), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := coordinatorLost(t0, tc.now, 5*time.Second); got != tc.want {
				t.Fatalf("coordinatorLost = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrackerFollowsConversations(t *testing.T) {
	tr := newTracker(3)
	tr.start(1, 2)
	tr.start(2, 1)
	tr.observe(1, 1)
	tr.observe(2, 1) // last turn of 2
	if got := tr.active(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("active = %v, want [1]", got)
	}
	for c := 10; c < 20; c++ {
		tr.start(c, 5)
	}
	if got := tr.active(); len(got) != 3 {
		t.Fatalf("active = %v, want the cap of 3", got)
	}
}
