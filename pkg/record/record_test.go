package record

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
)

var base = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// randSample returns a plausible sample of window w: mostly successes with
// a few dozen ITL gaps, some failures, some schedule lag.
func randSample(r *rand.Rand, w uint32) *Sample {
	start := base.Add(time.Duration(r.IntN(60_000)) * time.Millisecond)
	s := &Sample{
		Window:       w,
		Conversation: r.IntN(1000),
		Turn:         1 + r.IntN(20),
		Restarted:    r.IntN(50) == 0,
		Intended:     start.Add(-time.Duration(r.IntN(3)) * time.Duration(r.IntN(5_000)) * time.Microsecond),
	}
	res := &client.Result{Start: start, TTFB: time.Duration(10+r.IntN(500)) * time.Millisecond}
	s.Result = res
	if r.IntN(10) == 0 {
		res.Class = client.Classes[r.IntN(len(client.Classes))]
		res.Err = errors.New("boom")
		res.E2E = res.TTFB
		return s
	}
	res.TTFT = res.TTFB + time.Duration(r.IntN(50_000))*time.Microsecond
	n := r.IntN(60)
	res.ITL = make([]time.Duration, n)
	e2e := res.TTFT
	for i := range res.ITL {
		res.ITL[i] = time.Duration(r.IntN(40_000)) * time.Microsecond
		e2e += res.ITL[i]
	}
	res.E2E = e2e
	res.OutputTokens = n + 1
	res.PromptTokens = 100 + r.IntN(4000)
	if r.IntN(2) == 0 {
		res.CachedTokens = r.IntN(res.PromptTokens)
	}
	res.UsageReported = r.IntN(20) != 0
	return s
}

func TestMetricNames(t *testing.T) {
	want := []string{"ttft", "ttfb", "itl", "tpot", "e2e", "lag", "ttft_intended", "e2e_intended"}
	if int(NumMetrics) != len(want) {
		t.Fatalf("NumMetrics = %d, want %d", NumMetrics, len(want))
	}
	for m := range NumMetrics {
		if m.String() != want[m] {
			t.Errorf("Metric(%d).String() = %q, want %q", m, m.String(), want[m])
		}
		if p, err := ParseMetric(want[m]); err != nil || p != m {
			t.Errorf("ParseMetric(%q) = %v, %v", want[m], p, err)
		}
	}
	if _, err := ParseMetric("nope"); err == nil {
		t.Error("ParseMetric(nope) succeeded")
	}
}

func TestTurnIndex(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{-1, 1}, {0, 1}, {1, 1}, {7, 7}, {MaxTurnIndex, MaxTurnIndex}, {MaxTurnIndex + 5, MaxTurnIndex}} {
		if got := TurnIndex(tt.in); got != tt.want {
			t.Errorf("TurnIndex(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestWindowAdd(t *testing.T) {
	w := NewWindow(3, hdr.Default)
	ok := &Sample{
		Window: 3, Turn: 2,
		Intended: base.Add(-2 * time.Millisecond),
		Result: &client.Result{
			Start: base, TTFB: 40 * time.Millisecond, TTFT: 100 * time.Millisecond, E2E: 400 * time.Millisecond,
			ITL:          []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
			OutputTokens: 4, PromptTokens: 1000, CachedTokens: 600, UsageReported: true,
			FinishReason: "length", Worker: "w0", WorkerHeader: "X-Fleetbench-Worker",
		},
	}
	noContent := &Sample{Window: 3, Turn: 40, Result: &client.Result{Start: base.Add(time.Second), TTFB: time.Millisecond, E2E: 2 * time.Millisecond, PromptTokens: 1000}}
	failed := &Sample{Window: 3, Turn: 1, Restarted: true, Intended: base.Add(-time.Second),
		Result: &client.Result{Start: base.Add(-500 * time.Millisecond), E2E: time.Millisecond, Class: client.ClassHTTP5xx, Err: errors.New("503"), PromptTokens: 5, UsageReported: true}}
	noClass := &Sample{Window: 3, Result: &client.Result{Start: base, Err: errors.New("odd")}}
	for _, s := range []*Sample{ok, noContent, failed, noClass, nil, {Window: 3}} {
		w.Add(s)
	}

	counts := map[Metric]int64{TTFT: 1, TTFB: 2, ITL: 3, TPOT: 1, E2E: 2, Lag: 4, TTFTIntended: 1, E2EIntended: 2}
	for m, want := range counts {
		if got := w.Hist[m].Count(); got != want {
			t.Errorf("%s count = %d, want %d", m, got, want)
		}
	}
	if got, want := w.Summary(TTFTIntended).P50, 102*time.Millisecond; got < want || got > want+want/1000 {
		t.Errorf("ttft_intended p50 = %v, want lag+ttft %v", got, want)
	}
	if got, want := w.Summary(TPOT).P50, 100*time.Millisecond; got < want || got > want+want/1000 {
		t.Errorf("tpot p50 = %v, want %v", got, want)
	}
	if got, want := w.Summary(Lag).Max, 500*time.Millisecond; got < want || got > want+want/1000 {
		t.Errorf("lag max = %v, want %v (failed samples record lag)", got, want)
	}

	want := Counters{
		Requests: 2, Failed: 2,
		FailedByClass: map[client.Class]int64{client.ClassHTTP5xx: 1, ClassUnknown: 1},
		InputTokens:   2000, OutputTokens: 4, CachedTokens: 600, RequestsWithCache: 1,
		UsageMissing: 1, Restarted: 1,
		// Finish reasons and worker headers of successful requests only.
		FinishReasons: map[string]int64{"length": 1, FinishNone: 1},
		WorkerHeaders: map[string]int64{"X-Fleetbench-Worker": 1},
	}
	if !w.Counters.Equal(&want) {
		t.Errorf("Counters = %+v, want %+v", w.Counters, want)
	}
	if got := w.HitRate(); got != 0.3 {
		t.Errorf("HitRate() = %v, want 0.3", got)
	}
	if got := w.HitRequestShare(); got != 0.5 {
		t.Errorf("HitRequestShare() = %v, want 0.5", got)
	}
	if got := w.TurnHitRate(2); got != 0.6 {
		t.Errorf("TurnHitRate(2) = %v, want 0.6", got)
	}
	if got := w.TurnHitRate(99); got != 0 {
		t.Errorf("TurnHitRate(99) = %v, want 0 (folded turn had no cache)", got)
	}
	if ts := w.Turns[MaxTurnIndex]; ts == nil || ts.Requests != 1 || ts.TTFT.Count() != 0 {
		t.Errorf("folded turn stats = %+v, want 1 request and no TTFT", ts)
	}
	if len(w.Turns) != 2 {
		t.Errorf("Turns has %d entries, want 2 (failed samples add none)", len(w.Turns))
	}
	if !w.FirstSend.Equal(base.Add(-500*time.Millisecond)) || !w.LastEnd.Equal(base.Add(time.Second+2*time.Millisecond)) {
		t.Errorf("span %v..%v", w.FirstSend, w.LastEnd)
	}
	if got := NewWindow(0, hdr.Default).HitRate(); got != 0 {
		t.Errorf("empty HitRate() = %v", got)
	}
}

func TestWindowClampedVisible(t *testing.T) {
	w := NewWindow(1, hdr.Default)
	w.Add(&Sample{Result: &client.Result{Start: base, TTFB: time.Second, TTFT: time.Second, E2E: time.Hour}})
	c := w.Clamped()
	if c[E2E] != 1 || c[E2EIntended] != 1 || c[TTFT] != 0 {
		t.Fatalf("Clamped() = %v, want e2e and e2e_intended clamped once", c)
	}
	o := NewWindow(2, hdr.Default)
	if err := o.Merge(w); err != nil {
		t.Fatal(err)
	}
	if o.Clamped() != c {
		t.Fatalf("merged Clamped() = %v, want %v", o.Clamped(), c)
	}
}

// TestWindowMergeAlgebra checks that merging is lossless, associative and
// commutative: every merge order of three windows equals one window that got
// all the samples.
func TestWindowMergeAlgebra(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	all := NewWindow(0, hdr.Default)
	parts := make([]*Window, 3)
	for i := range parts {
		parts[i] = NewWindow(0, hdr.Default)
		for range 300 + 100*i {
			s := randSample(r, 0)
			parts[i].Add(s)
			all.Add(s)
		}
	}
	parts[1].Counters.Fallbacks = 3
	all.Counters.Fallbacks = 3
	a, b, c := parts[0], parts[1], parts[2]

	merge := func(ws ...*Window) *Window {
		t.Helper()
		acc := ws[0].Clone()
		for _, w := range ws[1:] {
			if err := acc.Merge(w); err != nil {
				t.Fatal(err)
			}
		}
		return acc
	}
	abThenC := merge(merge(a, b), c)
	aThenBC := merge(a, merge(b, c))
	orders := map[string]*Window{
		"(a+b)+c": abThenC,
		"a+(b+c)": aThenBC,
		"(c+a)+b": merge(merge(c, a), b),
		"b+c+a":   merge(b, c, a),
	}
	for name, got := range orders {
		if !got.Equal(all) {
			t.Errorf("%s differs from the window that saw every sample: counters %+v vs %+v", name, got.Counters, all.Counters)
		}
	}
	if a.Equal(all) {
		t.Fatal("Equal is too lenient: one part equals the whole")
	}
	// Merge must not change its argument.
	before := b.Clone()
	_ = merge(a, b)
	if !b.Equal(before) {
		t.Error("Merge changed its argument")
	}
}

func TestWindowMergeMismatch(t *testing.T) {
	w := NewWindow(1, hdr.Default)
	w.Add(randSample(rand.New(rand.NewPCG(3, 3)), 1))
	before := w.Clone()
	other := hdr.Config{LowestMicros: 1, HighestMicros: 60_000_000, SigFigs: 3}
	o := NewWindow(1, other)
	o.Counters.Requests = 5
	if err := w.Merge(o); !errors.Is(err, hdr.ErrConfigMismatch) {
		t.Fatalf("Merge() = %v, want ErrConfigMismatch", err)
	}
	if !w.Equal(before) {
		t.Fatal("refused Merge changed the window")
	}
}

func TestWindowCloneIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := NewWindow(1, hdr.Default)
	for range 50 {
		w.Add(randSample(r, 1))
	}
	c := w.Clone()
	if !c.Equal(w) {
		t.Fatal("clone differs")
	}
	for range 50 {
		w.Add(randSample(r, 1))
	}
	w.Counters.FailedByClass[client.ClassTimeout] += 100
	if c.Equal(w) {
		t.Fatal("clone shares state with the original")
	}
}

// TestRecorderConcurrentDrain races writers, updaters and a drainer: every
// sample and update must land in exactly one drained window.
func TestRecorderConcurrentDrain(t *testing.T) {
	const writers, perWriter, windows = 16, 400, 4
	rec := NewRecorder(hdr.Default)

	var wantOK, wantFailed, wantITL, wantUpdates atomic.Int64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range perWriter {
				s := randSample(r, uint32(r.IntN(windows)))
				if s.Result.OK() {
					wantOK.Add(1)
					wantITL.Add(int64(len(s.Result.ITL)))
				} else {
					wantFailed.Add(1)
				}
				rec.Record(s)
				if i%10 == 0 {
					rec.Update(uint32(i%windows), func(c *Counters) { c.ConversationsStarted++ })
					wantUpdates.Add(1)
				}
			}
		})
	}

	var drained []*Window
	stop := make(chan struct{})
	drainerDone := make(chan struct{})
	go func() {
		defer close(drainerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ws := rec.Drain()
			for i := 1; i < len(ws); i++ {
				if ws[i-1].ID >= ws[i].ID {
					t.Errorf("Drain not sorted by ID: %d then %d", ws[i-1].ID, ws[i].ID)
				}
			}
			drained = append(drained, ws...)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	wg.Wait()
	close(stop)
	<-drainerDone
	drained = append(drained, rec.Drain()...)
	if extra := rec.Drain(); len(extra) != 0 {
		t.Fatalf("Drain after a Drain returned %d windows", len(extra))
	}

	// Sum counts rather than merging histograms: merges are tested
	// elsewhere and are slow under -race.
	var total struct {
		Counters
		hist [NumMetrics]int64
	}
	for _, w := range drained {
		if w.ID >= windows {
			t.Fatalf("unexpected window id %d", w.ID)
		}
		total.Add(&w.Counters)
		for m, h := range w.Hist {
			total.hist[m] += h.Count()
		}
	}
	c := total.Counters
	if c.Requests != wantOK.Load() || c.Failed != wantFailed.Load() || c.ConversationsStarted != wantUpdates.Load() {
		t.Errorf("drained requests/failed/updates = %d/%d/%d, recorded %d/%d/%d",
			c.Requests, c.Failed, c.ConversationsStarted, wantOK.Load(), wantFailed.Load(), wantUpdates.Load())
	}
	if got := total.hist[Lag]; got != writers*perWriter {
		t.Errorf("lag count %d, want %d", got, writers*perWriter)
	}
	if got := total.hist[E2E]; got != wantOK.Load() {
		t.Errorf("e2e count %d, want %d", got, wantOK.Load())
	}
	if got := total.hist[ITL]; got != wantITL.Load() {
		t.Errorf("itl count %d, want %d", got, wantITL.Load())
	}
	t.Logf("%d drained windows", len(drained))
}

func TestRecorderIgnoresIncomplete(t *testing.T) {
	rec := NewRecorder(hdr.Default)
	rec.Record(nil)
	rec.Record(&Sample{Window: 1})
	if ws := rec.Drain(); len(ws) != 0 {
		t.Fatalf("Drain() = %d windows, want 0", len(ws))
	}
}

// TestRecorderAllocatesWindowOnce checks that goroutines that all find a
// window missing at once (every session at a window edge) allocate its
// histograms once between them, not once each: each window is 1.4 MB.
func TestRecorderAllocatesWindowOnce(t *testing.T) {
	const goroutines, windows = 32, 8
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	one := allocated(func() { NewWindow(0, hdr.Default) })
	rec := NewRecorder(hdr.Default)
	r := rand.New(rand.NewPCG(1, 2))
	samples := make([]*Sample, goroutines)
	for i := range samples {
		samples[i] = randSample(r, 0)
		samples[i].Turn = 1 // one TurnStats histogram per window
	}
	total := allocated(func() {
		for id := range uint32(windows) {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, s := range samples {
				s := *s
				s.Window = id + 1
				wg.Go(func() {
					<-start
					rec.Record(&s)
				})
			}
			close(start)
			wg.Wait()
		}
	})
	// Everything but the windows (turn 1's histogram, samples, goroutines,
	// map growth) is well under half a window per window.
	if max := windows * (one + one/2); total > max {
		t.Errorf("recording into %d new windows from %d goroutines allocated %d bytes, want at most %d (one window is %d)",
			windows, goroutines, total, max, one)
	}
	if ws := rec.Drain(); len(ws) != windows {
		t.Errorf("Drain() = %d windows, want %d", len(ws), windows)
	}
}
