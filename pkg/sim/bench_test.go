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
	"slices"
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

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
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
	bytes  int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("data: ")) {
		w.events++
	}
	w.events += bytes.Count(p, []byte("\n\ndata: "))
	w.bytes += len(p)
	w.tail = append(w.tail, p...)
	if len(w.tail) > 1024 {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-512:]...)
	}
	return len(p), nil
}

// benchServeEnv makes the test binary serve a simulator for
// BenchmarkSimStreaming in a process of its own: "streams,timescale".
const benchServeEnv = "FLEETBENCH_SIM_BENCH_SERVE"

// benchFloorEnv makes it serve the benchmark's floor instead (see
// floorSSE): "events,bytes,tokens,interval" (interval in microseconds).
const benchFloorEnv = "FLEETBENCH_SIM_BENCH_FLOOR"

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchServeEnv); spec != "" {
		os.Exit(serveForBench(spec))
	}
	if spec := os.Getenv(benchFloorEnv); spec != "" {
		os.Exit(serveFloorForBench(spec))
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

// floorSSE is the floor of the streaming benchmark: the least a Go
// HTTP/1.1 server does to stream what the simulator streams. net/http
// serves each request on a goroutine of its own, as it serves the
// simulator's; a shared clock (one per simulated replica) wakes every
// stream each interval and each writes one event of the simulator's
// average size and flushes it; the last write carries the usage event
// and [DONE], as the simulator's does. No engine, tokenizer or JSON:
// what the simulator spends per event above the floor's is its own, and
// the floor is what the machine charges for the write calls.
type floorSSE struct {
	writes  int    // per request, the last with usage and [DONE]
	event   []byte // one content event
	last    []byte
	clocks  []floorClock
	streams atomic.Uint64
}

type floorClock struct {
	mu   sync.Mutex
	tick chan struct{} // closed at each tick, then replaced
}

func (c *floorClock) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tick
}

func (c *floorClock) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.mu.Lock()
			close(c.tick)
			c.tick = make(chan struct{})
			c.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

func (f *floorSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	c := &f.clocks[f.streams.Add(1)%uint64(len(f.clocks))]
	for i := range f.writes {
		<-c.next()
		buf := f.event
		if i == f.writes-1 {
			buf = f.last
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		fl.Flush()
	}
}

// serveFloorForBench serves floorSSE on a loopback port, prints its URL
// and runs until stdin closes. spec is "writes,bytes,tokens,interval":
// writes per request, bytes per content event, the tokens the usage event
// claims and the clocks' interval in microseconds.
func serveFloorForBench(spec string) int {
	var v [4]int
	for i, f := range strings.SplitN(spec, ",", 4) {
		v[i], _ = strconv.Atoi(f)
	}
	if v[0] < 1 || v[1] < 16 || v[3] < 1 {
		fmt.Fprintf(os.Stderr, "floor spec %q: want writes,bytes,tokens,interval, all positive\n", spec)
		return 1
	}
	event := append([]byte(`data: {"text":"`), bytes.Repeat([]byte{'x'}, v[1]-len(`data: {"text":""}`)-2)...)
	event = append(event, "\"}\n\n"...)
	last := fmt.Appendf(slices.Clone(event), `data: {"usage":{"completion_tokens":%d,"prompt_tokens":0}}`+"\n\ndata: [DONE]\n\n", v[2])
	f := &floorSSE{writes: v[0], event: event, last: last, clocks: make([]floorClock, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range f.clocks {
		f.clocks[i].tick = make(chan struct{})
		go f.clocks[i].run(ctx, time.Duration(v[3])*time.Microsecond)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// streamChild starts this test binary as a server with env set and
// returns its URL and pid; cleanup stops it.
func streamChild(b *testing.B, env string) (string, int) {
	b.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env)
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
	b.Cleanup(func() {
		stdin.Close()
		_ = child.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("read the server's URL: %v", err)
	}
	return strings.TrimSpace(line), child.Process.Pid
}

// streamFigures is what one pass of the streaming benchmark measured.
type streamFigures struct {
	requests, tokens, events, bytes int64
	server, client                  time.Duration // CPU
	wall                            time.Duration
}

// streamAll sends n streaming completions of tokens tokens each from
// streams goroutines to base and counts what came back, with the server's
// (pid's) CPU and the client's.
func streamAll(b *testing.B, base string, pid, streams int, n int64, tokens int) streamFigures {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var next, total, failed, events, nbytes atomic.Int64
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
				nbytes.Add(int64(tw.bytes))
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
	if failed.Load() > 0 {
		b.Fatalf("%d requests failed", failed.Load())
	}
	return streamFigures{
		requests: n, tokens: total.Load(), events: events.Load(), bytes: nbytes.Load(),
		server: testserve.ProcCPU(pid) - srv0, client: cpuTime() - cpu0, wall: time.Since(wall0),
	}
}

// BenchmarkSimStreaming streams many concurrent requests through the real
// HTTP server and reports the simulator's CPU per 1,000 streamed tokens
// (cpu-ms/1k-tokens: the simulator alone, in a process of its own, as
// `fleetbench sim` runs) and the deliberately cheap client's
// (client-cpu-ms/1k-tokens). FLEETBENCH_SIM_BENCH_STREAMS sets the number
// of concurrent streams (default 8000, the figure the simulator must serve
// on a 2-core machine) and FLEETBENCH_SIM_BENCH_TIMESCALE the time scale
// (default 4, to keep `make bench` short).
//
// A second pass streams the same number of events of the same size at the
// same pace from floorSSE, a bare net/http server, to the same client:
// floor-cpu-us/event is what this machine charges per event for the
// server's write calls and net/http alone, and floor-cpu-ms/1k-tokens that
// at the simulator's tokens per event, the least the simulator could
// spend here. FLEETBENCH_SIM_BENCH_FLOOR=0 skips it.
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
	n := int64(max(b.N, streams))
	base, pid := streamChild(b, benchServeEnv+"="+strconv.Itoa(streams)+","+strconv.FormatFloat(scale, 'g', -1, 64))
	b.ResetTimer()
	sim := streamAll(b, base, pid, streams, n, tokens)
	b.StopTimer()
	tok := float64(sim.tokens)
	perEvent := func(f streamFigures) float64 { return float64(f.server.Microseconds()) / float64(max(f.events, 1)) }
	b.ReportMetric(float64(sim.server.Milliseconds())/(tok/1000), "cpu-ms/1k-tokens")
	b.ReportMetric(float64(sim.client.Milliseconds())/(tok/1000), "client-cpu-ms/1k-tokens")
	b.ReportMetric(tok/sim.wall.Seconds(), "tokens/s")
	// The simulator writes one event per engine step that advanced a
	// stream, so its cost per token falls as steps carry more tokens
	// (speculative decoding, slower steps): events are the write calls.
	b.ReportMetric(perEvent(sim), "cpu-us/event")
	tokensPerEvent := tok / float64(max(sim.events, 1))
	b.ReportMetric(tokensPerEvent, "tokens/event")
	b.ReportMetric(sim.server.Seconds()/sim.wall.Seconds(), "cores")
	b.ReportMetric(float64(streams), "streams")
	if os.Getenv("FLEETBENCH_SIM_BENCH_FLOOR") == "0" {
		return
	}

	// The floor: per request the simulator's events in as many writes
	// (its last write carries three: the last tokens, usage and [DONE]),
	// of its average size, at its pace.
	evPerReq := float64(sim.events) / float64(sim.requests)
	writes := max(1, int(evPerReq-2+0.5))
	tail := len(`data: {"usage":{"completion_tokens":200,"prompt_tokens":0}}` + "\n\ndata: [DONE]\n\n")
	size := max(16, int((float64(sim.bytes)/float64(sim.requests)-float64(tail))/float64(writes)+0.5))
	every := time.Duration(float64(sim.wall) * float64(streams) / float64(sim.requests) / float64(writes))
	spec := fmt.Sprintf("%d,%d,%d,%d", writes, size, tokens, max(1, every.Microseconds()))
	fbase, fpid := streamChild(b, benchFloorEnv+"="+spec)
	floor := streamAll(b, fbase, fpid, streams, n, tokens)
	b.ReportMetric(perEvent(floor), "floor-cpu-us/event")
	// µs per event over tokens per event is µs per token: ms per 1,000.
	b.ReportMetric(perEvent(floor)/tokensPerEvent, "floor-cpu-ms/1k-tokens")
	b.ReportMetric(perEvent(sim)/max(perEvent(floor), 1e-9), "sim/floor")
	b.Logf("floor: %d writes of %d bytes per request every %v, %d events (simulator %d), %.2f cores",
		writes, size, every.Round(time.Millisecond), floor.events, sim.events, floor.server.Seconds()/floor.wall.Seconds())
}
