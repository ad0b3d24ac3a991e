package load

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

// benchSource is a document-chat-like workload: a 12 KB system prompt
// shared by every conversation (about 3,000 tokens, so request bodies are
// realistic) and 3 to 5 short user turns.
type benchSource struct{ system string }

func newBenchSource() *benchSource {
	var b strings.Builder
	for i := 0; b.Len() < 12<<10; i++ {
		fmt.Fprintf(&b, "Paragraph %d of the reference document describes the system in some detail. ", i)
	}
	return &benchSource{system: b.String()}
}

func (s *benchSource) Name() string                             { return "bench" }
func (s *benchSource) Conversation(i int) workload.Conversation { return &benchConv{s, i} }

type benchConv struct {
	src *benchSource
	idx int
}

func (c *benchConv) Index() int     { return c.idx }
func (c *benchConv) System() string { return c.src.system }
func (c *benchConv) Turns() int     { return 3 + c.idx%3 }
func (c *benchConv) Next(_ context.Context, k int, _ []openai.Message) (workload.Turn, error) {
	return workload.Turn{User: fmt.Sprintf("Question %d of conversation %d: what does the document say about part %d?", k, c.idx, k*7)}, nil
}

// BenchmarkClosedLoop drives many concurrent streaming conversations from
// this process against the scripted server (in a child process) and reports
// what the client adds:
//
//   - ttft-added-p50-ms, -p99-ms, -p99.9-ms: measured TTFT minus the
//     script's 100 ms, over the turns sent in a 10 s measurement window
//     (after 8 s of warm-up with a 4 s ramp-up);
//   - B/stream (heap-B/stream + stack-B/stream): heap in use plus goroutine
//     stacks after a GC with every session in flight, minus the same before
//     the run, per session;
//   - cpu-s/1k-req: this process's user+system CPU per 1,000 requests
//     (user-cpu-s/1k-req its user-mode part: the client's own code, where
//     the rest is the kernel's; server-cpu-s/1k-req is the child's, for
//     comparison), gc-cpu-% the
//     share of it the runtime estimates went to garbage collection,
//     gc-cycles the collections in the window and alloc-B/req the heap
//     bytes allocated in it per request. The window opens right after a
//     collection of the whole live heap (settleGC), as a long-lived
//     agent's heap is between its collections; a window with no
//     collection of its own is charged that collection's CPU in
//     proportion to what it allocated (gc-amortized-us/req, included in
//     cpu-s/1k-req; gc-cycle-cpu-ms is the collection's cost). The client runs with the
//     collector target fleetbench's commands set (TuneGC; GOGC overrides)
//     and with the Ps the agent reserves for its event loops
//     (client.ReserveLoopProcs: GOMAXPROCS doubled while it runs).
//
// Diagnostics: server-late-* is how late the server itself wrote first
// tokens (its share of the "client-added" figure, mostly CPU contention on a
// small machine), dials the measured turns that opened a connection, lag-* the
// schedule lag between turns, loadavg the machine's load average.
//
// The last case, client=epoll, replaces fleetbench's client with benchEpoll,
// a bare event-loop reader that parses nothing: the floor the machine allows.
// At 8,000 streams on two cores the kernel's loopback TCP work (a data
// segment and an ACK per token, 80,000 tokens a second) and the scripted
// server take most of the CPU before any client code runs.
//
// Run: go test -run='^$' -bench=ClosedLoop -benchmem ./pkg/load/
// FLEETBENCH_BENCH_SESSIONS=N, FLEETBENCH_BENCH_PROTO=http1|h2c and
// FLEETBENCH_BENCH_CLIENT=fleetbench|floor|epoll|nethttp run one case (floor is
// benchFloor, a bare goroutine-per-session reader; nethttp is benchNetHTTP,
// net/http and encoding/json, the plain path of the 2,000-session A/B);
// FLEETBENCH_BENCH_REPLY=MIN-MAX sets the tokens per reply and
// FLEETBENCH_BENCH_GAP the time between them (issue 15's script is
// FLEETBENCH_BENCH_REPLY=20-20 FLEETBENCH_BENCH_GAP=50ms);
// FLEETBENCH_BENCH_HEAPPROFILE=FILE writes a heap profile taken with every
// stream in flight, FLEETBENCH_BENCH_CPUPROFILE=FILE a CPU profile of the
// measurement window.
func BenchmarkClosedLoop(b *testing.B) {
	cases := []struct {
		client, proto string
		sessions      int
	}{
		{"fleetbench", "http1", 1000},
		// The same-run A/B of the event loops and own HTTP/1.1 path
		// against net/http and encoding/json (benchNetHTTP).
		{"fleetbench", "http1", 2000}, {"nethttp", "http1", 2000},
		{"fleetbench", "http1", 8000}, {"epoll", "http1", 8000},
	}
	env := func(name string) (string, bool) { v := os.Getenv(name); return v, v != "" }
	n, errN := strconv.Atoi(os.Getenv("FLEETBENCH_BENCH_SESSIONS"))
	proto, okP := env("FLEETBENCH_BENCH_PROTO")
	kind, okC := env("FLEETBENCH_BENCH_CLIENT")
	if (errN == nil && n > 0) || okP || okC {
		cases = cases[:1]
		if errN == nil && n > 0 {
			cases[0].sessions = n
		}
		if okP {
			cases[0].proto = proto
		}
		if okC {
			cases[0].client = kind
		}
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("client=%s/%s/sessions=%d", c.client, c.proto, c.sessions), func(b *testing.B) {
			plan := defaultPlan(c.sessions)
			plan.h2c = c.proto == "h2c"
			for range b.N {
				var m figures
				switch c.client {
				case "floor":
					m = benchFloor(b, plan)
				case "epoll":
					m = benchEpoll(b, plan)
				case "nethttp":
					m = benchNetHTTP(b, plan)
				default:
					m = benchClosedLoop(b, plan)
				}
				m.report(b)
			}
		})
	}
}

// benchPlan is one run of a load benchmark: sessions start over ramp, the
// measurement window opens at warm (ramp-up included) and lasts measure,
// against a scripted server started with env.
type benchPlan struct {
	sessions            int
	h2c                 bool
	ramp, warm, measure time.Duration
	env                 []string
	// lean leaves out the diagnostics that cost the client CPU on the hot
	// path (the per-request observer splitting TTFT into paths).
	lean bool
	// burn is CPU the epoll floor spends per request beyond its own
	// (a busy wait after each reply), to calibrate the ratios against a
	// floor that costs a known amount more (FLEETBENCH_FLOOR_SELF_BURN).
	burn time.Duration
}

// defaultPlan is BenchmarkClosedLoop's schedule for n sessions.
func defaultPlan(n int) benchPlan {
	return benchPlan{sessions: n, ramp: 4 * time.Second, warm: 8 * time.Second, measure: 10 * time.Second}
}

// figures are a run's results by unit, as the benchmarks report them.
type figures map[string]float64

func (m figures) set(v float64, unit string) { m[unit] = v }

// report reports every figure.
func (m figures) report(b *testing.B) {
	for unit, v := range m {
		b.ReportMetric(v, unit)
	}
}

func benchClosedLoop(b *testing.B, plan benchPlan) figures {
	sessions := plan.sessions
	// The collector's target fleetbench's commands run with (GOGC wins),
	// and the event loops' own Ps, as the agent command reserves them.
	TuneGC()
	defer client.ReserveLoopProcs()()
	srv0 := startServer(b, plan.env...)
	defer srv0.stop()
	raw, base, pid := srv0.raw, srv0.std, srv0.pid
	target := raw
	if plan.h2c {
		target = base
	}
	// MaxConnsPerHost as fleetbench run sets it: one connection per
	// session, so a turn that finds its connection not yet back in the
	// pool waits for it instead of dialing another.
	cl, err := client.New(client.Config{BaseURL: target, Model: "bench", MaxTokens: 32, HTTP2: plan.h2c,
		MaxConnsPerHost: benchConnCap(sessions)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rec := record.NewRecorder(hdr.Default)
	// Count the measured turns that had to dial: a dial under load is the
	// usual cause of a TTFT outlier.
	var dials atomic.Int64
	// The raw server stamps its arrival and first-write times (wall clock)
	// into the first token, which splits each TTFT into the request path
	// (client start to server arrival), the server's hold (arrival to
	// first write: the script's 100 ms plus the server's lateness) and the
	// response path (first write to the client's parse). Request plus
	// response path is what the client side adds.
	var mu sync.Mutex
	reqPath, respPath, clientPath := hdr.Default.New(), hdr.Default.New(), hdr.Default.New()
	observe := func(s *record.Sample) {
		r := s.Result
		if s.Window != 1 || !r.OK() {
			return
		}
		if !r.ConnReused {
			dials.Add(1)
		}
		arrived, wrote, ok := parseStamp(r.Text)
		if !ok {
			return
		}
		start := r.Start.Round(0) // wall clock, comparable with the server's
		in, out := arrived.Sub(start), start.Add(r.TTFT).Sub(wrote)
		mu.Lock()
		reqPath.Record(max(in, 0))
		respPath.Record(max(out, 0))
		clientPath.Record(max(in+out, 0))
		mu.Unlock()
	}
	opts := []Option{WithRampUp(plan.ramp), WithDrainTimeout(time.Second)}
	if !plan.lean {
		opts = append(opts, WithObserver(observe))
	}
	e, err := New(Config{Concurrency: sessions}, newBenchSource(), cl, rec, nil, opts...)
	if err != nil {
		b.Fatal(err)
	}
	heap0, stack0 := memInUse()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	time.Sleep(plan.warm)
	cycle := settleGC()
	e.SetWindow(1)
	fetchServerStats(b, base, true)
	gc0, cycles0, alloc0 := gcCPU()
	stopProfile := startCPUProfile(os.Getenv("FLEETBENCH_BENCH_CPUPROFILE"))
	user0, sys0 := cpuTimes()
	srvCPU0, t0 := testserve.ProcCPU(pid), time.Now()
	time.Sleep(plan.measure)
	e.SetWindow(2)
	stopProfile()
	user, sys := cpuTimes()
	user, sys = user-user0, sys-sys0
	cpu, srvCPU, elapsed := user+sys, testserve.ProcCPU(pid)-srvCPU0, time.Since(t0)
	gc, cycles, alloc := gcCPU()
	gc, cycles, alloc = gc-gc0, cycles-cycles0, alloc-alloc0
	srv := fetchServerStats(b, base, false)
	load := loadAverage()
	// Let the window's last turns end: it counts the turns sent in it, and
	// cancelling them would leave them out of its requests.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w, ok := e.Watermark(); ok && w >= 1 {
			break
		}
	}

	inflight := e.Stats().InFlight
	goroutines := runtime.NumGoroutine()
	heap1, stack1 := memInUse()
	if path := os.Getenv("FLEETBENCH_BENCH_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}

	var w *record.Window
	for _, x := range rec.Drain() {
		if x.ID == 1 {
			w = x
		}
	}
	if w == nil || w.Counters.Requests == 0 {
		b.Fatal("no request completed in the measurement window")
	}
	m := figures{}
	added := func(p float64) float64 { return ms(w.Hist[record.TTFT].Percentile(p) - benchFirstToken) }
	m.set(added(50), "ttft-added-p50-ms")
	m.set(added(99), "ttft-added-p99-ms")
	m.set(added(99.9), "ttft-added-p99.9-ms")
	if clientPath.Count() > 0 {
		m.set(ms(clientPath.Percentile(50)), "client-path-p50-ms")
		m.set(ms(clientPath.Percentile(99)), "client-path-p99-ms")
		m.set(ms(reqPath.Percentile(50)), "req-path-p50-ms")
		m.set(ms(respPath.Percentile(50)), "resp-path-p50-ms")
		m.set(ms(reqPath.Percentile(99)), "req-path-p99-ms")
		m.set(ms(respPath.Percentile(99)), "resp-path-p99-ms")
	}
	m.set(srv.LateP99Ms, "server-late-p99-ms")
	m.set(srv.LateP50Ms, "server-late-p50-ms")
	m.set(srv.ReadP99Ms, "server-read-p99-ms")
	perStream := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(sessions) }
	m.set(perStream(heap1+stack1, heap0+stack0), "B/stream")
	m.set(perStream(heap1, heap0), "heap-B/stream")
	m.set(perStream(stack1, stack0), "stack-B/stream")
	m.set(float64(goroutines)/float64(sessions), "goroutines/stream")
	// A collection in the window is paid in full in its CPU; a window
	// without one is charged the settling collection's cost in proportion
	// to what it allocated (settleGC).
	amortized := 0.0
	if cycles == 0 {
		amortized = cycle.share(alloc) / float64(w.Counters.Requests)
	}
	m.set(amortized*1e6, "gc-amortized-us/req")
	m.set(cycle.cpu*1000, "gc-cycle-cpu-ms")
	m.set((cpu.Seconds()/float64(w.Counters.Requests)+amortized)*1000, "cpu-s/1k-req")
	m.set(user.Seconds()/float64(w.Counters.Requests)*1000, "user-cpu-s/1k-req")
	// Sizing figures for agent pods (deploy/README.md): cores busy and
	// memory held per 1,000 streams at this server's token rate.
	m.set(cpu.Seconds()/elapsed.Seconds()/(float64(sessions)/1000), "cores/1k-streams")
	m.set(perStream(heap1+stack1, heap0+stack0)*1000/(1<<20), "MiB/1k-streams")
	m.set(srvCPU.Seconds()/float64(w.Counters.Requests)*1000, "server-cpu-s/1k-req")
	if cpu > 0 {
		m.set(100*gc/cpu.Seconds(), "gc-cpu-%")
	}
	m.set(float64(cycles), "gc-cycles")
	m.set(float64(alloc)/float64(w.Counters.Requests), "alloc-B/req")
	m.set(float64(w.Counters.Requests)/elapsed.Seconds(), "req/s")
	m.set(float64(w.Counters.Failed), "failed")
	if w.Counters.Failed > 0 {
		b.Logf("failed by class: %v", w.Counters.FailedByClass)
	}
	m.set(float64(dials.Load()), "dials")
	m.set(load, "loadavg")
	m.set(float64(inflight), "in-flight")
	m.set(ms(w.Hist[record.Lag].Percentile(50)), "lag-p50-ms")
	m.set(ms(w.Hist[record.Lag].Percentile(99)), "lag-p99-ms")
	return m
}

// startCPUProfile profiles this process's CPU into path until the returned
// function is called; with no path it does nothing.
func startCPUProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	// FLEETBENCH_BENCH_CPUPROFILE_HZ samples more often than pprof's 100 Hz
	// (the runtime then prints that the rate was already set).
	if hz, err := strconv.Atoi(os.Getenv("FLEETBENCH_BENCH_CPUPROFILE_HZ")); err == nil && hz > 0 {
		runtime.SetCPUProfileRate(hz)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// benchConnCap is the connection cap for n sessions; FLEETBENCH_BENCH_CONNCAP
// overrides it (0: uncapped) so caps can be compared.
func benchConnCap(n int) int {
	if v, err := strconv.Atoi(os.Getenv("FLEETBENCH_BENCH_CONNCAP")); err == nil && v >= 0 {
		return v
	}
	return n
}
