package load

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
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// The benchmark's scripted server runs in a child process (this test binary
// re-executed with serveEnv set) so its CPU and memory stay out of the
// client's figures.
const serveEnv = "FLEETBENCH_LOADBENCH_SERVE"

// The benchmark server's script: the first token 100 ms after the request
// arrives, then one every 100 ms, 10 to 20 tokens per reply
// (FLEETBENCH_BENCH_REPLY=MIN-MAX changes the range).
const (
	benchFirstToken = 100 * time.Millisecond
	benchTokenGap   = 100 * time.Millisecond
)

func benchTokens(n int64) int {
	lo, hi := benchReply()
	return lo + int(n%int64(hi-lo+1))
}

// benchReply is the range of tokens per reply.
func benchReply() (lo, hi int) {
	a, b, ok := strings.Cut(os.Getenv("FLEETBENCH_BENCH_REPLY"), "-")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || x < 1 || y < x {
		return 10, 20
	}
	return x, y
}

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		os.Exit(serveScripted())
	}
	os.Exit(m.Run())
}

// serveScripted is the child's main: it serves the scripted server on a
// loopback port, prints the address on stdout and exits when stdin closes
// (the parent ended or let go of it). GET /stats returns the server's own
// first-token lateness; POST /stats resets it.
func serveScripted() int {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	s := &scripted{firstToken: benchFirstToken, gap: benchTokenGap, tokens: benchTokens}
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", s)
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.late.reset()
			s.read.reset()
			return
		}
		_ = json.NewEncoder(w).Encode(serverStats{
			Requests:   s.n.Load(),
			LateP50Ms:  ms(s.late.percentile(50)),
			LateP99Ms:  ms(s.late.percentile(99)),
			LateP999Ms: ms(s.late.percentile(99.9)),
			ReadP99Ms:  ms(s.read.percentile(99)),
		})
	})
	// First line: the raw HTTP/1.1 server; second: net/http (stats, h2c).
	fmt.Println(raw.Addr().String())
	fmt.Println(ln.Addr().String())
	// FLEETBENCH_BENCH_SERVER_CPUPROFILE=FILE profiles the server's CPU
	// for as long as it runs.
	stopProfile := func() {}
	if path := os.Getenv("FLEETBENCH_BENCH_SERVER_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			stopProfile = func() { pprof.StopCPUProfile(); _ = f.Close() }
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stopProfile()
		os.Exit(0)
	}()
	go func() {
		if err := (&rawServer{s: s}).serve(raw); err != nil {
			fmt.Fprintln(os.Stderr, "serve raw:", err)
			os.Exit(1)
		}
	}()
	// HTTP/1.1 and, for the h2c case, HTTP/2 with prior knowledge.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute, Protocols: &protocols,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1000}}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

type serverStats struct {
	Requests                         int64
	LateP50Ms, LateP99Ms, LateP999Ms float64
	ReadP99Ms                        float64
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startServer starts the scripted server in a child process and returns the
// base URLs of its raw HTTP/1.1 server and of its net/http server (stats,
// h2c), and its process id; the child ends with the benchmark.
func startServer(tb testing.TB) (raw, std string, pid int) {
	tb.Helper()
	args := []string{os.Args[0], "-test.run=^$"}
	// FLEETBENCH_BENCH_SERVER_CPUS pins the scripted server to those CPUs
	// (taskset list syntax), so that with the benchmark itself pinned to the
	// others the client's figures are not the server's CPU contention.
	if cpus := os.Getenv("FLEETBENCH_BENCH_SERVER_CPUS"); cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start scripted server: %v", err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	br := bufio.NewReader(stdout)
	var addrs [2]string
	for i := range addrs {
		line, err := br.ReadString('\n')
		if err != nil {
			tb.Fatalf("read scripted server address: %v", err)
		}
		addrs[i] = "http://" + strings.TrimSpace(line)
	}
	return addrs[0], addrs[1], cmd.Process.Pid
}

// procCPU is the CPU time process pid has used (user + system), read from
// /proc; 0 when unavailable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func fetchServerStats(tb testing.TB, base string, reset bool) serverStats {
	tb.Helper()
	var st serverStats
	method := http.MethodGet
	if reset {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(tb.Context(), method, base+"/stats", nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("server stats: %v", err)
	}
	defer resp.Body.Close()
	if !reset {
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			tb.Fatalf("decode server stats: %v", err)
		}
	}
	return st
}

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

// loadAverage is the machine's 1-minute load average, reported with the
// figures because other processes on the machine skew them.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcCPU is the CPU time the garbage collector has used, in seconds, as the
// runtime estimates it, and the number of collections so far.
func gcCPU() (float64, uint64) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0
	}
	return s[0].Value.Float64(), s[1].Value.Uint64()
}

// memInUse returns the heap in use and the goroutine stacks after a
// collection.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
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
//     (server-cpu-s/1k-req is the child's, for comparison), gc-cpu-% the
//     share of it the runtime estimates went to garbage collection and
//     gc-cycles the collections in the window. The client runs with the
//     collector target fleetbench's commands set (TuneGC; GOGC overrides).
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
// FLEETBENCH_BENCH_CLIENT=fleetbench|floor|epoll run one case (floor is
// benchFloor, a bare goroutine-per-session reader);
// FLEETBENCH_BENCH_REPLY=MIN-MAX sets the tokens per reply;
// FLEETBENCH_BENCH_HEAPPROFILE=FILE writes a heap profile taken with every
// stream in flight.
func BenchmarkClosedLoop(b *testing.B) {
	cases := []struct {
		client, proto string
		sessions      int
	}{{"fleetbench", "http1", 1000}, {"fleetbench", "http1", 8000}, {"epoll", "http1", 8000}}
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
			for range b.N {
				switch c.client {
				case "floor":
					benchFloor(b, c.sessions)
				case "epoll":
					benchEpoll(b, c.sessions)
				default:
					benchClosedLoop(b, c.sessions, c.proto == "h2c")
				}
			}
		})
	}
}

// The load benchmarks' schedule: sessions start over rampUp, the
// measurement window opens at warmUp (ramp-up included) and lasts measure.
const (
	rampUp  = 4 * time.Second
	warmUp  = 8 * time.Second
	measure = 10 * time.Second
)

func benchClosedLoop(b *testing.B, sessions int, h2c bool) {
	// The collector's target fleetbench's commands run with (GOGC wins).
	TuneGC()
	raw, base, pid := startServer(b)
	target := raw
	if h2c {
		target = base
	}
	// MaxConnsPerHost as fleetbench run sets it: one connection per
	// session, so a turn that finds its connection not yet back in the
	// pool waits for it instead of dialing another.
	cl, err := client.New(client.Config{BaseURL: target, Model: "bench", MaxTokens: 32, HTTP2: h2c,
		MaxConnsPerHost: benchConnCap(sessions)}, nil)
	if err != nil {
		b.Fatal(err)
	}
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
	e, err := New(Config{Concurrency: sessions}, newBenchSource(), cl, rec, nil,
		WithRampUp(rampUp), WithDrainTimeout(5*time.Second), WithObserver(observe))
	if err != nil {
		b.Fatal(err)
	}
	heap0, stack0 := memInUse()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	time.Sleep(warmUp)
	e.SetWindow(1)
	fetchServerStats(b, base, true)
	gc0, cycles0 := gcCPU()
	cpu0, srvCPU0, t0 := cpuTime(), procCPU(pid), time.Now()
	time.Sleep(measure)
	e.SetWindow(2)
	cpu, srvCPU, elapsed := cpuTime()-cpu0, procCPU(pid)-srvCPU0, time.Since(t0)
	gc, cycles := gcCPU()
	gc, cycles = gc-gc0, cycles-cycles0
	srv := fetchServerStats(b, base, false)
	load := loadAverage()

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
	added := func(p float64) float64 { return ms(w.Hist[record.TTFT].Percentile(p) - benchFirstToken) }
	b.ReportMetric(added(50), "ttft-added-p50-ms")
	b.ReportMetric(added(99), "ttft-added-p99-ms")
	b.ReportMetric(added(99.9), "ttft-added-p99.9-ms")
	if clientPath.Count() > 0 {
		b.ReportMetric(ms(clientPath.Percentile(50)), "client-path-p50-ms")
		b.ReportMetric(ms(clientPath.Percentile(99)), "client-path-p99-ms")
		b.ReportMetric(ms(reqPath.Percentile(99)), "req-path-p99-ms")
		b.ReportMetric(ms(respPath.Percentile(99)), "resp-path-p99-ms")
	}
	b.ReportMetric(srv.LateP99Ms, "server-late-p99-ms")
	b.ReportMetric(srv.LateP50Ms, "server-late-p50-ms")
	b.ReportMetric(srv.ReadP99Ms, "server-read-p99-ms")
	perStream := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(sessions) }
	b.ReportMetric(perStream(heap1+stack1, heap0+stack0), "B/stream")
	b.ReportMetric(perStream(heap1, heap0), "heap-B/stream")
	b.ReportMetric(perStream(stack1, stack0), "stack-B/stream")
	b.ReportMetric(float64(goroutines)/float64(sessions), "goroutines/stream")
	b.ReportMetric(cpu.Seconds()/float64(w.Counters.Requests)*1000, "cpu-s/1k-req")
	// Sizing figures for agent pods (deploy/README.md): cores busy and
	// memory held per 1,000 streams at this server's token rate.
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds()/(float64(sessions)/1000), "cores/1k-streams")
	b.ReportMetric(perStream(heap1+stack1, heap0+stack0)*1000/(1<<20), "MiB/1k-streams")
	b.ReportMetric(srvCPU.Seconds()/float64(w.Counters.Requests)*1000, "server-cpu-s/1k-req")
	if cpu > 0 {
		b.ReportMetric(100*gc/cpu.Seconds(), "gc-cpu-%")
	}
	b.ReportMetric(float64(cycles), "gc-cycles")
	b.ReportMetric(float64(w.Counters.Requests)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(w.Counters.Failed), "failed")
	if w.Counters.Failed > 0 {
		b.Logf("failed by class: %v", w.Counters.FailedByClass)
	}
	b.ReportMetric(float64(dials.Load()), "dials")
	b.ReportMetric(load, "loadavg")
	b.ReportMetric(float64(inflight), "in-flight")
	b.ReportMetric(ms(w.Hist[record.Lag].Percentile(50)), "lag-p50-ms")
	b.ReportMetric(ms(w.Hist[record.Lag].Percentile(99)), "lag-p99-ms")
}

// benchConnCap is the connection cap for n sessions; FLEETBENCH_BENCH_CONNCAP
// overrides it (0: uncapped) so caps can be compared.
func benchConnCap(n int) int {
	if v, err := strconv.Atoi(os.Getenv("FLEETBENCH_BENCH_CONNCAP")); err == nil && v >= 0 {
		return v
	}
	return n
}

// benchFloor is the least a Go client can do against the same server: one
// goroutine per session that writes a prebuilt request with a body as large
// as the workload's, reads the response with net.Conn and bufio, timestamps
// the first token's line and looks for the chunked terminator; no SSE or
// JSON parsing, no recording. Its ttft-added figures, over the same windows
// as benchClosedLoop, are what the machine itself allows: the kernel's
// loopback TCP work for both sides (a data segment and an ACK per token) and
// Go's poller and scheduler. Run it with FLEETBENCH_BENCH_CLIENT=floor.
func benchFloor(b *testing.B, sessions int) {
	f := newFloorRun(b)
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range sessions {
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(i) * rampUp / time.Duration(sessions)):
			case <-ctx.Done():
				return
			}
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				b.Error(err)
				return
			}
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			defer stop()
			br := bufio.NewReaderSize(c, 2<<10)
			for ctx.Err() == nil {
				start := time.Now()
				if _, err := c.Write(f.req); err != nil {
					return
				}
				var first time.Time
				head := true
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					switch {
					case head:
						head = len(line) > 2
					case first.IsZero() && bytes.HasPrefix(line, []byte("data: ")):
						first = time.Now()
					}
					if string(line) == "0\r\n" {
						break
					}
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					return
				}
				f.record(first.Sub(start))
			}
		})
	}
	time.Sleep(warmUp)
	f.measure(b)
}

// floorRun is what the floor clients share: the scripted server, a request
// with a body as large as the workload's, and the added TTFT of the turns
// that end in the measurement window.
type floorRun struct {
	addr      string
	pid       int
	req       []byte
	measuring atomic.Bool
	requests  atomic.Int64
	mu        sync.Mutex
	added     *hdr.Histogram
}

func newFloorRun(b *testing.B) *floorRun {
	TuneGC()
	raw, _, pid := startServer(b)
	f := &floorRun{addr: strings.TrimPrefix(raw, "http://"), pid: pid, added: hdr.Default.New()}
	body := strings.Repeat("x", 12<<10)
	f.req = fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", f.addr, len(body), body)
	return f
}

// record counts a turn whose first token came ttft after its send, when the
// window is open; safe for concurrent use.
func (f *floorRun) record(ttft time.Duration) {
	if !f.measuring.Load() {
		return
	}
	f.requests.Add(1)
	f.mu.Lock()
	f.added.Record(max(ttft-benchFirstToken, 0))
	f.mu.Unlock()
}

// measure opens the window for measure, then reports the figures, named as
// benchClosedLoop names them.
func (f *floorRun) measure(b *testing.B) {
	cpu0, srvCPU0, t0 := cpuTime(), procCPU(f.pid), time.Now()
	f.measuring.Store(true)
	time.Sleep(measure)
	f.measuring.Store(false)
	cpu, srvCPU, elapsed := cpuTime()-cpu0, procCPU(f.pid)-srvCPU0, time.Since(t0)
	n := f.requests.Load()
	if n == 0 {
		b.Fatal("no request completed in the measurement window")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b.ReportMetric(ms(f.added.Percentile(50)), "ttft-added-p50-ms")
	b.ReportMetric(ms(f.added.Percentile(99)), "ttft-added-p99-ms")
	b.ReportMetric(ms(f.added.Percentile(99.9)), "ttft-added-p99.9-ms")
	b.ReportMetric(cpu.Seconds()/float64(n)*1000, "cpu-s/1k-req")
	b.ReportMetric(srvCPU.Seconds()/float64(n)*1000, "server-cpu-s/1k-req")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "req/s")
	b.ReportMetric(loadAverage(), "loadavg")
}
