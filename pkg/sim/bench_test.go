package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/openai"

	"github.com/fleetbench/fleetbench/pkg/testserve"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tailWriter discards a stream but keeps its last bytes and counts its
// events (a "data: " at the start of a write or after a blank line; the
// simulator writes each event whole).
type tailWriter struct {
	tail   []byte
	events int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("data: ")) {
		w.events++
	}
	w.events += bytes.Count(p, []byte("\n\ndata: "))
	w.tail = append(w.tail, p...)
	if len(w.tail) > 1024 {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-512:]...)
	}
	return len(p), nil
}

// benchServeEnv makes the test binary serve a simulator for
// BenchmarkSimStreaming in a process of its own: "streams,timescale".
const benchServeEnv = "FLEETBENCH_SIM_BENCH_SERVE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchServeEnv); spec != "" {
		os.Exit(serveForBench(spec))
	}
	os.Exit(m.Run())
}

// benchConfig is the simulator the streaming benchmark loads: every stream
// decodes at once.
func benchConfig(c *Config, streams int, scale float64) {
	c.TimeScale = scale
	c.Replicas = 4
	c.Engine.MaxBatch = max(256, streams/4+1)
}

// serveForBench serves the benchmark's simulator on a loopback port,
// prints its URL and runs until stdin closes.
func serveForBench(spec string) int {
	ss, sc, _ := strings.Cut(spec, ",")
	streams, _ := strconv.Atoi(ss)
	scale, _ := strconv.ParseFloat(sc, 64)
	cfg, err := ProfileConfig(DefaultProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Listen, cfg.ShutdownTimeout = "127.0.0.1:0", time.Second
	benchConfig(&cfg, streams, scale)
	s, err := New(cfg, hclog.NewNullLogger(), prometheus.NewRegistry())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// FLEETBENCH_SIM_BENCH_CPUPROFILE=FILE profiles the simulator's CPU
	// for as long as it serves.
	if path := os.Getenv("FLEETBENCH_SIM_BENCH_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	for s.URL() == "" {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(s.URL())
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// BenchmarkSimStreaming streams many concurrent requests through the real
// HTTP server and reports the simulator's CPU per 1,000 streamed tokens
// (cpu-ms/1k-tokens: the simulator alone, in a process of its own, as
// `fleetbench sim` runs) and the deliberately cheap client's
// (client-cpu-ms/1k-tokens). FLEETBENCH_SIM_BENCH_STREAMS sets the number
// of concurrent streams (default 8000, the figure the simulator must serve
// on a 2-core machine) and FLEETBENCH_SIM_BENCH_TIMESCALE the time scale
// (default 4, to keep `make bench` short).
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
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), benchServeEnv+"="+strconv.Itoa(streams)+","+strconv.FormatFloat(scale, 'g', -1, 64))
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = child.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("read the simulator's URL: %v", err)
	}
	base := strings.TrimSpace(line)
	pid := child.Process.Pid
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}}
	var next atomic.Int64
	var total atomic.Int64
	var failed atomic.Int64
	var events atomic.Int64
	n := int64(max(b.N, streams))
	b.ResetTimer()
	cpu0, srv0, wall0 := cpuTime(), testserve.ProcCPU(pid), time.Now()
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
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				var tw tailWriter
				_, _ = io.Copy(&tw, resp.Body)
				resp.Body.Close()
				events.Add(int64(tw.events))
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
	cpu, srv, wall := cpuTime()-cpu0, testserve.ProcCPU(pid)-srv0, time.Since(wall0)
	if failed.Load() > 0 {
		b.Fatalf("%d requests failed", failed.Load())
	}
	tok := float64(total.Load())
	b.ReportMetric(float64(srv.Milliseconds())/(tok/1000), "cpu-ms/1k-tokens")
	b.ReportMetric(float64(cpu.Milliseconds())/(tok/1000), "client-cpu-ms/1k-tokens")
	b.ReportMetric(tok/wall.Seconds(), "tokens/s")
	// The simulator writes one event per engine step that advanced a
	// stream, so its cost per token falls as steps carry more tokens
	// (speculative decoding, slower steps): events are the write calls.
	b.ReportMetric(float64(srv.Microseconds())/float64(max(events.Load(), 1)), "cpu-us/event")
	b.ReportMetric(tok/float64(max(events.Load(), 1)), "tokens/event")
	b.ReportMetric(srv.Seconds()/wall.Seconds(), "cores")
	b.ReportMetric(float64(streams), "streams")
}
