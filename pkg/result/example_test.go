package result_test

import (
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
)

func ExampleNew() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w := record.NewWindow(1, hdr.Default)
	for i := range 10 {
		w.Add(&record.Sample{Window: 1, Conversation: i, Turn: 1, Intended: start, Result: &client.Result{
			Start: start, TTFT: 100 * time.Millisecond, E2E: time.Second,
			PromptTokens: 1000, OutputTokens: 100, CachedTokens: 500, UsageReported: true,
		}})
	}
	s, err := result.New(w, result.Facts{Duration: 10 * time.Second, MaxConcurrency: 4, Start: start, End: start.Add(10 * time.Second)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d requests, %.2f req/s, %.0f tok/s, median TTFT %.0f ms, KV hit rate %.2f\n",
		s.Completed, s.RequestThroughput, s.OutputThroughput, s.TTFT.Median, s.HitRate)
	// Output: 10 requests, 1.00 req/s, 100 tok/s, median TTFT 100 ms, KV hit rate 0.50
}

func ExampleNearestRank() {
	fmt.Println(result.NearestRank([]float64{15, 20, 35, 40, 50}, 40))
	// Output: 20
}
