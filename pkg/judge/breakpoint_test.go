package judge

import (
	"testing"
	"time"
)

func TestFindBreakpoint(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	levels := []int{20, 40, 60, 80}
	for _, tt := range []struct {
		name        string
		p95         []time.Duration
		level, fail int
		none        bool
		again       []int
	}{
		{"normal crossing", ms(100, 300, 450, 600), 40, 60, false, nil},
		{"at the SLA passes", ms(100, 400, 401, 600), 40, 60, false, nil},
		{"nobody crosses", ms(100, 200, 300, 399), 80, 0, false, nil},
		{"fails at lowest", ms(500, 600, 700, 800), 0, 20, true, nil},
		{"passes again above first failure", ms(100, 450, 390, 700), 20, 40, false, []int{60}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := FindBreakpoint("m", levels, tt.p95, 400*time.Millisecond)
			if b.Level != tt.level || b.FirstFailure != tt.fail || b.None() != tt.none || len(b.PassesAgain) != len(tt.again) {
				t.Fatalf("got %+v, want level %d first failure %d none %v again %v", b, tt.level, tt.fail, tt.none, tt.again)
			}
			if tt.none && b.String() != "None" {
				t.Errorf("String() = %q, want None", b.String())
			}
		})
	}
	if b := FindBreakpoint("m", nil, nil, time.Second); b.Measured || b.None() || b.String() != "not measured" {
		t.Errorf("empty: %+v", b)
	}
}
