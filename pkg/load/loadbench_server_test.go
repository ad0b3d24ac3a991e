package load

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"
)

// The benchmark's scripted server runs in a child process (this test binary
// re-executed with serveEnv set) so its CPU and memory stay out of the
// client's figures.
const serveEnv = "FLEETBENCH_LOADBENCH_SERVE"

// The benchmark server's script: the first token 100 ms after the request
// arrives, then one every 100 ms, 10 to 20 tokens per reply
// (FLEETBENCH_BENCH_REPLY=MIN-MAX changes the range, FLEETBENCH_BENCH_GAP
// the time between tokens).
const (
	benchFirstToken = 100 * time.Millisecond
	benchTokenGap   = 100 * time.Millisecond
)

// benchGap is the time between tokens the child's script uses.
func benchGap() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("FLEETBENCH_BENCH_GAP")); err == nil && d > 0 {
		return d
	}
	return benchTokenGap
}

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
	s := &scripted{firstToken: benchFirstToken, gap: benchGap(), tokens: benchTokens}
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

// benchServer is a scripted server running in a child process.
type benchServer struct {
	raw  string // base URL of the raw HTTP/1.1 server
	std  string // base URL of the net/http server (stats, h2c)
	pid  int
	stop func() // ends the child and waits for it; idempotent
}

// startServer starts the scripted server in a child process, with env
// (NAME=VALUE) added to this process's environment; the child ends at stop
// or with the benchmark.
func startServer(tb testing.TB, env ...string) *benchServer {
	tb.Helper()
	args := []string{os.Args[0], "-test.run=^$"}
	// FLEETBENCH_BENCH_SERVER_CPUS pins the scripted server to those CPUs
	// (taskset list syntax), so that with the benchmark itself pinned to the
	// others the client's figures are not the server's CPU contention.
	if cpus := os.Getenv("FLEETBENCH_BENCH_SERVER_CPUS"); cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), env...), serveEnv+"=1")
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
	stop := sync.OnceFunc(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	tb.Cleanup(stop)
	br := bufio.NewReader(stdout)
	var addrs [2]string
	for i := range addrs {
		line, err := br.ReadString('\n')
		if err != nil {
			tb.Fatalf("read scripted server address: %v", err)
		}
		addrs[i] = "http://" + strings.TrimSpace(line)
	}
	return &benchServer{raw: addrs[0], std: addrs[1], pid: cmd.Process.Pid, stop: stop}
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

// cpuTimes is this process's CPU time so far in user mode and in the
// kernel (system calls, and the loopback TCP work they do).
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// gcCPU is the CPU time the garbage collector has used, in seconds, as the
// runtime estimates it, the number of collections so far and the bytes
// allocated on the heap so far.
func gcCPU() (float64, uint64, uint64) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindUint64 || s[2].Value.Kind() != metrics.KindUint64 {
		return 0, 0, 0
	}
	return s[0].Value.Float64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

// gcCycle is what a collection of the whole live heap cost.
type gcCycle struct {
	cpu  float64 // seconds of CPU, the runtime's estimate
	live uint64  // heap bytes live after it
	gogc uint64  // the collector's target, percent
}

// settleGC collects once with every session in flight and waits for the
// sessions its mark phase slowed to catch up. A benchmark's window then
// opens where a long-lived agent's heap is most of the time: with the
// live heap marked and the next collection due only after the heap grows
// by GOGC percent of it (at 4,000 sessions and GOGC=400, about 40 s of
// requests). Without it, a run that starts from an empty heap collects
// again as that heap first fills, inside the few seconds measured, and
// charges a whole collection to them.
func settleGC() gcCycle {
	gc0, _, _ := gcCPU()
	runtime.GC()
	gc1, _, _ := gcCPU()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	c := gcCycle{cpu: gc1 - gc0}
	if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 {
		c.live, c.gogc = s[0].Value.Uint64(), s[1].Value.Uint64()
	}
	time.Sleep(300 * time.Millisecond)
	return c
}

// share is the part of a collection's CPU, in seconds, that allocating
// alloc bytes earns: a collection comes every GOGC percent of the live
// heap allocated. It is 0 when the collector is off or nothing is known.
func (c gcCycle) share(alloc uint64) float64 {
	if c.live == 0 || c.gogc == 0 {
		return 0
	}
	return c.cpu * float64(alloc) / (float64(c.gogc) / 100 * float64(c.live))
}

// memInUse returns the heap in use and the goroutine stacks after a
// collection.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
