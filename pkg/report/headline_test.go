package report

import (
	"math"
	"strings"
	"testing"
)

func TestHeadline(t *testing.T) {
	// modeRows is one mode's TTFT p95 (ms) and output throughput (tok/s)
	// at levels 8, 16 and 32 (NaN: not measured); TTFT p50 is half the p95.
	type modeRows struct {
		name string
		p95  []float64
		tps  []float64
	}
	sweep := func(base, cand modeRows) *Sweep {
		s := &Sweep{ID: "x", Modes: []string{base.name, cand.name}, Baseline: base.name, Candidate: cand.name}
		for _, m := range []modeRows{base, cand} {
			for i, l := range []int{8, 16, 32} {
				if math.IsNaN(m.p95[i]) {
					continue
				}
				r := Row{Mode: m.name, Concurrency: l, Run: 1, TTFTP50: m.p95[i] / 2000, TTFTP95: m.p95[i] / 1000,
					OutputTPS: m.tps[i], TOPS: m.tps[i], ActualRPS: 5}
				s.Points = append(s.Points, Point{Run: 1, Mode: m.name, Level: l, Row: &r})
			}
		}
		return s
	}
	tps := []float64{400, 700, 1000}
	nan := math.NaN()
	for _, tt := range []struct {
		name       string
		base, cand modeRows
		gain       float64 // NaN: undefined
		bound      bool
		want       string
	}{
		{
			name: "candidate better with breakpoints",
			base: modeRows{"round_robin", []float64{300, 420, 500}, tps},
			cand: modeRows{"kv", []float64{100, 200, 450}, tps},
			gain: 1,
			want: "kv supports 100% more concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): 16 sessions for kv against 8 for round_robin.",
		},
		{
			// The sweep: no breakpoint, yet a large difference.
			name: "both under in range",
			base: modeRows{"round_robin", []float64{200, 300, 394}, tps},
			cand: modeRows{"kv", []float64{40, 60, 75}, []float64{500, 900, 1420}},
			gain: nan,
			want: "Both kv and round_robin stay under the SLA (TTFT p95 ≤ 400 ms) up to 32 sessions, the highest level tested: no breakpoint in range. " +
				"At 32 sessions kv against round_robin: TTFT p50 37.5 ms against 197.0 ms (81% lower), TTFT p95 75.0 ms against 394.0 ms (81% lower), output throughput 1420.0 against 1000.0 tok/s (42% higher).",
		},
		{
			name: "both over",
			base: modeRows{"round_robin", []float64{500, 600, 700}, tps},
			cand: modeRows{"kv", []float64{450, 500, 600}, []float64{410, 700, 1000}},
			gain: nan,
			want: "Neither kv nor round_robin meets the SLA (TTFT p95 ≤ 400 ms) at any level tested, from 8 sessions up: no breakpoint in range. " +
				"At 8 sessions kv against round_robin: TTFT p50 225.0 ms against 250.0 ms (10% lower), TTFT p95 450.0 ms against 500.0 ms (10% lower), output throughput 410.0 against 400.0 tok/s (3% higher).",
		},
		{
			name: "only baseline crosses",
			base: modeRows{"round_robin", []float64{300, 350, 420}, tps},
			cand: modeRows{"kv", []float64{100, 200, 300}, tps},
			gain: 1, bound: true,
			want: "kv supports at least 100% more concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): round_robin stays under it up to 16 sessions (crossing at 32), kv up to 32, the highest level tested.",
		},
		{
			name: "only candidate crosses",
			base: modeRows{"round_robin", []float64{100, 200, 300}, tps},
			cand: modeRows{"kv", []float64{300, 350, 420}, tps},
			gain: -0.5, bound: true,
			want: "kv supports at least 50% fewer concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): kv stays under it up to 16 sessions (crossing at 32), round_robin up to 32, the highest level tested.",
		},
		{
			name: "custom mode names",
			base: modeRows{"random", []float64{300, 450, 500}, tps},
			cand: modeRows{"prefix", []float64{100, 200, 450}, tps},
			gain: 1,
			want: "prefix supports 100% more concurrent sessions than random at the same SLA (TTFT p95 ≤ 400 ms): 16 sessions for prefix against 8 for random.",
		},
		{
			name: "same breakpoint",
			base: modeRows{"random", []float64{300, 390, 500}, tps},
			cand: modeRows{"prefix", []float64{100, 200, 450}, []float64{400, 700.1, 1000}},
			gain: 0,
			want: "prefix supports as many concurrent sessions as random at the same SLA (TTFT p95 ≤ 400 ms): 16 sessions each. " +
				"At 16 sessions prefix against random: TTFT p50 100.0 ms against 195.0 ms (49% lower), TTFT p95 200.0 ms against 390.0 ms (49% lower), output throughput 700.1 against 700.0 tok/s (no difference).",
		},
		{
			// The candidate's lower bound is no gain: nothing to claim.
			name: "only baseline crosses, candidate not tested high enough",
			base: modeRows{"round_robin", []float64{300, 350, 420}, tps},
			cand: modeRows{"kv", []float64{100, nan, nan}, tps},
			gain: nan,
			want: "kv stays under the SLA (TTFT p95 ≤ 400 ms) up to 8 sessions, the highest level tested for it, and round_robin up to 16 (crossing at 32): the sweep does not tell which supports more.",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Evaluate(sweep(tt.base, tt.cand))
			if err != nil {
				t.Fatal(err)
			}
			v := o.Primary
			if v.Headline != tt.want {
				t.Errorf("headline\n got %q\nwant %q", v.Headline, tt.want)
			}
			if !(math.IsNaN(tt.gain) && math.IsNaN(v.Gain)) && v.Gain != tt.gain {
				t.Errorf("gain %v, want %v", v.Gain, tt.gain)
			}
			if v.Bound != tt.bound {
				t.Errorf("bound %v, want %v", v.Bound, tt.bound)
			}
			for _, bad := range []string{"KV-aware", " 0% more", "NaN", "Inf"} {
				if strings.Contains(v.Headline, bad) {
					t.Errorf("headline contains %q: %q", bad, v.Headline)
				}
			}
		})
	}
}

func TestFmtPct(t *testing.T) {
	for _, tt := range []struct {
		p    float64
		want string
	}{{0.04, "0.0%"}, {0.94, "0.9%"}, {0.96, "1%"}, {2.5, "3%"}, {42.4, "42%"}, {200, "200%"}} {
		if got := fmtPct(tt.p); got != tt.want {
			t.Errorf("fmtPct(%v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}
