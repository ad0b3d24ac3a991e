package hdr

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestFingerprint(t *testing.T) {
	if got, want := Default.Fingerprint(), "hdr-v1:1:600000000:3"; got != want {
		t.Fatalf("Default.Fingerprint() = %q, want %q", got, want)
	}
	other := Default
	other.SigFigs = 2
	if Default.Fingerprint() == other.Fingerprint() {
		t.Fatal("different configs share a fingerprint")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", Default, true},
		{"zero", Config{}, false},
		{"lowest 0", Config{LowestMicros: 0, HighestMicros: 1000, SigFigs: 3}, false},
		{"highest below 2x lowest", Config{LowestMicros: 10, HighestMicros: 19, SigFigs: 3}, false},
		{"sigfigs 0", Config{LowestMicros: 1, HighestMicros: 1000, SigFigs: 0}, false},
		{"sigfigs 6", Config{LowestMicros: 1, HighestMicros: 1000, SigFigs: 6}, false},
		{"highest overflows duration", Config{LowestMicros: 1, HighestMicros: math.MaxInt64 / 2, SigFigs: 3}, false},
		{"lowest too large", Config{LowestMicros: 1 << 50, HighestMicros: 1 << 52, SigFigs: 5}, false},
		{"ms resolution", Config{LowestMicros: 1000, HighestMicros: 3_600_000_000, SigFigs: 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok {
				tt.cfg.New() // must not panic
			}
		})
	}
}

func TestClamping(t *testing.T) {
	h := Default.New()
	h.RecordValue(-5)                                // below range: recorded as 0
	h.RecordValue(0)                                 // in range: 0 is trackable
	h.Record(500 * time.Nanosecond)                  // truncates to 0 µs, in range
	h.RecordValue(Default.HighestMicros)             // at the bound: in range
	h.RecordValue(Default.HighestMicros + 1)         // above: clamped
	h.Record(time.Hour)                              // above: clamped
	h.RecordDurations([]time.Duration{-time.Second}) // below: clamped

	if got, want := h.Count(), int64(7); got != want {
		t.Errorf("Count() = %d, want %d (clamped values must not be dropped)", got, want)
	}
	if got, want := h.Clamped(), int64(4); got != want {
		t.Errorf("Clamped() = %d, want %d", got, want)
	}
	if got := h.Percentile(0); got != 0 {
		t.Errorf("min = %v, want 0", got)
	}
	if got, want := h.Percentile(100), time.Duration(Default.HighestMicros)*time.Microsecond; got < want || got > want+want/1000 {
		t.Errorf("max = %v, want within 0.1%% above %v", got, want)
	}
	c := h.Clone()
	h.Reset()
	if h.Count() != 0 || h.Clamped() != 0 {
		t.Errorf("after Reset: count %d clamped %d, want 0 0", h.Count(), h.Clamped())
	}
	if c.Count() != 7 || c.Clamped() != 4 {
		t.Errorf("clone changed by Reset: count %d clamped %d", c.Count(), c.Clamped())
	}
}

func TestPercentileConvention(t *testing.T) {
	h := Default.New()
	for _, v := range []int64{1, 2, 3, 4} {
		h.RecordValue(v)
	}
	tests := []struct {
		p    float64
		want int64
	}{
		{0, 1}, {1, 1}, {25, 1}, {25.0001, 2}, {50, 2}, {50.1, 3}, {75, 3}, {99.9, 4}, {100, 4}, {150, 4}, {-1, 1},
	}
	for _, tt := range tests {
		if got := h.Percentile(tt.p); got != time.Duration(tt.want)*time.Microsecond {
			t.Errorf("Percentile(%v) = %v, want %dµs (nearest rank)", tt.p, got, tt.want)
		}
	}

	// Above 2,048 µs buckets are wider than 1 µs: the highest equivalent
	// value is reported. 10,000 lies in [10,000, 10,007].
	h = Default.New()
	h.RecordValue(10_000)
	if got, want := h.Percentile(50), 10_007*time.Microsecond; got != want {
		t.Errorf("Percentile(50) = %v, want highest equivalent %v", got, want)
	}
	s := h.Summary()
	if s.Min != 10_000*time.Microsecond || s.Max != 10_007*time.Microsecond || s.P99 != 10_007*time.Microsecond {
		t.Errorf("Summary() = %+v: want Min lowest (10ms) and Max/P99 highest equivalent (10.007ms)", s)
	}

	if got := Default.New().Summary(); got != (Summary{}) {
		t.Errorf("empty Summary() = %+v, want zero", got)
	}
	if got := Default.New().Percentile(50); got != 0 {
		t.Errorf("empty Percentile(50) = %v, want 0", got)
	}
}

func TestNearestRank(t *testing.T) {
	tests := []struct {
		p    float64
		n    int64
		want int64
	}{
		{99.9, 200_000, 199_800}, {99, 200_000, 198_000}, {50, 3, 2}, {50, 4, 2}, {0.0001, 10, 1}, {100, 7, 7}, {99.99, 3, 3},
	}
	for _, tt := range tests {
		if got := nearestRank(tt.p, tt.n); got != tt.want {
			t.Errorf("nearestRank(%v, %d) = %d, want %d", tt.p, tt.n, got, tt.want)
		}
	}
}

// TestMergedPercentilesMatchRawData checks the whole pipeline that results
// depend on: samples split across several histograms, merged, and compared
// with the nearest-rank percentiles of the sorted raw samples.
func TestMergedPercentilesMatchRawData(t *testing.T) {
	const n = 200_000
	const tol = 0.001 // 3 significant figures
	dists := []struct {
		name string
		gen  func(r *rand.Rand) int64
	}{
		{"lognormal", func(r *rand.Rand) int64 {
			return int64(math.Exp(math.Log(250_000) + 0.9*r.NormFloat64())) // median 250 ms
		}},
		{"bimodal", func(r *rand.Rand) int64 {
			if r.IntN(10) < 7 {
				return int64(max(0, 30_000+5_000*r.NormFloat64())) // cache hits ~30 ms
			}
			return int64(max(0, 2_000_000+400_000*r.NormFloat64())) // misses ~2 s
		}},
		{"itl-like", func(r *rand.Rand) int64 {
			if r.IntN(100) == 0 {
				return int64(r.ExpFloat64() * 200_000) // occasional stall
			}
			return int64(max(0, 15_000+3_000*r.NormFloat64())) // ~15 ms gaps
		}},
		{"small exact", func(r *rand.Rand) int64 { return int64(r.IntN(2_000)) }},
	}
	for _, d := range dists {
		r := rand.New(rand.NewPCG(1, uint64(len(d.name))))
		raw := make([]int64, n)
		for i := range raw {
			raw[i] = min(d.gen(r), Default.HighestMicros)
		}
		sorted := slices.Clone(raw)
		slices.Sort(sorted)

		for _, parts := range []int{1, 3, 8} {
			t.Run(d.name+"/parts="+strconv.Itoa(parts), func(t *testing.T) {
				hs := make([]*Histogram, parts)
				for i := range hs {
					hs[i] = Default.New()
				}
				for _, v := range raw {
					hs[r.IntN(parts)].RecordValue(v)
				}
				merged := Default.New()
				for _, h := range hs {
					if err := merged.Merge(h); err != nil {
						t.Fatal(err)
					}
				}
				if merged.Count() != n {
					t.Fatalf("merged count %d, want %d", merged.Count(), n)
				}
				s := merged.Summary()
				for _, c := range []struct {
					p   float64
					got time.Duration
				}{{50, s.P50}, {90, s.P90}, {95, s.P95}, {99, s.P99}, {99.9, s.P999}, {95, merged.Percentile(95)}} {
					want := float64(sorted[nearestRankRaw(c.p, n)-1])
					got := float64(c.got.Microseconds())
					if rel := math.Abs(got-want) / math.Max(want, 1); rel > tol {
						t.Errorf("p%v = %.0fµs, raw nearest rank %.0fµs, relative error %.5f > %v", c.p, got, want, rel, tol)
					}
					if got < want {
						t.Errorf("p%v = %.0fµs below raw %.0fµs: highest-equivalent convention broken", c.p, got, want)
					}
				}
				var sum float64
				for _, v := range raw {
					sum += float64(v)
				}
				mean := sum / n
				if rel := math.Abs(float64(s.Mean.Microseconds())-mean) / mean; rel > tol {
					t.Errorf("mean %v, raw %.0fµs, relative error %.5f", s.Mean, mean, rel)
				}
				if s.Min.Microseconds() > sorted[0] || s.Max.Microseconds() < sorted[n-1] {
					t.Errorf("min/max %v/%v do not bracket raw %d/%d µs", s.Min, s.Max, sorted[0], sorted[n-1])
				}
			})
		}
	}
}

// nearestRankRaw is the textbook nearest rank ceil(p/100*n), computed in
// integers for the percentiles used here (p has at most one decimal).
func nearestRankRaw(p float64, n int64) int64 {
	tenths := int64(math.Round(p * 10))
	return (tenths*n + 999) / 1000
}

func TestMergeRefusesMismatch(t *testing.T) {
	a := Default.New()
	a.RecordValue(100)
	other := Default
	other.HighestMicros = 60_000_000
	b := other.New()
	b.RecordValue(200)
	if err := a.Merge(b); !errors.Is(err, ErrConfigMismatch) {
		t.Fatalf("Merge() = %v, want ErrConfigMismatch", err)
	}
	if a.Count() != 1 {
		t.Fatalf("refused merge changed the histogram: count %d", a.Count())
	}
}

func TestMergeCountsClampedAndSelf(t *testing.T) {
	a, b := Default.New(), Default.New()
	a.RecordValue(-1)
	b.RecordValue(Default.HighestMicros * 2)
	b.RecordValue(5)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.Count() != 3 || a.Clamped() != 2 {
		t.Fatalf("after merge: count %d clamped %d, want 3 2", a.Count(), a.Clamped())
	}
	if err := a.Merge(a); err != nil {
		t.Fatal(err)
	}
	if a.Count() != 6 || a.Clamped() != 4 {
		t.Fatalf("after self-merge: count %d clamped %d, want 6 4", a.Count(), a.Clamped())
	}
}

func TestMergeDroppedSurfaces(t *testing.T) {
	a, b := Default.New(), Default.New()
	// Drive a's total to the edge of int64 through the underlying histogram,
	// so merging b overflows and HdrHistogram drops b's values.
	if err := a.RecordValues(10, math.MaxInt64-1); err != nil {
		t.Fatal(err)
	}
	b.RecordValue(10)
	b.RecordValue(20)
	err := a.Merge(b)
	if !errors.Is(err, ErrDropped) {
		t.Fatalf("Merge() = %v, want ErrDropped", err)
	}
	var de *DroppedError
	if !errors.As(err, &de) || de.Count < 1 {
		t.Fatalf("Merge() = %v, want a *DroppedError with a count", err)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		values []int64
	}{
		{"empty", nil},
		{"one", []int64{42}},
		{"spread", []int64{0, 1, 2047, 2048, 10_000, 1_000_000, 599_999_999, 600_000_000}},
		{"clamped", []int64{-3, 700_000_000, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Default.New()
			for _, v := range tt.values {
				h.RecordValue(v)
			}
			b, err := h.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(Default, b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Clamped() != 0 {
				t.Errorf("decoded Clamped() = %d, want 0 (not carried by V2)", got.Clamped())
			}
			got.SetClamped(h.Clamped())
			if !got.Equal(h) {
				t.Errorf("round trip changed the histogram: %+v vs %+v", got.Summary(), h.Summary())
			}
			if got.Summary() != h.Summary() {
				t.Errorf("Summary %+v, want %+v", got.Summary(), h.Summary())
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	other := Config{LowestMicros: 1, HighestMicros: 3_600_000_000, SigFigs: 3}
	h := other.New()
	h.RecordValue(1000)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(Default, b); !errors.Is(err, ErrConfigMismatch) {
		t.Errorf("Decode(other geometry) = %v, want ErrConfigMismatch", err)
	}
	if _, err := Decode(other, b); err != nil {
		t.Errorf("Decode(own geometry) = %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("!!!"), []byte("AAAA"), b[:len(b)/2], append(slices.Clone(b[:len(b)-4]), "AAAA"...)} {
		if _, err := Decode(other, bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decode(%.20q) = %v, want ErrCorrupt", bad, err)
		}
	}
	if _, err := Decode(Config{}, b); err == nil {
		t.Error("Decode with an invalid config succeeded")
	}
}

// TestSummaryMatchesLibrary pins Summary's single-scan min and max to
// hdrhistogram-go's Min and Max.
func TestSummaryMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 2, 17, 10_000} {
		h := Default.New()
		for range n {
			h.RecordValue(int64(r.ExpFloat64() * 300_000))
		}
		s := h.Summary()
		u := h.Unwrap()
		if s.Min != time.Duration(u.Min())*time.Microsecond || s.Max != time.Duration(u.Max())*time.Microsecond {
			t.Errorf("n=%d: Summary min/max %v/%v, library %dµs/%dµs", n, s.Min, s.Max, u.Min(), u.Max())
		}
		if s.Count != int64(n) || s.P50 != h.Percentile(50) || s.P999 != h.Percentile(99.9) {
			t.Errorf("n=%d: Summary %+v disagrees with Percentile", n, s)
		}
	}
}
