package runner

import (
	"strings"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// DefaultLiveSpan is how far back the live figures look.
const DefaultLiveSpan = 10 * time.Second

// Live keeps the last seconds of samples, for the progress display's live
// TTFT p95 and error rate. It is fed from the load's observers (many
// goroutines) and read by the display: safe for concurrent use. Its
// figures are for watching only; results come from the measurement
// windows.
type Live struct {
	mu      sync.Mutex
	cfg     hdr.Config
	buckets []liveBucket // ring of one-second buckets
	// mergeErrors counts TTFT histograms that could not be merged in
	// whole (another geometry, or values dropped): those TTFTs are
	// missing from the live p95, never from the results.
	mergeErrors int64
	// lastErr is the latest failure seen, "class: message", one bounded
	// line (the client has removed credentials from it).
	lastErr string
	// ready and expected are the fleet's agents ready to run and expected
	// (SetAgents); expected 0 means no fleet reported them.
	ready, expected int
}

// SetAgents records how many of the expected agents are ready to run.
func (l *Live) SetAgents(ready, expected int) {
	l.mu.Lock()
	l.ready, l.expected = ready, expected
	l.mu.Unlock()
}

// Agents returns the agents ready and expected (0, 0 before SetAgents).
func (l *Live) Agents() (ready, expected int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready, l.expected
}

// maxLastErr bounds the latest error the status line shows.
const maxLastErr = 120

// errLine is "class: message" of a failure, on one bounded line.
func errLine(class, msg string) string {
	s := strings.Join(strings.Fields(class+": "+msg), " ")
	if len(s) > maxLastErr {
		s = strings.ToValidUTF8(s[:maxLastErr], "") + "..."
	}
	return s
}

type liveBucket struct {
	sec      int64 // Unix second; 0 when unused
	ttft     *hdr.Histogram
	ok, fail int64
}

// NewLive returns a Live that keeps span (rounded up to whole seconds,
// at least one).
func NewLive(span time.Duration) *Live {
	n := max(int((span+time.Second-1)/time.Second), 1)
	return &Live{cfg: hdr.Default, buckets: make([]liveBucket, n+1)}
}

// Observe adds one sample, at the time its request ended.
func (l *Live) Observe(s *record.Sample) {
	if s == nil || s.Result == nil {
		return
	}
	r := s.Result
	end := r.Start.Add(r.E2E)
	if r.E2E <= 0 {
		end = time.Now()
	}
	sec := end.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(sec)
	if !r.OK() {
		b.fail++
		msg := r.ServerMessage
		if msg == "" && r.Err != nil {
			msg = r.Err.Error()
		}
		l.lastErr = errLine(string(r.Class), msg)
		return
	}
	b.ok++
	if r.TTFT > 0 {
		b.ttft.Record(r.TTFT)
	}
}

// ObserveWindow adds an agent's interval report, received at now: its
// turns and TTFT histogram count in now's second. Remote agents' progress
// arrives this way (coordinator.Config.OnReport); local agents' can come
// sample by sample through Observe instead.
func (l *Live) ObserveWindow(w *record.Window, now time.Time) {
	if w == nil {
		return
	}
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(sec)
	b.ok += w.Counters.Requests
	b.fail += w.Counters.Failed
	if top := w.TopErrors(1); len(top) > 0 {
		msg := top[0].Example
		if msg == "" {
			msg = top[0].Message
		}
		l.lastErr = errLine(string(top[0].Class), msg)
	}
	if h := w.Hist[record.TTFT]; h != nil {
		// A report of another geometry cannot be merged: it counts, but
		// its TTFTs are left out of the live p95 (results are unaffected).
		if err := b.ttft.Merge(h); err != nil {
			l.mergeErrors++
		}
	}
}

// bucket returns the bucket of Unix second sec, reset if it held an older
// second. l.mu must be held.
func (l *Live) bucket(sec int64) *liveBucket {
	b := &l.buckets[int(sec%int64(len(l.buckets)))]
	if b.sec != sec {
		*b = liveBucket{sec: sec, ttft: b.ttft}
		if b.ttft == nil {
			b.ttft = l.cfg.New()
		} else {
			b.ttft.Reset()
		}
	}
	return b
}

// LiveStats are the figures over a span of time.
type LiveStats struct {
	// Requests and Errors count the turns that ended in the span.
	Requests, Errors int64
	// TTFTP95 is over the successful ones; 0 when there were none.
	TTFTP95 time.Duration
	// MergeErrors counts the histograms left out of TTFTP95 (in whole or
	// in part) since the Live was created.
	MergeErrors int64
	// LastError is the latest failure seen, "class: message"; "" when none.
	LastError string
}

// ErrorRate is Errors over all turns, 0..1.
func (s LiveStats) ErrorRate() float64 {
	if n := s.Requests + s.Errors; n > 0 {
		return float64(s.Errors) / float64(n)
	}
	return 0
}

// Stats returns the figures of the turns that ended in the whole seconds
// from since up to now, within the span Live keeps.
func (l *Live) Stats(since, now time.Time) LiveStats {
	from, to := since.Unix(), now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	from = max(from, to-int64(len(l.buckets))+2)
	h := l.cfg.New()
	var st LiveStats
	for i := range l.buckets {
		b := &l.buckets[i]
		if b.sec == 0 || b.sec < from || b.sec > to {
			continue
		}
		st.Requests += b.ok
		st.Errors += b.fail
		// One geometry, so only a count overflow can fail here.
		if err := h.Merge(b.ttft); err != nil {
			l.mergeErrors++
		}
	}
	st.MergeErrors = l.mergeErrors
	if st.Errors > 0 {
		st.LastError = l.lastErr
	}
	if h.Count() > 0 {
		st.TTFTP95 = h.Percentile(95)
	}
	return st
}
