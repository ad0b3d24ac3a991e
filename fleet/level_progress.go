package fleet

import (
	"fmt"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// tally keeps running figures of the measurement window for the progress
// line; safe for concurrent use (the engine's observer feeds it, the
// display reads it). Its figures are for watching only: results come from
// the recorder.
type tally struct {
	mu       sync.Mutex
	ttft     *hdr.Histogram
	requests int64
	errors   int64
}

func newTally() *tally { return &tally{ttft: hdr.Default.New()} }

func (t *tally) add(s *record.Sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !s.Result.OK() {
		t.errors++
		return
	}
	t.requests++
	if s.Result.TTFT > 0 {
		t.ttft.Record(s.Result.TTFT)
	}
}

// levelStatus is what the progress display of a single-engine run reads:
// the measurement's tally, the engine (for the turns in flight) and the
// schedule.
type levelStatus struct {
	tally            *tally
	eng              *load.Engine
	origin           time.Time // the measurement's start
	warmup, duration time.Duration
}

// line is the status line at now (a progress.LineFunc).
func (s levelStatus) line(now time.Time) (string, bool) {
	inflight := s.eng.Stats().InFlight
	if now.Before(s.origin) {
		return fmt.Sprintf("warm-up %s elapsed, %s left | %d in flight",
			now.Sub(s.origin.Add(-s.warmup)).Round(time.Second), s.origin.Sub(now).Round(time.Second), inflight), true
	}
	elapsed := now.Sub(s.origin)
	var remaining time.Duration
	if s.duration > 0 {
		remaining = max(s.origin.Add(s.duration).Sub(now), 0)
	}
	s.tally.mu.Lock()
	requests, errs := s.tally.requests, s.tally.errors
	p50, p95 := s.tally.ttft.Percentile(50), s.tally.ttft.Percentile(95)
	s.tally.mu.Unlock()
	var rate float64
	if sec := elapsed.Seconds(); sec > 0 {
		rate = float64(requests) / sec
	}
	return fmt.Sprintf("measure %s elapsed, %s left | %d requests %.1f req/s | TTFT p50 %s p95 %s | %d in flight | %d errors",
		elapsed.Round(time.Second), remaining.Round(time.Second), requests, rate,
		p50.Round(time.Millisecond), p95.Round(time.Millisecond), inflight, errs), true
}
