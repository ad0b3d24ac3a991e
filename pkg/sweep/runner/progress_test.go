package runner

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// sampleAt is a turn that ended at end with the given TTFT, failed when
// ttft is 0.
func sampleAt(end time.Time, ttft time.Duration) *record.Sample {
	r := &client.Result{Start: end.Add(-100 * time.Millisecond), E2E: 100 * time.Millisecond, TTFT: ttft}
	if ttft == 0 {
		r.Class = client.ClassHTTP5xx
	}
	return &record.Sample{Result: r}
}

func TestLiveStats(t *testing.T) {
	l := NewLive(5 * time.Second)
	// Old turns (20 s ago) fall out of the span; recent ones count.
	for i := range 10 {
		l.Observe(sampleAt(t0.Add(-20*time.Second), time.Duration(i+1)*time.Second))
	}
	for i := range 100 {
		l.Observe(sampleAt(t0.Add(-time.Duration(i%3)*time.Second), time.Duration(i+1)*time.Millisecond))
	}
	for range 25 {
		l.Observe(sampleAt(t0, 0))
	}
	st := l.Stats(t0.Add(-time.Minute), t0)
	if st.Requests != 100 || st.Errors != 25 {
		t.Errorf("requests %d errors %d, want 100 and 25", st.Requests, st.Errors)
	}
	if st.TTFTP95 < 94*time.Millisecond || st.TTFTP95 > 96*time.Millisecond {
		t.Errorf("p95 %v, want about 95ms", st.TTFTP95)
	}
	if got := st.ErrorRate(); got != 0.2 {
		t.Errorf("error rate %v", got)
	}
	// Since bounds the seconds too: only the turns of the last second.
	if st := l.Stats(t0, t0); st.Requests != 34 || st.Errors != 25 {
		t.Errorf("last second: requests %d errors %d, want 34 and 25", st.Requests, st.Errors)
	}
	// A bucket is reused for a new second.
	l.Observe(sampleAt(t0.Add(6*time.Second), 7*time.Millisecond))
	if st := l.Stats(t0.Add(6*time.Second), t0.Add(6*time.Second)); st.Requests != 1 || st.TTFTP95.Round(time.Millisecond) != 7*time.Millisecond {
		t.Errorf("new second: %+v", st)
	}
}

// TestLiveObserveWindow feeds interval reports, as remote agents send
// them: their counts and TTFTs count in the second they arrived.
func TestLiveObserveWindow(t *testing.T) {
	l := NewLive(5 * time.Second)
	w := record.NewWindow(1, hdr.Default)
	for i := range 50 {
		w.Add(sampleAt(t0, time.Duration(i+1)*time.Millisecond))
	}
	w.Add(sampleAt(t0, 0))
	l.ObserveWindow(w, t0)
	l.ObserveWindow(w, t0.Add(-20*time.Second)) // out of the span
	l.ObserveWindow(nil, t0)
	st := l.Stats(t0.Add(-time.Minute), t0)
	if st.Requests != 50 || st.Errors != 1 {
		t.Errorf("requests %d errors %d, want 50 and 1", st.Requests, st.Errors)
	}
	if p := st.TTFTP95.Round(time.Millisecond); p < 47*time.Millisecond || p > 48*time.Millisecond {
		t.Errorf("p95 %v, want about 48ms", st.TTFTP95)
	}
}

func TestDisplayLine(t *testing.T) {
	live := NewLive(DefaultLiveSpan)
	for i := range 20 {
		live.Observe(sampleAt(t0.Add(8*time.Second), time.Duration(10+i)*time.Millisecond))
	}
	d := NewDisplay(nil, false, nil, live)
	level := Status{
		Step:    sweep.Step{Kind: sweep.StepWarmup, Run: 1, Mode: "kv", Level: 40, Duration: 12 * time.Second},
		Warmup:  2 * time.Second,
		Measure: 10 * time.Second,
		Started: t0,
		After:   time.Minute,
		Done:    2, Total: 8,
	}
	tests := []struct {
		name string
		s    Status
		at   time.Duration
		want string
	}{
		{"warm-up", level, time.Second, "run 1 kv | level 40 (3/8) warm-up, 11s left | TTFT p95 -, errors 0.0% (0 turns, last 1s) | sweep 1m11s left"},
		{"measure", level, 9 * time.Second, "run 1 kv | level 40 (3/8) measure, 3s left | TTFT p95 28ms, errors 0.0% (20 turns, last 7s) | sweep 1m3s left"},
		{"drain", level, 13 * time.Second, "level 40 (3/8) drain, 0s left"},
		{"switch", Status{Step: sweep.Step{Kind: sweep.StepSwitch, Run: 2, Mode: "round_robin", Duration: 3 * time.Second}, Started: t0, After: time.Minute},
			time.Second, "run 2 round_robin | switching to round_robin | sweep 1m2s left"},
		{"gate", Status{Step: sweep.Step{Kind: sweep.StepGate, Run: 2, Mode: "round_robin"}, Started: t0, After: time.Minute},
			4 * time.Second, "run 2 round_robin | waiting for readiness 4s | sweep 1m0s left"},
		{"cooldown", Status{Step: sweep.Step{Kind: sweep.StepCooldown, Run: 1, Mode: "kv", Level: 40, Duration: 5 * time.Second}, Started: t0, After: time.Minute},
			2 * time.Second, "run 1 kv | level 40 cooldown, 3s left | sweep 1m3s left"},
		{"restore", Status{Step: sweep.Step{Kind: sweep.StepSwitch, Mode: "kv"}, Started: t0}, 0, "restoring mode kv"},
		{"done", Status{Step: sweep.Step{Kind: StepDone}, Done: 8, Total: 8}, 0, "sweep done: 8/8 points"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := d.Line(tt.s, t0.Add(tt.at))
			if !strings.Contains(got, tt.want) {
				t.Errorf("line\n %q\nwant it to contain\n %q", got, tt.want)
			}
		})
	}
	// A fleet reports its agents: ready against expected.
	live.SetAgents(2, 3)
	if got, want := d.Line(level, t0.Add(time.Second)), "run 1 kv | agents 2/3 ready | level 40"; !strings.HasPrefix(got, want) {
		t.Errorf("line %q, want it to begin %q", got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDisplayRedrawsOnTerminal(t *testing.T) {
	var out syncBuffer
	d := NewDisplay(&out, true, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	d.Update(Status{Step: sweep.Step{Kind: sweep.StepSwitch, Run: 1, Mode: "kv", Duration: time.Second}, Started: time.Now()})
	for !strings.Contains(out.String(), "switching") {
		time.Sleep(5 * time.Millisecond)
	}
	// A log line goes above the status line, which is drawn again.
	if _, err := d.LogOutput().Write([]byte("a log line\n")); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	const status = "run 1 kv | switching to kv | sweep 1s left"
	want := "\r\x1b[K" + status + "\r\x1b[Ka log line\n" + status + "\r\x1b[K"
	if s := out.String(); s != want {
		t.Errorf("terminal output\n %q\nwant\n %q", s, want)
	}
}

// TestLiveCountsMergeErrors: a report of another histogram geometry
// counts its turns but not its TTFTs, and the failed merge is counted.
func TestLiveCountsMergeErrors(t *testing.T) {
	l := NewLive(10 * time.Second)
	now := time.Unix(1_000_000, 0)
	other := hdr.Config{LowestMicros: 1, HighestMicros: 1_000_000, SigFigs: 2}
	w := record.NewWindow(1, other)
	w.Counters.Requests = 3
	w.Hist[record.TTFT].Record(50 * time.Millisecond)
	l.ObserveWindow(w, now)
	st := l.Stats(now.Add(-time.Second), now)
	if st.Requests != 3 || st.MergeErrors != 1 || st.TTFTP95 != 0 {
		t.Errorf("stats %+v, want 3 requests, 1 merge error and no TTFT", st)
	}
}

// TestLiveShowsLatestError: the live figures carry the latest failure's
// class and server message, from samples and from agents' reports, and
// none once the span has no errors.
func TestLiveShowsLatestError(t *testing.T) {
	now := time.Now()
	l := NewLive(DefaultLiveSpan)
	l.Observe(&record.Sample{Result: &client.Result{Start: now, E2E: time.Millisecond, Class: client.ClassAuth,
		ServerMessage: "Incorrect API key provided", Err: errors.New("http 401")}})
	st := l.Stats(now.Add(-time.Second), now)
	if st.Errors != 1 || st.LastError != "auth: Incorrect API key provided" {
		t.Errorf("stats %+v", st)
	}
	w := record.NewWindow(1, hdr.Default)
	w.Add(&record.Sample{Result: &client.Result{Start: now, Class: client.ClassRateLimited, Err: errors.New("http 429 (retry after 7)")}})
	l.ObserveWindow(w, now)
	if st := l.Stats(now.Add(-time.Second), now); st.LastError != "rate_limited: http 429 (retry after 7)" {
		t.Errorf("from a report: %q", st.LastError)
	}
	if st := NewLive(DefaultLiveSpan).Stats(now.Add(-time.Second), now); st.LastError != "" {
		t.Errorf("no errors, yet %q", st.LastError)
	}
}
