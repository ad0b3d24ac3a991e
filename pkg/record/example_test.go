package record_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

func ExampleRecorder() {
	rec := record.NewRecorder(hdr.Default)
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	// Many request goroutines record concurrently.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			rec.Record(&record.Sample{
				Window:   0,
				Turn:     1,
				Intended: start,
				Result: &client.Result{
					Start:         start.Add(time.Duration(i) * time.Millisecond),
					TTFB:          80 * time.Millisecond,
					TTFT:          time.Duration(100+i*10) * time.Millisecond,
					E2E:           time.Second,
					ITL:           []time.Duration{20 * time.Millisecond, 20 * time.Millisecond},
					PromptTokens:  1000,
					OutputTokens:  3,
					CachedTokens:  500 * (i % 2),
					UsageReported: true,
				},
			})
		})
	}
	wg.Wait()
	rec.Update(0, func(c *record.Counters) { c.ConversationsStarted += 4 })

	// At each interval the reporter drains what was recorded since the last
	// Drain and merges it into run totals.
	for _, w := range rec.Drain() {
		s := w.Summary(record.TTFT)
		fmt.Printf("window %d: %d ok, ttft p50 %v max %v, itl n=%d, hit rate %.2f, requests with cache %.0f%%, conversations %d\n",
			w.ID, w.Counters.Requests, s.P50, s.Max, w.Hist[record.ITL].Count(),
			w.HitRate(), 100*w.HitRequestShare(), w.Counters.ConversationsStarted)
	}
	fmt.Println(len(rec.Drain()), "windows after a second Drain")
	// Output:
	// window 0: 4 ok, ttft p50 110.015ms max 130.047ms, itl n=8, hit rate 0.25, requests with cache 50%, conversations 4
	// 0 windows after a second Drain
}
