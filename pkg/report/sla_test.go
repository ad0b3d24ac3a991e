package report

import (
	"math"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	sweep := func(base, cand []float64) *Sweep {
		s := &Sweep{ID: "x", Modes: []string{"round_robin", "kv"}}
		for i, l := range []int{20, 40, 60} {
			if base != nil {
				s.Points = append(s.Points, rowPoint(1, "round_robin", l, base[i]))
			}
			if cand != nil {
				s.Points = append(s.Points, rowPoint(1, "kv", l, cand[i]))
			}
		}
		return s
	}
	for _, tt := range []struct {
		name          string
		s             *Sweep
		base, cand    string
		gain          float64 // NaN: undefined
		headline      string
		fallbackWhy   string // "" means no fallback
		fallbackLevel map[string]int
		// fallbackHeadline, when set, is the fallback's whole headline.
		fallbackHeadline string
	}{
		{
			name: "normal crossing", s: sweep([]float64{300, 420, 500}, []float64{200, 300, 410}),
			base: "20", cand: "40", gain: 1,
			headline: "kv supports 100% more concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): 40 sessions for kv against 20 for round_robin.",
		},
		{
			name: "baseline fails at lowest level", s: sweep([]float64{420, 440, 500}, []float64{200, 300, 430}),
			base: "None", cand: "40", gain: math.NaN(),
			headline:      "round_robin exceeds the SLA (TTFT p95 ≤ 400 ms) already at 20 sessions, the lowest level tested; kv supports 40 sessions (crossing at 60).",
			fallbackWhy:   "round_robin already exceeds 400 ms at the lowest level (20)",
			fallbackLevel: map[string]int{"round_robin": 40, "kv": 60},
		},
		{
			name: "nobody crosses", s: sweep([]float64{100, 200, 300}, []float64{90, 150, 200}),
			base: "60", cand: "60", gain: math.NaN(),
			headline: "Both kv and round_robin stay under the SLA (TTFT p95 ≤ 400 ms) up to 60 sessions, the highest level tested: no breakpoint in range. At 60 sessions kv against round_robin: TTFT p50 100.0 ms against 150.0 ms (33% lower), TTFT p95 200.0 ms against 300.0 ms (33% lower), output throughput 100.0 against 100.0 tok/s (no difference).",
			// A looser threshold cannot cross where the SLA did not: no
			// fallback.
		},
		{
			name: "tie at the SLA", s: sweep([]float64{300, 440, 500}, []float64{300, 410, 440}),
			base: "20", cand: "20", gain: 0,
			headline:      "kv supports as many concurrent sessions as round_robin at the same SLA (TTFT p95 ≤ 400 ms): 20 sessions each. At 20 sessions kv against round_robin: TTFT p50 150.0 ms against 150.0 ms (no difference), TTFT p95 300.0 ms against 300.0 ms (no difference), output throughput 100.0 against 100.0 tok/s (no difference).",
			fallbackWhy:   "kv and round_robin tie at 400 ms (both stay under it up to 20 sessions)",
			fallbackLevel: map[string]int{"round_robin": 40, "kv": 60},
		},
		{
			name: "fallback gives the same breakpoints", s: sweep([]float64{500, 600, 700}, []float64{460, 500, 600}),
			base: "None", cand: "None", gain: math.NaN(),
			headline:         "Neither kv nor round_robin meets the SLA (TTFT p95 ≤ 400 ms) at any level tested, from 20 sessions up: no breakpoint in range. At 20 sessions kv against round_robin: TTFT p50 230.0 ms against 250.0 ms (8% lower), TTFT p95 460.0 ms against 500.0 ms (8% lower), output throughput 100.0 against 100.0 tok/s (no difference).",
			fallbackWhy:      "round_robin already exceeds 400 ms at the lowest level (20)",
			fallbackLevel:    map[string]int{"round_robin": 0, "kv": 0},
			fallbackHeadline: "The breakpoints there are the same as at 400 ms: the fallback does not tell the modes apart either.",
		},
		{
			name: "both None", s: sweep([]float64{500, 600, 700}, []float64{450, 500, 600}),
			base: "None", cand: "None", gain: math.NaN(),
			headline:      "Neither kv nor round_robin meets the SLA (TTFT p95 ≤ 400 ms) at any level tested, from 20 sessions up: no breakpoint in range. At 20 sessions kv against round_robin: TTFT p50 225.0 ms against 250.0 ms (10% lower), TTFT p95 450.0 ms against 500.0 ms (10% lower), output throughput 100.0 against 100.0 tok/s (no difference).",
			fallbackWhy:   "round_robin already exceeds 400 ms at the lowest level (20)",
			fallbackLevel: map[string]int{"round_robin": 0, "kv": 20},
		},
		{
			name: "candidate never crosses: lower bound", s: sweep([]float64{300, 420, 500}, []float64{200, 300, 390}),
			base: "20", cand: "60", gain: 2,
			headline: "kv supports at least 200% more concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): round_robin stays under it up to 20 sessions (crossing at 40), kv up to 60, the highest level tested.",
		},
		{
			name: "candidate worse", s: sweep([]float64{300, 350, 500}, []float64{300, 420, 500}),
			base: "40", cand: "20", gain: -0.5,
			headline: "kv supports 50% fewer concurrent sessions than round_robin at the same SLA (TTFT p95 ≤ 400 ms): 20 sessions for kv against 40 for round_robin.",
		},
		{
			name: "candidate None", s: sweep([]float64{300, 350, 500}, []float64{401, 420, 500}),
			base: "40", cand: "None", gain: math.NaN(),
			headline: "kv exceeds the SLA (TTFT p95 ≤ 400 ms) already at 20 sessions, the lowest level tested; round_robin supports 40 sessions (crossing at 60).",
		},
		{
			name: "baseline missing", s: sweep(nil, []float64{100, 200, 300}),
			base: "not measured", cand: "60", gain: math.NaN(),
			headline: "No comparison at TTFT p95 ≤ 400 ms: the sweep has no data for round_robin.",
			// No threshold compares a mode not measured: no fallback.
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Evaluate(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			v := o.Primary
			if v.Baseline.String() != tt.base || v.Candidate.String() != tt.cand {
				t.Errorf("breakpoints %s / %s, want %s / %s", v.Baseline, v.Candidate, tt.base, tt.cand)
			}
			if !(math.IsNaN(tt.gain) && math.IsNaN(v.Gain)) && v.Gain != tt.gain {
				t.Errorf("gain %v, want %v", v.Gain, tt.gain)
			}
			if v.Headline != tt.headline {
				t.Errorf("headline\n got %q\nwant %q", v.Headline, tt.headline)
			}
			if o.FallbackReason != tt.fallbackWhy || (o.Fallback != nil) != (tt.fallbackWhy != "") {
				t.Fatalf("fallback %q (%v), want %q", o.FallbackReason, o.Fallback != nil, tt.fallbackWhy)
			}
			if o.Fallback != nil {
				if o.Fallback.SLA != DefaultFallbackSLA {
					t.Errorf("fallback SLA %v", o.Fallback.SLA)
				}
				for _, b := range o.Fallback.Breakpoints {
					if want, ok := tt.fallbackLevel[b.Mode]; ok && b.Level != want {
						t.Errorf("fallback breakpoint of %s = %d, want %d", b.Mode, b.Level, want)
					}
				}
				if tt.fallbackHeadline != "" && o.Fallback.Headline != tt.fallbackHeadline {
					t.Errorf("fallback headline\n got %q\nwant %q", o.Fallback.Headline, tt.fallbackHeadline)
				}
				// Never the primary verdict again, threshold aside.
				if strings.ReplaceAll(o.Fallback.Headline, fmtDur(o.Fallback.SLA), fmtDur(v.SLA)) == v.Headline {
					t.Errorf("fallback repeats the headline: %q", o.Fallback.Headline)
				}
			}
			if strings.Contains(v.Headline, "NaN") || strings.Contains(v.Headline, "Inf") {
				t.Errorf("headline divides by zero: %q", v.Headline)
			}
		})
	}
}

func TestT975(t *testing.T) {
	for _, tt := range []struct{ df, want float64 }{{1, 12.706}, {2, 4.303}, {4, 2.776}, {30, 2.042}, {60, 2.000}, {1e9, 1.960}} {
		if got := t975(tt.df); math.Abs(got-tt.want) > 1e-3 {
			t.Errorf("t975(%v) = %v, want %v", tt.df, got, tt.want)
		}
	}
	if got := t975(2.5); got >= 4.303 || got <= 3.182 {
		t.Errorf("t975(2.5) = %v, want between the neighbours", got)
	}
	if !math.IsNaN(t975(0.5)) {
		t.Error("t975(0.5) is not NaN")
	}
}

func TestSpreadAndWelch(t *testing.T) {
	s := newSpread([]float64{1, 2, 3})
	if s.Mean != 2 || s.SD != 1 || math.Abs(s.HalfCI-4.303/math.Sqrt(3)) > 1e-9 {
		t.Fatalf("spread %+v", s)
	}
	far := welchTest(newSpread([]float64{10, 10.1, 9.9}), newSpread([]float64{1, 1.1, 0.9}))
	near := welchTest(newSpread([]float64{1, 2, 3}), newSpread([]float64{1.5, 2.5, 3.5}))
	one := welchTest(newSpread([]float64{1}), newSpread([]float64{2, 3}))
	if !far.OK || !far.Significant || !near.OK || near.Significant || one.OK {
		t.Fatalf("far %+v near %+v one %+v", far, near, one)
	}
}
