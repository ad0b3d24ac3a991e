//go:build unix

package servermetrics

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// realisticPage is a vLLM page of the size a real engine serves (~80 KiB):
// the fixture plus histogram families the catalogue does not read, which
// the parser must still get through.
func realisticPage(tb testing.TB) []byte {
	var b bytes.Buffer
	b.Write(readFixture(tb, "vllm_a_end.txt"))
	for f := range 25 {
		name := fmt.Sprintf("vllm:request_extra_%d_seconds", f)
		fmt.Fprintf(&b, "# HELP %s Filler histogram.\n# TYPE %s histogram\n", name, name)
		for i, le := range vllmLatencyBuckets {
			fmt.Fprintf(&b, "%s_bucket{engine=\"0\",le=\"%g\",model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} %d.0\n", name, le, i*10)
		}
		fmt.Fprintf(&b, "%s_bucket{engine=\"0\",le=\"+Inf\",model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 300.0\n", name)
		fmt.Fprintf(&b, "%s_count{engine=\"0\",model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 300.0\n", name)
		fmt.Fprintf(&b, "%s_sum{engine=\"0\",model_name=\"meta-llama/Llama-3.1-70B-Instruct\"} 42.5\n", name)
	}
	return b.Bytes()
}

// vllmLatencyBuckets are vLLM's request-latency buckets.
var vllmLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScrape8Endpoints reads 8 endpoints once per op (one Snapshot,
// what the sampler does every interval) and reports its cost: cpu-ms/s is
// the process CPU per round, which at a 1 s interval is CPU milliseconds
// per second of load (10 = 1% of one core). The 8 test servers run in the
// same process and serve static bytes, so the figure is an upper bound.
func BenchmarkScrape8Endpoints(b *testing.B) {
	page := realisticPage(b)
	var eps []string
	for range 8 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_, _ = w.Write(page)
		}))
		b.Cleanup(srv.Close)
		eps = append(eps, srv.URL+"/metrics")
	}
	s, err := New(Config{Endpoints: eps, Interval: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	if snap := s.Snapshot(ctx); snap.Endpoints[7].Err != nil {
		b.Fatal(snap.Endpoints[7].Err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		s.Snapshot(ctx)
	}
	b.StopTimer()
	cpuPerRound := float64(cpuTime()-cpu0) / float64(b.N)
	b.ReportMetric(cpuPerRound/1e6, "cpu-ms/s")
	b.ReportMetric(float64(len(page))/1024, "page-KiB")
}

// BenchmarkParse parses one realistic vLLM page.
func BenchmarkParse(b *testing.B) {
	page := realisticPage(b)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(page), "text/plain; version=0.0.4"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiff computes one window of two endpoints from parsed pages.
func BenchmarkDiff(b *testing.B) {
	start := Snapshot{Endpoints: []EndpointPage{
		{Endpoint: "a", Page: parseFixture(b, "vllm_a_start.txt")},
		{Endpoint: "b", Page: parseFixture(b, "vllm_b_start.txt")},
	}}
	end := Snapshot{At: time.Unix(60, 0), Endpoints: []EndpointPage{
		{Endpoint: "a", Page: parseFixture(b, "vllm_a_end.txt")},
		{Endpoint: "b", Page: parseFixture(b, "vllm_b_end.txt")},
	}}
	b.ReportAllocs()
	for b.Loop() {
		Diff(start, end)
	}
}
