package fleet

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// tally keeps running figures for the progress line: the warm-up's
// requests and errors, the measurement window's requests, errors and TTFT,
// and the latest error, so a failing target shows from the first second.
// It is safe for concurrent use (the engine's observer feeds it, the
// display reads it). Its figures are for watching only: results come from
// the recorder.
type tally struct {
	mu                     sync.Mutex
	ttft                   *hdr.Histogram
	requests, errors       int64
	warmRequests, warmErrs int64
	// lastErr is the latest failure, "class: message", one line, bounded
	// for the status line; lastFull the same, whole, for the reason
	// fail-fast gives.
	lastErr, lastFull string
	// classes counts the failures of both windows by class.
	classes map[client.Class]int64
}

// allFailed returns the one class every request so far failed with and
// the latest error, whole, or ok false when a request succeeded, none ended, or
// the failures differ in class.
func (t *tally) allFailed() (client.Class, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.requests+t.warmRequests > 0 || len(t.classes) != 1 {
		return "", "", false
	}
	for c := range t.classes {
		return c, t.lastFull, true
	}
	return "", "", false
}

// maxLastErr bounds the latest error shown on the status line.
const maxLastErr = 160

func newTally() *tally { return &tally{ttft: hdr.Default.New(), classes: map[client.Class]int64{}} }

func (t *tally) add(s *record.Sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	measure := s.Window == windowMeasure
	if !s.Result.OK() {
		if measure {
			t.errors++
		} else {
			t.warmErrs++
		}
		msg := string(s.Result.Class)
		if s.Result.Err != nil {
			msg += ": " + strings.Join(strings.Fields(s.Result.Err.Error()), " ")
		}
		t.lastFull = msg
		if len(msg) > maxLastErr {
			msg = strings.ToValidUTF8(msg[:maxLastErr], "") + "..."
		}
		t.lastErr = msg
		t.classes[s.Result.Class]++
		return
	}
	if !measure {
		t.warmRequests++
		return
	}
	t.requests++
	if s.Result.TTFT > 0 {
		t.ttft.Record(s.Result.TTFT)
	}
}

// errText is the errors part of a status line: the count and the latest.
func errText(n int64, last string) string {
	if n == 0 {
		return "0 errors"
	}
	return fmt.Sprintf("%d errors (last: %s)", n, last)
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
		s.tally.mu.Lock()
		requests, errs, last := s.tally.warmRequests, s.tally.warmErrs, s.tally.lastErr
		s.tally.mu.Unlock()
		return fmt.Sprintf("warm-up %s elapsed, %s left | %d requests | %d in flight | %s",
			now.Sub(s.origin.Add(-s.warmup)).Round(time.Second), s.origin.Sub(now).Round(time.Second), requests, inflight,
			errText(errs, last)), true
	}
	elapsed := now.Sub(s.origin)
	var remaining time.Duration
	if s.duration > 0 {
		remaining = max(s.origin.Add(s.duration).Sub(now), 0)
	}
	s.tally.mu.Lock()
	requests, errs, last := s.tally.requests, s.tally.errors, s.tally.lastErr
	p50, p95 := s.tally.ttft.Percentile(50), s.tally.ttft.Percentile(95)
	s.tally.mu.Unlock()
	var rate float64
	if sec := elapsed.Seconds(); sec > 0 {
		rate = float64(requests) / sec
	}
	return fmt.Sprintf("measure %s elapsed, %s left | %d requests %.1f req/s | TTFT p50 %s p95 %s | %d in flight | %s",
		elapsed.Round(time.Second), remaining.Round(time.Second), requests, rate,
		p50.Round(time.Millisecond), p95.Round(time.Millisecond), inflight, errText(errs, last)), true
}
