package result

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// interval is a successful request in flight over [send, end), offsets
// from base.
type interval struct{ send, end time.Duration }

func msec(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func (iv interval) sample() *record.Sample {
	d := iv.end - iv.send
	return &record.Sample{Window: 1, Result: &client.Result{Start: base.Add(iv.send), TTFT: d, E2E: d}}
}

func peakOf(ivs []interval) int {
	p := NewPeaks(base)
	for _, iv := range ivs {
		p.Add(iv.sample())
	}
	_, c := p.Max()
	return c
}

// sweepPeak is the reference over every instant: all sends and ends sorted,
// an end before a send at one instant (the intervals are half-open), and
// the running count's maximum. Requests sent before base and empty ones
// are left out, as they hold no instant of the window.
func sweepPeak(ivs []interval) int {
	type event struct {
		at time.Duration
		d  int
	}
	var ev []event
	for _, iv := range ivs {
		if iv.send >= 0 && iv.end > iv.send {
			ev = append(ev, event{iv.send, +1}, event{iv.end, -1})
		}
	}
	slices.SortFunc(ev, func(a, b event) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d // -1 (end) first
	})
	n, m := 0, 0
	for _, e := range ev {
		n += e.d
		m = max(m, n)
	}
	return m
}

// tickPeak is the reference at the ticks: at every tick, the requests
// whose [send, end) holds it, counted one by one.
func tickPeak(ivs []interval) int {
	var last time.Duration
	for _, iv := range ivs {
		last = max(last, iv.end)
	}
	m := 0
	for at := time.Duration(0); at <= last; at += PeakResolution {
		n := 0
		for _, iv := range ivs {
			if iv.send >= 0 && iv.send <= at && at < iv.end {
				n++
			}
		}
		m = max(m, n)
	}
	return m
}

func TestPeakConcurrency(t *testing.T) {
	tests := []struct {
		name string
		ivs  []interval
		want int
		// missed: the peak lasts less than PeakResolution between two
		// ticks, so the sweep over every instant finds one more.
		missed bool
	}{
		{name: "none", want: 0},
		{name: "one", ivs: []interval{{0, msec(5)}}, want: 1},
		{name: "touching on ticks", ivs: []interval{{0, msec(10)}, {msec(10), msec(20)}, {msec(20), msec(30)}}, want: 1},
		{name: "touching off ticks", ivs: []interval{{msec(0.3), msec(10.7)}, {msec(10.7), msec(20.2)}, {msec(20.2), msec(999.9)}}, want: 1},
		{name: "touching across a page", ivs: []interval{{msec(400), msec(1000.0001)}, {msec(1000.0001), msec(1500)}}, want: 1},
		{name: "nested", ivs: []interval{{0, msec(100)}, {msec(10), msec(20)}, {msec(15), msec(18)}}, want: 3},
		{name: "identical", ivs: []interval{{msec(5), msec(50)}, {msec(5), msec(50)}, {msec(5), msec(50)}}, want: 3},
		{name: "overlap of one tick", ivs: []interval{{0, msec(10)}, {msec(9), msec(20)}}, want: 2},
		{name: "overlap under a tick holding one", ivs: []interval{{0, msec(10.6)}, {msec(9.8), msec(20)}}, want: 2},
		{name: "overlap under a tick between ticks", ivs: []interval{{0, msec(10.6)}, {msec(10.2), msec(20)}}, want: 1, missed: true},
		{name: "shorter than a tick holding one", ivs: []interval{{msec(5.8), msec(6.2)}}, want: 1},
		{name: "shorter than a tick between ticks", ivs: []interval{{msec(5.2), msec(5.8)}}, want: 0, missed: true},
		{name: "empty", ivs: []interval{{msec(5), msec(5)}, {msec(5), msec(9)}}, want: 1},
		{name: "sent before the origin", ivs: []interval{{msec(-5), msec(50)}, {0, msec(10)}}, want: 1},
		{name: "sent at the origin", ivs: []interval{{0, msec(1)}, {0, msec(0.5)}}, want: 2},
		{name: "across a page", ivs: []interval{{0, msec(3000)}, {msec(999.5), msec(1000.5)}, {msec(999.9), msec(2000)}, {msec(1000), msec(1000.1)}}, want: 4},
		{name: "staircase", ivs: []interval{{0, msec(40)}, {msec(10), msec(50)}, {msec(20), msec(60)}, {msec(30), msec(70)}, {msec(40), msec(80)}}, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ticks, sweep := peakOf(tt.ivs), tickPeak(tt.ivs), sweepPeak(tt.ivs)
			if got != tt.want || ticks != tt.want {
				t.Errorf("peak %d, reference at the ticks %d; want %d", got, ticks, tt.want)
			}
			if tt.missed != (sweep != got) || sweep < got {
				t.Errorf("peak %d, reference over every instant %d (missed %v)", got, sweep, tt.missed)
			}
		})
	}
}

// randomIntervals returns n requests sent over the first span, lasting
// up to maxLen, with endpoints at multiples of grain.
func randomIntervals(r *rand.Rand, n int, span, maxLen, grain time.Duration) []interval {
	ivs := make([]interval, n)
	for i := range ivs {
		s := time.Duration(r.Int64N(int64(span/grain))) * grain
		ivs[i] = interval{s, s + time.Duration(r.Int64N(int64(maxLen/grain)+1))*grain}
	}
	return ivs
}

// TestPeakConcurrencyRandom checks Peaks against the references: equal to
// the count at the ticks always, and to the sweep over every instant when
// sends and ends fall on ticks (the count then only changes at ticks, so
// every level it reaches holds one).
func TestPeakConcurrencyRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		grain := time.Microsecond
		if i%2 == 0 {
			grain = PeakResolution
		}
		n := 1 + r.IntN(120)
		ivs := randomIntervals(r, n, 1500*time.Millisecond, time.Duration(1+r.IntN(400))*time.Millisecond, grain)
		got, ticks, sweep := peakOf(ivs), tickPeak(ivs), sweepPeak(ivs)
		if got != ticks || got > sweep || (grain == PeakResolution && got != sweep) {
			t.Fatalf("case %d (grain %v, %d requests): peak %d, at the ticks %d, over every instant %d", i, grain, n, got, ticks, sweep)
		}
	}
}

// closedLoop returns the requests of n sessions sending back to back for
// span: each session's first request is sent in the warm-up (before the
// origin), and each next one gap after the previous one ends.
func closedLoop(r *rand.Rand, n int, span time.Duration, gap func() time.Duration) []interval {
	var ivs []interval
	for range n {
		at := -time.Duration(r.Int64N(int64(500 * time.Millisecond)))
		for at < span {
			end := at + 300*time.Microsecond + time.Duration(r.Int64N(int64(80*time.Millisecond)))
			ivs = append(ivs, interval{at, end})
			at = end + gap()
		}
	}
	return ivs
}

// TestPeaksClosedLoop: n sessions sending back to back, with no late
// sends, have exactly n requests in flight, never more, although every
// end shares its millisecond (often its nanosecond) with the next send.
func TestPeaksClosedLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	gaps := map[string]func() time.Duration{
		"touching": func() time.Duration { return 0 },
		"2µs gaps": func() time.Duration { return time.Duration(r.Int64N(2000)) },
	}
	for name, gap := range gaps {
		for _, n := range []int{1, 16, 64, 512} {
			ivs := closedLoop(r, n, 3*time.Second, gap)
			if got := peakOf(ivs); got != n {
				t.Errorf("%s, %d sessions: peak %d (over every instant %d)", name, n, got, sweepPeak(ivs))
			}
		}
	}
}

// TestPeaksConcurrentAdd adds samples from many goroutines, reading Max
// meanwhile, and finds what one goroutine adding them all finds.
func TestPeaksConcurrentAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ivs := randomIntervals(r, 4000, 2*time.Second, 300*time.Millisecond, time.Microsecond)
	samples := make([]*record.Sample, len(ivs))
	for i, iv := range ivs {
		samples[i] = iv.sample()
		samples[i].Result.ITL = []time.Duration{msec(1), msec(2), msec(300), msec(700)} // tokens in several seconds
	}
	one := NewPeaks(base)
	for _, s := range samples {
		one.Add(s)
	}
	many := NewPeaks(base)
	const workers = 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(samples); i += workers {
				many.Add(samples[i])
				if i%500 == 0 {
					many.Max()
				}
			}
		})
	}
	wg.Wait()
	wantTok, wantConc := one.Max()
	gotTok, gotConc := many.Max()
	if gotTok != wantTok || gotConc != wantConc {
		t.Errorf("concurrent Max() = %v, %v; one goroutine's %v, %v", gotTok, gotConc, wantTok, wantConc)
	}
	if wantConc != tickPeak(ivs) {
		t.Errorf("peak %d, at the ticks %d", wantConc, tickPeak(ivs))
	}
}

// TestPeaksMerge: the merge of two agents' (or windows') Peaks is the Peaks
// of all their samples, and its peak is that of the summed timeline.
func TestPeaksMerge(t *testing.T) {
	t.Run("summed timeline", func(t *testing.T) {
		// a peaks at 2 over [0, 10), b at 2 over [20, 30); together 3 over
		// [5, 10): neither the sum (4) nor the max (2) of their peaks.
		a := []interval{{0, msec(10)}, {0, msec(10)}}
		b := []interval{{msec(5), msec(15)}, {msec(20), msec(30)}, {msec(20), msec(30)}}
		pa, pb, merged := NewPeaks(base), NewPeaks(base), NewPeaks(base)
		for _, iv := range a {
			pa.Add(iv.sample())
		}
		for _, iv := range b {
			pb.Add(iv.sample())
		}
		for _, p := range []*Peaks{pa, pb} {
			if err := merged.Merge(p); err != nil {
				t.Fatal(err)
			}
		}
		_, ca := pa.Max()
		_, cb := pb.Max()
		if _, c := merged.Max(); c != 3 || ca != 2 || cb != 2 {
			t.Errorf("peaks a %d, b %d, merged %d; want 2, 2, 3", ca, cb, c)
		}
	})
	t.Run("random", func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for i := range 50 {
			ivs := randomIntervals(r, 1+r.IntN(300), 2500*time.Millisecond, 200*time.Millisecond, time.Microsecond)
			all, a, b := NewPeaks(base), NewPeaks(base), NewPeaks(base)
			for _, iv := range ivs {
				s := iv.sample()
				s.Result.ITL = []time.Duration{msec(3), msec(900)}
				all.Add(s)
				if r.IntN(2) == 0 {
					a.Add(s)
				} else {
					b.Add(s)
				}
			}
			merged := NewPeaks(base)
			for _, p := range []*Peaks{a, b} {
				if err := merged.Merge(p); err != nil {
					t.Fatal(err)
				}
			}
			wt, wc := all.Max()
			if gt, gc := merged.Max(); gt != wt || gc != wc || gc != tickPeak(ivs) {
				t.Fatalf("case %d: merged Max() = %v, %v; one timeline's %v, %v", i, gt, gc, wt, wc)
			}
		}
	})
}

// TestPeaksHorizon: a request still in flight at the horizon counts until
// it; one sent after it is not counted; the pages between two requests an
// hour apart are not allocated.
func TestPeaksHorizon(t *testing.T) {
	horizon := time.Duration(MaxPeakSeconds) * time.Second
	p := NewPeaks(base)
	p.Add(interval{0, horizon + time.Hour}.sample())
	p.Add(interval{horizon, horizon + time.Second}.sample())
	p.Add(interval{msec(1), msec(2)}.sample())
	if _, c := p.Max(); c != 2 {
		t.Errorf("peak %d, want 2", c)
	}
	q := NewPeaks(base)
	q.Add(interval{0, 500 * time.Millisecond}.sample())
	q.Add(interval{time.Hour, time.Hour + msec(10)}.sample())
	var used int
	for _, pg := range q.inflight.pages {
		if pg != nil {
			used++
		}
	}
	if used != 2 {
		t.Errorf("%d pages allocated for two requests an hour apart, want 2", used)
	}
}

// TestCraftedPeak ties the golden files' max_concurrent_requests to the
// references.
func TestCraftedPeak(t *testing.T) {
	var ivs []interval
	for _, s := range craftedSamples() {
		if r := s.Result; r.OK() {
			ivs = append(ivs, interval{r.Start.Sub(base), r.Start.Sub(base) + r.E2E})
		}
	}
	_, p := craftedWindow(t)
	if _, got := p.Max(); got != sweepPeak(ivs) {
		t.Errorf("peak %d, over every instant %d", got, sweepPeak(ivs))
	}
}

// BenchmarkPeaksAdd adds requests sent 12.5 µs apart (80,000 per second),
// each with 64 chunks 20 ms apart, from one goroutine and from all.
func BenchmarkPeaksAdd(b *testing.B) {
	const n = 1 << 14
	samples := make([]*record.Sample, n)
	itl := make([]time.Duration, 63)
	for i := range itl {
		itl[i] = 20 * time.Millisecond
	}
	for i := range samples {
		start := time.Duration(i) * 12500 * time.Nanosecond
		samples[i] = &record.Sample{Result: &client.Result{
			Start: base.Add(start), TTFT: 50 * time.Millisecond, ITL: itl, E2E: 50*time.Millisecond + 63*20*time.Millisecond}}
	}
	b.Run("serial", func(b *testing.B) {
		p := NewPeaks(base)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p.Add(samples[i%n])
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		p := NewPeaks(base)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(n)
			for pb.Next() {
				p.Add(samples[i%n])
				i++
			}
		})
	})
}
