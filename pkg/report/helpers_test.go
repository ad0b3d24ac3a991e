package report

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 0, 0, time.UTC)

// synthWindow records 100 successful requests whose TTFT p95 is p95 (the
// 95th of TTFT_i = p95·i/95) and whose later turns hit the cache at hit
// (turn 1 never does), plus failed requests.
func synthWindow(start time.Time, p95 time.Duration, hit float64, failed int) *record.Window {
	w := record.NewWindow(1, hdr.Default)
	for i := 1; i <= 100; i++ {
		turn := 1 + (i-1)%4
		cached := 0
		if turn > 1 {
			cached = int(hit * 1000)
		}
		ttft := p95 * time.Duration(i) / 95
		itl := []time.Duration{20 * time.Millisecond, 25 * time.Millisecond, 30 * time.Millisecond}
		w.Add(&record.Sample{Window: 1, Conversation: i, Turn: turn, Intended: start,
			Result: &client.Result{
				Start: start.Add(time.Duration(i) * 100 * time.Millisecond), TTFB: ttft / 2, TTFT: ttft,
				E2E: ttft + 75*time.Millisecond, ITL: itl, PromptTokens: 1000, OutputTokens: 4,
				CachedTokens: cached, UsageReported: true, FinishReason: "length",
			}})
	}
	for i := range failed {
		w.Add(&record.Sample{Window: 1, Turn: 1, Intended: start, Result: &client.Result{
			Start: start.Add(time.Duration(i) * time.Second), E2E: time.Millisecond, Class: client.ClassHTTP5xx, Err: errTest}})
	}
	return w
}

type testErr string

func (e testErr) Error() string { return string(e) }

const errTest = testErr("503")

// synthPoint is a point of a 20 s window.
func synthPoint(run int, mode string, level int, p95ms float64, hit float64) Point {
	start := t0.Add(time.Duration(run*1000+level) * time.Second)
	return Point{
		Run: run, Mode: mode, Level: level,
		Window:       synthWindow(start, time.Duration(p95ms*float64(time.Millisecond)), hit, 0),
		MeasureStart: start, MeasureEnd: start.Add(20 * time.Second),
		Coverage: 1, Agents: 2, StartSkew: 3 * time.Millisecond,
	}
}

// rowPoint is a point known only by its TSV row.
func rowPoint(run int, mode string, level int, p95ms float64) Point {
	r := Row{Mode: mode, Concurrency: level, Run: run, TTFTP50: p95ms / 2000, TTFTP95: p95ms / 1000, HitRate: 0.5, OutputTPS: 100, TOPS: 100, ActualRPS: 5}
	return Point{Run: run, Mode: mode, Level: level, Row: &r}
}
