package servermetrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// A window's code opens a window, lets the load run, and closes it; the
// figures of a window are nil where the server did not measure them.
func Example() {
	// A stand-in vLLM engine whose counters grow between two reads.
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := reads.Add(1) - 1
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{engine=\"0\"} %d\n", 1000+4000*n)
		fmt.Fprintf(w, "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{engine=\"0\"} %d\n", 200+3000*n)
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\"} %d\n", 4*n)
	}))
	defer srv.Close()

	s, err := servermetrics.New(servermetrics.Config{Endpoints: []string{srv.URL + "/metrics"}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	s.Begin(ctx)
	// ... the load runs; go s.Run(ctx) would sample gauges meanwhile ...
	w, err := s.End(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("server hit rate %.2f\n", *w.Total.HitRate)
	fmt.Printf("queue mean %.1f, max %.0f\n", *w.Total.QueueMean, *w.Total.QueueMax)
	fmt.Println("spec decode measured:", w.Total.SpecAcceptRate != nil)
	// Output:
	// server hit rate 0.75
	// queue mean 2.0, max 4
	// spec decode measured: false
}
