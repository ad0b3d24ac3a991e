package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tailWriter discards a stream but keeps its last bytes.
type tailWriter struct{ tail []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.tail = append(w.tail, p...)
	if len(w.tail) > 1024 {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-512:]...)
	}
	return len(p), nil
}

// BenchmarkSimStreaming streams many concurrent requests through the real
// HTTP server and reports process CPU (server and the deliberately cheap
// client together) per 1,000 streamed tokens. FLEETBENCH_SIM_BENCH_STREAMS
// sets the number of concurrent streams (default 8000, the figure the
// simulator must serve on a 2-core machine) and FLEETBENCH_SIM_BENCH_TIMESCALE
// the time scale (default 4, to keep `make bench` short).
func BenchmarkSimStreaming(b *testing.B) {
	streams := 8000
	if v, err := strconv.Atoi(os.Getenv("FLEETBENCH_SIM_BENCH_STREAMS")); err == nil && v > 0 {
		streams = v
	}
	scale := 4.0
	if v, err := strconv.ParseFloat(os.Getenv("FLEETBENCH_SIM_BENCH_TIMESCALE"), 64); err == nil && v > 0 {
		scale = v
	}
	const tokens = 200
	s := startSim(b, func(c *Config) {
		c.TimeScale = scale
		c.Replicas = 4
		c.Engine.MaxBatch = max(256, streams/4+1) // every stream decodes at once
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}}
	var next atomic.Int64
	var total atomic.Int64
	var failed atomic.Int64
	n := int64(max(b.N, streams))
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for g := range streams {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				body, _ := json.Marshal(openai.CompletionRequest{
					Prompt: "bench " + strconv.Itoa(g) + " " + strconv.FormatInt(i, 10) + " " + words(int(i), 200),
					Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true},
					MaxTokens: ptr(tokens), IgnoreEOS: ptr(true),
				})
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL()+"/v1/completions", bytes.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				var tw tailWriter
				_, _ = io.Copy(&tw, resp.Body)
				resp.Body.Close()
				i0 := bytes.LastIndex(tw.tail, []byte(`"completion_tokens":`))
				if i0 < 0 {
					failed.Add(1)
					continue
				}
				rest := tw.tail[i0+len(`"completion_tokens":`):]
				j := bytes.IndexByte(rest, ',')
				if v, err := strconv.Atoi(string(rest[:max(j, 0)])); err == nil {
					total.Add(int64(v))
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	if failed.Load() > 0 {
		b.Fatalf("%d requests failed", failed.Load())
	}
	tok := float64(total.Load())
	b.ReportMetric(float64(cpu.Milliseconds())/(tok/1000), "cpu-ms/1k-tokens")
	b.ReportMetric(tok/wall.Seconds(), "tokens/s")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
	b.ReportMetric(float64(streams), "streams")
}
