package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// start runs e in the background and returns a channel with Run's error.
func start(ctx context.Context, e *Engine) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return done
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"closed", Config{Concurrency: 8}, true},
		{"closed zero sessions", Config{}, true},
		{"open poisson", Config{RequestRate: 5}, true},
		{"open gamma", Config{RequestRate: 5, Arrival: ArrivalGamma, Burstiness: 0.5, MaxConcurrency: 4}, true},
		{"negative concurrency", Config{Concurrency: -1}, false},
		{"negative rate", Config{RequestRate: -1}, false},
		{"open with concurrency", Config{RequestRate: 5, Concurrency: 3}, false},
		{"closed with max concurrency", Config{Concurrency: 3, MaxConcurrency: 3}, false},
		{"poisson with burstiness", Config{RequestRate: 5, Burstiness: 2}, false},
		{"unknown arrival", Config{RequestRate: 5, Arrival: "uniform"}, false},
		{"negative budget", Config{Concurrency: 1, TotalRequests: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestClosedLoopKeepsNInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		f := &fakeStreamer{ttft: 100 * time.Millisecond, e2e: time.Second}
		var log sampleLog
		e, rec := newEngine(t, Config{Concurrency: n}, &fakeSource{turns: 3}, f, WithObserver(log.observe))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second+500*time.Millisecond)
		defer cancel()
		done := start(ctx, e)
		for range 10 {
			time.Sleep(500 * time.Millisecond)
			synctest.Wait()
			if got := f.inflight.Load(); got != n {
				t.Fatalf("at %v: %d in flight, want %d", time.Since(time.Unix(946684800, 0)), got, n)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if p := f.peak.Load(); p != n {
			t.Errorf("peak in flight %d, want %d", p, n)
		}
		// Turns start at 0s, 1s, ... 10s: 11 per session, the last
		// drained after ctx ended at 10.5s.
		w := total(t, rec)
		if w.Counters.Requests != 11*n || w.Counters.Failed != 0 {
			t.Errorf("requests %d failed %d, want %d and 0", w.Counters.Requests, w.Counters.Failed, 11*n)
		}
		if w.Counters.ConversationsStarted != 4*n || w.Counters.ConversationsCompleted != 3*n {
			t.Errorf("conversations started %d completed %d, want %d and %d",
				w.Counters.ConversationsStarted, w.Counters.ConversationsCompleted, 4*n, 3*n)
		}
		for _, s := range log.all() {
			if s.Lag() != 0 {
				t.Fatalf("closed loop without think time lags: %v", s.Lag())
			}
		}
		if st := e.Stats(); st.Sessions != 0 || st.InFlight != 0 || st.Retired != 0 {
			t.Errorf("stats after run %+v", st)
		}
	})
}

func TestThinkTimeSetsIntendedSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: time.Second}
		var log sampleLog
		e, _ := newEngine(t, Config{Concurrency: 1}, &fakeSource{turns: 2, think: 2 * time.Second}, f, WithObserver(log.observe))
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second+500*time.Millisecond)
		defer cancel()
		if err := <-start(ctx, e); err != nil {
			t.Fatalf("run: %v", err)
		}
		// Conversation 0: 0s, 1s+2s; conversation 1: 4s, 5s+2s.
		want := []time.Duration{0, 3 * time.Second, 4 * time.Second, 7 * time.Second}
		var got []time.Duration
		for _, s := range log.all() {
			got = append(got, s.Result.Start.Sub(t0))
			if !s.Intended.Equal(s.Result.Start) {
				t.Errorf("turn %d of conversation %d: intended %v, sent %v", s.Turn, s.Conversation, s.Intended.Sub(t0), s.Result.Start.Sub(t0))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("sends at %v, want %v", got, want)
		}
	})
}

func TestHistoryResendsReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: time.Second, keep: true}
		src := &fakeSource{turns: 3, sys: "be brief"}
		e, _ := newEngine(t, Config{Concurrency: 2, TotalRequests: 6, MaxTokens: 77, SessionHeader: "X-Session-ID", Seed: 9}, src, f)
		if err := e.Run(t.Context()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(f.reqs) != 6 {
			t.Fatalf("%d requests, want 6", len(f.reqs))
		}
		for _, r := range f.reqs {
			var conv, k int
			last := r.Messages[len(r.Messages)-1].Content
			if _, err := fmt.Sscanf(last, "c%d-t%d", &conv, &k); err != nil {
				t.Fatalf("last message %q: %v", last, err)
			}
			want := []openai.Message{{Role: openai.RoleSystem, Content: "be brief"}}
			for j := range k + 1 {
				u := fmt.Sprintf("c%d-t%d", conv, j)
				want = append(want, openai.Message{Role: openai.RoleUser, Content: u})
				if j < k {
					want = append(want, openai.Message{Role: openai.RoleAssistant, Content: "reply to " + u})
				}
			}
			if !slices.Equal(r.Messages, want) {
				t.Errorf("turn %d of conversation %d sent %v, want %v", k, conv, r.Messages, want)
			}
			if r.MaxTokens != 77 {
				t.Errorf("max tokens %d, want 77", r.MaxTokens)
			}
			if got, want := r.Headers["X-Session-ID"], SessionID(9, conv); got != want || len(want) != 16 {
				t.Errorf("session header %q, want %q", got, want)
			}
		}
	})
}

func TestTotalRequestsBudgetIsExact(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		opts []Option
	}{
		{"closed", Config{Concurrency: 7, TotalRequests: 100}, nil},
		{"closed single turn", Config{Concurrency: 7, TotalRequests: 100}, []Option{WithSingleTurn()}},
		{"open", Config{RequestRate: 50, TotalRequests: 100}, nil},
		{"open capped", Config{RequestRate: 50, MaxConcurrency: 3, TotalRequests: 100}, []Option{WithSingleTurn()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeStreamer{e2e: 300 * time.Millisecond}
				e, rec := newEngine(t, tt.cfg, &fakeSource{turns: 4, think: 100 * time.Millisecond}, f, tt.opts...)
				// The run ends by itself, long before ctx would.
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				if err := e.Run(ctx); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if ctx.Err() != nil {
					t.Fatal("Run waited for ctx instead of stopping at the budget")
				}
				if got := f.calls.Load(); got != 100 {
					t.Errorf("%d requests sent, want 100", got)
				}
				if w := total(t, rec); w.Counters.Requests != 100 {
					t.Errorf("%d requests recorded, want 100", w.Counters.Requests)
				}
			})
		})
	}
}

func TestOpenLoopFollowsSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, seconds, seed = 20.0, 200, 42
		f := &fakeStreamer{e2e: 100 * time.Millisecond}
		var log sampleLog
		e, _ := newEngine(t, Config{RequestRate: rate, Seed: seed}, &fakeSource{turns: 1}, f, WithObserver(log.observe))
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), seconds*time.Second)
		defer cancel()
		if err := <-start(ctx, e); err != nil {
			t.Fatalf("run: %v", err)
		}

		samples := log.all()
		slices.SortFunc(samples, func(a, b record.Sample) int { return a.Intended.Compare(b.Intended) })
		want := rate * seconds
		if n := float64(len(samples)); n < 0.95*want || n > 1.05*want {
			t.Errorf("%v arrivals in %ds at %v/s, want %v ±5%%", n, seconds, rate, want)
		}
		sch := newSchedule(rate, 1, seed)
		for i, s := range samples {
			if at := t0.Add(sch.next()); !s.Intended.Equal(at) {
				t.Fatalf("arrival %d intended at %v, schedule says %v", i, s.Intended.Sub(t0), at.Sub(t0))
			}
			if s.Lag() != 0 {
				t.Fatalf("arrival %d lags %v without a cap", i, s.Lag())
			}
		}
	})
}

func TestScheduleStatistics(t *testing.T) {
	tests := []struct {
		name  string
		shape float64
	}{
		{"poisson", 1}, {"gamma bursty", 0.5}, {"gamma regular", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const rate, n = 10.0, 200000
			s := newSchedule(rate, tt.shape, 1)
			var sum, sumsq float64
			prev := time.Duration(0)
			for range n {
				at := s.next()
				gap := (at - prev).Seconds()
				prev = at
				sum += gap
				sumsq += gap * gap
			}
			mean := sum / n
			cv2 := (sumsq/n - mean*mean) / (mean * mean)
			if mean < 0.98/rate || mean > 1.02/rate {
				t.Errorf("mean gap %v, want %v", mean, 1/rate)
			}
			if want := 1 / tt.shape; cv2 < 0.93*want || cv2 > 1.07*want {
				t.Errorf("squared coefficient of variation %v, want %v", cv2, want)
			}
		})
	}
}

func TestOpenLoopCappedRecordsLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, seconds, seed = 10.0, 20, 7
		f := &fakeStreamer{ttft: 200 * time.Millisecond, e2e: time.Second}
		var log sampleLog
		e, rec := newEngine(t, Config{RequestRate: rate, MaxConcurrency: 2, Seed: seed}, &fakeSource{turns: 1}, f,
			WithObserver(log.observe), WithDrainTimeout(time.Minute))
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), seconds*time.Second)
		defer cancel()
		if err := <-start(ctx, e); err != nil {
			t.Fatalf("run: %v", err)
		}

		if p := f.peak.Load(); p != 2 {
			t.Errorf("peak in flight %d, want the cap 2", p)
		}
		samples := log.all()
		slices.SortFunc(samples, func(a, b record.Sample) int { return a.Intended.Compare(b.Intended) })
		// The schedule is kept however late the sends are.
		sch := newSchedule(rate, 1, seed)
		due := 0
		for at := sch.next(); at <= seconds*time.Second; at = sch.next() {
			if due < len(samples) && !samples[due].Intended.Equal(t0.Add(at)) {
				t.Fatalf("arrival %d intended at %v, schedule says %v", due, samples[due].Intended.Sub(t0), at)
			}
			due++
		}
		var late int64
		var maxLag time.Duration
		for _, s := range samples {
			if s.Lag() > DefaultLateThreshold {
				late++
			}
			maxLag = max(maxLag, s.Lag())
		}
		if maxLag < 5*time.Second {
			t.Errorf("max lag %v; a 2-slot cap at 2/s against 10/s arrivals should lag by seconds", maxLag)
		}
		w := total(t, rec)
		if w.Counters.LateSends != late || late == 0 {
			t.Errorf("LateSends %d, want %d (> 0)", w.Counters.LateSends, late)
		}
		if got := int64(len(samples)) + w.Counters.Dropped; got != int64(due) {
			t.Errorf("sent %d + dropped %d = %d, want the %d arrivals due", len(samples), w.Counters.Dropped, got, due)
		}
		if got := w.Hist[record.Lag].Count(); got != int64(len(samples)) {
			t.Errorf("lag histogram holds %d values, want %d", got, len(samples))
		}
		if p50 := w.Hist[record.TTFTIntended].Percentile(50); p50 < time.Second {
			t.Errorf("TTFT from intended send p50 %v, want it to include the lag", p50)
		}
		if p50 := w.Hist[record.TTFT].Percentile(50); p50 > 250*time.Millisecond {
			t.Errorf("TTFT from actual send p50 %v, want ~200ms", p50)
		}
	})
}

func TestWindowsAndWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: time.Second}
		var log sampleLog
		e, rec := newEngine(t, Config{Concurrency: 4}, &fakeSource{turns: 5}, f, WithObserver(log.observe))
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second+500*time.Millisecond)
		defer cancel()
		done := start(ctx, e)

		check := func(wantW uint32, wantOK bool) {
			t.Helper()
			synctest.Wait()
			if w, ok := e.Watermark(); w != wantW || ok != wantOK {
				t.Errorf("at %v: Watermark() = %d, %v; want %d, %v", time.Since(t0), w, ok, wantW, wantOK)
			}
		}
		time.Sleep(2500 * time.Millisecond)
		check(0, false) // window 0 is in force
		e.SetWindow(1)
		time.Sleep(100 * time.Millisecond)
		check(0, false) // turns sent at 2s in window 0 still in flight
		time.Sleep(time.Second)
		check(0, true) // they ended at 3s
		time.Sleep(2 * time.Second)
		e.SetWindow(3) // windows may be skipped
		e.SetWindow(2) // and never go back
		time.Sleep(100 * time.Millisecond)
		check(0, true) // window 1's turns sent at 5s are still in flight
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
		check(3, true) // after Run every window is final

		for _, s := range log.all() {
			at := s.Result.Start.Sub(t0)
			want := uint32(0)
			switch {
			case at >= 5600*time.Millisecond:
				want = 3
			case at >= 2500*time.Millisecond:
				want = 1
			}
			if s.Window != want {
				t.Errorf("turn sent at %v stamped window %d, want %d", at, s.Window, want)
			}
		}
		ids := []uint32{}
		for _, w := range rec.Drain() {
			ids = append(ids, w.ID)
		}
		if !slices.Equal(ids, []uint32{0, 1, 3}) {
			t.Errorf("recorded windows %v, want [0 1 3]", ids)
		}
	})
}

func TestSetConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: time.Second}
		e, _ := newEngine(t, Config{Concurrency: 4}, &fakeSource{turns: 100, think: 500 * time.Millisecond}, f)
		ctx, cancel := context.WithCancel(t.Context())
		done := start(ctx, e)
		expect := func(sessions int64) {
			t.Helper()
			synctest.Wait()
			if st := e.Stats(); st.Sessions != sessions {
				t.Errorf("%d sessions, want %d", st.Sessions, sessions)
			}
		}
		time.Sleep(200 * time.Millisecond)
		expect(4)
		if err := e.SetConcurrency(10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		expect(10)
		if p := f.inflight.Load(); p != 10 {
			t.Errorf("%d in flight after growing, want 10", p)
		}
		// At 0.7s the first 4 are in flight until 1s, the 6 new ones until
		// 1.2s. Retire 7: the 6 new and one old.
		if err := e.SetConcurrency(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if p := f.inflight.Load(); p != 10 {
			t.Errorf("%d in flight right after shrinking, want 10: turns finish first", p)
		}
		time.Sleep(600 * time.Millisecond) // 1.3s
		expect(3)
		if st := e.Stats(); st.Retired != 7 {
			t.Errorf("%d conversations retired, want 7", st.Retired)
		}
		time.Sleep(time.Second)
		if p := f.peak.Load(); p != 10 {
			t.Errorf("peak %d, want 10", p)
		}
		if err := e.SetConcurrency(0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		expect(0)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
		if err := e.SetConcurrency(-1); err == nil {
			t.Error("SetConcurrency(-1) succeeded")
		}
	})
}

func TestCancelDrains(t *testing.T) {
	tests := []struct {
		name      string
		e2e       time.Duration
		drain     time.Duration
		wantOK    int64
		cancelled int64
		stopAt    time.Duration
	}{
		{"turns finish within the drain", 2 * time.Second, 30 * time.Second, 5, 0, 2 * time.Second},
		{"drain timeout cancels the rest", 10 * time.Second, 2 * time.Second, 0, 5, 3 * time.Second},
		{"no drain", 10 * time.Second, 0, 0, 5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeStreamer{e2e: tt.e2e}
				e, rec := newEngine(t, Config{Concurrency: 5}, &fakeSource{turns: 3}, f, WithDrainTimeout(tt.drain))
				t0 := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(time.Second, cancel)
				if err := e.Run(ctx); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if got := time.Since(t0); got != tt.stopAt {
					t.Errorf("Run returned after %v, want %v", got, tt.stopAt)
				}
				w := total(t, rec)
				if w.Counters.Requests != tt.wantOK || w.Counters.FailedByClass[client.ClassCancelled] != tt.cancelled {
					t.Errorf("ok %d cancelled %d, want %d and %d", w.Counters.Requests,
						w.Counters.FailedByClass[client.ClassCancelled], tt.wantOK, tt.cancelled)
				}
			})
		})
	}
}

func TestFailedTurnEndsConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: 100 * time.Millisecond, fail: func(req *client.Request) client.Class {
			if strings.HasSuffix(req.Messages[len(req.Messages)-1].Content, "-t1") {
				return client.ClassHTTP5xx
			}
			return client.ClassOK
		}}
		var log sampleLog
		e, rec := newEngine(t, Config{Concurrency: 2}, &fakeSource{turns: 3}, f, WithObserver(log.observe))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := <-start(ctx, e); err != nil {
			t.Fatalf("run: %v", err)
		}
		for _, s := range log.all() {
			if s.Turn > 2 {
				t.Fatalf("turn %d of conversation %d sent after turn 2 failed", s.Turn, s.Conversation)
			}
		}
		w := total(t, rec)
		if w.Counters.ConversationsCompleted != 0 || w.Counters.Failed == 0 ||
			w.Counters.Failed != w.Counters.FailedByClass[client.ClassHTTP5xx] {
			t.Errorf("counters %+v", w.Counters)
		}
		// Failures back off: far fewer conversations than 5s / 200ms.
		if n := w.Counters.ConversationsStarted; n > 2*10 {
			t.Errorf("%d conversations started; failing sessions should back off", n)
		}
	})
}

func TestIndexerExhaustionEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		next := 0
		ix := IndexerFunc(func() (int, bool) {
			mu.Lock()
			defer mu.Unlock()
			if next >= 5 {
				return 0, false
			}
			next += 2 // this agent owns the even indices
			return next - 2, true
		})
		f := &fakeStreamer{e2e: time.Second}
		var log sampleLog
		e, _ := newEngine(t, Config{Concurrency: 2}, &fakeSource{turns: 2}, f, WithIndexer(ix), WithObserver(log.observe))
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if err := e.Run(ctx); err != nil || ctx.Err() != nil {
			t.Fatalf("Run = %v, ctx %v; want the run to end when the indexer does", err, ctx.Err())
		}
		convs := map[int]int{}
		for _, s := range log.all() {
			convs[s.Conversation]++
		}
		if len(convs) != 3 || convs[0] != 2 || convs[2] != 2 || convs[4] != 2 {
			t.Errorf("turns per conversation %v, want 2 each for 0, 2, 4", convs)
		}
	})
}

func TestRunTwice(t *testing.T) {
	e, _ := newEngine(t, Config{Concurrency: 1, TotalRequests: 1}, &fakeSource{turns: 1}, &fakeStreamer{})
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); !errors.Is(err, ErrAlreadyRun) {
		t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
	}
}

func TestOpenLoopRejectsSetConcurrency(t *testing.T) {
	e, _ := newEngine(t, Config{RequestRate: 1}, &fakeSource{turns: 1}, &fakeStreamer{})
	if err := e.SetConcurrency(3); !errors.Is(err, ErrOpenLoop) {
		t.Fatalf("SetConcurrency = %v, want ErrOpenLoop", err)
	}
}

var _ workload.Source = (*fakeSource)(nil)

func TestAbortCutsTheDrainShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: 10 * time.Second}
		e, rec := newEngine(t, Config{Concurrency: 5}, &fakeSource{turns: 3}, f, WithDrainTimeout(time.Minute))
		t0 := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(time.Second, cancel)
		time.AfterFunc(2*time.Second, e.Abort)
		if err := e.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(t0); got != 2*time.Second {
			t.Errorf("Run returned after %v, want 2s", got)
		}
		if c := total(t, rec).Counters.FailedByClass[client.ClassCancelled]; c != 5 {
			t.Errorf("%d cancelled, want 5", c)
		}
		e.Abort() // idempotent
	})
}

func TestAbortWithoutCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeStreamer{e2e: time.Second}
		e, _ := newEngine(t, Config{RequestRate: 100}, &fakeSource{turns: 3}, f)
		t0 := time.Now()
		time.AfterFunc(1500*time.Millisecond, e.Abort)
		if err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(t0); got != 1500*time.Millisecond {
			t.Errorf("Run returned after %v, want 1.5s", got)
		}
	})
}

func TestNilResultCountsAsFailure(t *testing.T) {
	s := StreamerFunc(func(context.Context, *client.Request) *client.Result { return nil })
	e, rec := newEngine(t, Config{Concurrency: 1, TotalRequests: 2}, &fakeSource{turns: 1}, s)
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := total(t, rec).Counters.FailedByClass[client.ClassProtocol]; c != 2 {
		t.Errorf("%d protocol errors, want 2", c)
	}
}

// restartIndexer hands out 0..3 and says 1 and 3 were restarted.
type restartIndexer struct{ Counter }

func (*restartIndexer) Restarted(conv int) bool { return conv%2 == 1 }

func TestRestartedConversationsAreMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log sampleLog
		e, rec := newEngine(t, Config{Concurrency: 1, TotalRequests: 8}, &fakeSource{turns: 2}, &fakeStreamer{e2e: time.Second},
			WithIndexer(&restartIndexer{}), WithObserver(log.observe))
		if err := e.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, s := range log.all() {
			if s.Restarted != (s.Conversation%2 == 1) {
				t.Errorf("conversation %d turn %d: Restarted = %v", s.Conversation, s.Turn, s.Restarted)
			}
		}
		if got := total(t, rec).Counters.Restarted; got != 4 {
			t.Errorf("Restarted counter %d, want 4", got)
		}
	})
}
