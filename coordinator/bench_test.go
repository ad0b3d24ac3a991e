package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "github.com/fleetbench/fleetbench/gen/fleetbench/coordinator/v1"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
)

// benchAgents is how many agents the merge benchmarks play.
const benchAgents = 100

// fakeAgentsEnv, set to a coordinator's address, makes the test binary the
// fake agents of BenchmarkMerge100Agents instead of running tests;
// fakeAgentsBareEnv makes their reports carry no histogram and
// fakeAgentsConnEachEnv gives each its own connection.
const (
	fakeAgentsEnv         = "FLEETBENCH_BENCH_FAKE_AGENTS"
	fakeAgentsBareEnv     = "FLEETBENCH_BENCH_FAKE_AGENTS_BARE"
	fakeAgentsConnEachEnv = "FLEETBENCH_BENCH_FAKE_AGENTS_CONN_EACH"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(fakeAgentsEnv); addr != "" {
		os.Exit(runFakeAgents(addr, os.Getenv(fakeAgentsBareEnv) != "", os.Getenv(fakeAgentsConnEachEnv) != ""))
	}
	os.Exit(m.Run())
}

// benchReport builds a report with 8 metric histograms and 2 turn TTFT
// histograms (10 histograms) of realistic spread: 200 values each over
// 1 ms..251 ms, about 200 populated buckets.
func benchReport(seq uint64, window uint32, seed int) *pb.ConnectRequest {
	r := &pb.Report{Seq: seq, WindowId: window, Counters: &pb.Counters{Requests: 200, InputTokens: 20000, OutputTokens: 40000}}
	enc := func(k int) *pb.SparseHistogram {
		h := hdr.Default.New()
		for i := range 200 {
			h.RecordValue(int64(1000 + (i*7919+k*104729+seed)%250000))
		}
		return sparseToPB(h)
	}
	for m := range 8 {
		r.Metrics = append(r.Metrics, &pb.MetricHistogram{Metric: pb.Metric(m + 1), Histogram: enc(m)})
	}
	for turn := 1; turn <= 2; turn++ {
		r.Turns = append(r.Turns, &pb.TurnStats{Turn: int32(turn), Ttft: enc(10 + turn), Requests: 100})
	}
	return &pb.ConnectRequest{Msg: &pb.ConnectRequest_Report{Report: r}}
}

// likeTheCommand sets the collector's target as every fleetbench command
// runs with it (main calls load.TuneGC), so that the figures are the
// coordinator process's; the test binary's default is restored after b.
func likeTheCommand(b *testing.B) {
	before := debug.SetGCPercent(100)
	debug.SetGCPercent(before)
	load.TuneGC()
	b.Cleanup(func() { debug.SetGCPercent(before) })
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocs returns the bytes and objects the process has allocated so far.
func allocs() (bytes, objects uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc, ms.Mallocs
}

// BenchmarkMergeReport measures the coordinator's own part of a report of
// 10 histograms, without gRPC: converting the received message to the
// domain report (validating every histogram) and merging it into an open
// window. make bench runs it 2,000 times: at 20 the fresh window's first
// page faults would dominate.
func BenchmarkMergeReport(b *testing.B) {
	likeTheCommand(b)
	cfg := hdr.Default
	msgs := make([]*pb.ConnectRequest, 64)
	for i := range msgs {
		msgs[i] = benchReport(uint64(i+1), 1, i)
	}
	w := newWindow(1, 0, KindMeasure, time.Unix(0, 0), cfg)
	m := &member{id: "bench"}
	merge := func(msg *pb.ConnectRequest) {
		got, err := messageFromPB(msg, cfg)
		if err != nil {
			b.Fatal(err)
		}
		rep, ok := got.(report)
		if !ok {
			b.Fatalf("report refused: %v", got)
		}
		if err := w.apply(m, rep, nil); err != nil {
			b.Fatal(err)
		}
	}
	// One report first, so that pooled state is built before counting.
	merge(msgs[0])
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	bytes0, objects0 := allocs()
	for n := range b.N {
		merge(msgs[n%len(msgs)])
	}
	b.StopTimer()
	bytes1, objects1 := allocs()
	reportFigures(b, cpuTime()-cpu0, bytes1-bytes0, objects1-objects0, float64(b.N))
}

// reportFigures prints a benchmark's figures per report: CPU time in µs,
// bytes and objects allocated.
func reportFigures(b *testing.B, cpu time.Duration, bytes, objects uint64, reports float64) {
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/reports, "cpu-µs/report")
	b.ReportMetric(float64(bytes)/reports, "B/report")
	b.ReportMetric(float64(objects)/reports, "allocs/report")
}

// scrapeEvery is how many reports the benchmarks merge between two
// Prometheus scrapes: 1,000 reports/s (the goal's rate) scraped every
// second. A scrape converts the load histograms' accumulated buckets
// (see prom.Histogram), so its cost is counted in the per-report figures.
const scrapeEvery = 1000

// BenchmarkMerge100Agents plays 100 agents, each sending one report of 10
// histograms per round (iteration) over real loopback gRPC and waiting for
// its ack, and measures what the coordinator spends per report. The fake
// agents run in a child process (this test binary, see runFakeAgents), so
// the CPU and allocation figures are the coordinator process's alone:
// receiving, decoding, validating and merging each report, acking it, its
// heartbeats, and a Prometheus scrape every scrapeEvery reports.
// agents-cpu-µs/report is the fake agents' side (gRPC client and protobuf;
// their reports are built before the timer starts).
//
// The histograms case is the real one; the bare case sends the same
// reports without histograms (counters only), the cost of the protocol
// alone, so that the difference is what the histograms cost.
//
// In those two the fake agents share one HTTP/2 connection, so that each
// round's 100 reports arrive in a few reads and their acks leave in a few
// writes. Agents as deployed have a connection each: the conn-each cases
// measure that, where each report costs the coordinator its own read
// system calls (two: gRPC reads until the socket is empty) and its ack its
// own write.
func BenchmarkMerge100Agents(b *testing.B) {
	b.Run("histograms", func(b *testing.B) { merge100Agents(b, false, false) })
	b.Run("bare", func(b *testing.B) { merge100Agents(b, true, false) })
	b.Run("histograms-conn-each", func(b *testing.B) { merge100Agents(b, false, true) })
	b.Run("bare-conn-each", func(b *testing.B) { merge100Agents(b, true, true) })
}

func merge100Agents(b *testing.B, bare, connEach bool) {
	likeTheCommand(b)
	reg := prometheus.NewRegistry()
	c, err := New(Config{
		Agents: benchAgents, Window: time.Hour, HeartbeatTimeout: time.Hour, Grace: time.Hour,
		Stages: []Stage{{Level: benchAgents, Duration: time.Hour}}, StartDelay: time.Millisecond,
	}, nil, WithRegisterer(reg))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := c.NewServer(ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_, _ = c.Run(ctx)
	}()
	defer func() { cancel(); <-runDone }()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeAgentsEnv+"="+lis.Addr().String())
	if bare {
		cmd.Env = append(cmd.Env, fakeAgentsBareEnv+"=1")
	}
	if connEach {
		cmd.Env = append(cmd.Env, fakeAgentsConnEachEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start fake agents: %v", err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	// readLine returns the next line's fields after the expected word.
	readLine := func(word string) []string {
		b.Helper()
		if !lines.Scan() {
			b.Fatalf("fake agents ended before %q: %v", word, lines.Err())
		}
		f := strings.Fields(lines.Text())
		if len(f) == 0 || f[0] != word {
			b.Fatalf("fake agents said %q, want %q", lines.Text(), word)
		}
		return f[1:]
	}
	wire, _ := strconv.ParseFloat(readLine("ready")[0], 64)
	time.Sleep(50 * time.Millisecond) // let the window's start pass

	agentsCPU := func() time.Duration {
		if _, err := io.WriteString(stdin, "cpu\n"); err != nil {
			b.Fatal(err)
		}
		ns, _ := strconv.ParseInt(readLine("cpu")[0], 10, 64)
		return time.Duration(ns)
	}
	agents0 := agentsCPU()
	b.ResetTimer()
	cpu0 := cpuTime()
	bytes0, objects0 := allocs()
	scrapes := 0
	for n := range b.N {
		if _, err := io.WriteString(stdin, "round\n"); err != nil {
			b.Fatal(err)
		}
		readLine("done")
		if (n+1)*benchAgents%scrapeEvery == 0 {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
			scrapes++
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	bytes1, objects1 := allocs()
	agents := agentsCPU() - agents0
	reports := float64(b.N * benchAgents)
	reportFigures(b, cpu, bytes1-bytes0, objects1-objects0, reports)
	b.ReportMetric(float64(b.Elapsed())/float64(time.Microsecond)/reports, "µs/report")
	b.ReportMetric(float64(agents)/float64(time.Microsecond)/reports, "agents-cpu-µs/report")
	b.ReportMetric(float64(scrapes), "scrapes")
	b.ReportMetric(wire, "wire-bytes/report")
	b.ReportMetric(0, "ns/op")
}

// runFakeAgents is the child process of BenchmarkMerge100Agents: it
// connects 100 fake agents to the coordinator at addr and, once every one
// has its window, prints "ready <wire bytes per report>". Then, for each
// line "round" on stdin, every agent sends its next report and waits for
// its ack, and it prints "done"; for "cpu" it prints "cpu <ns>", its own
// CPU time so far. It returns when stdin closes. Bare reports carry no
// histogram. With connEach each agent dials a connection of its own, as
// agents do; otherwise they share one.
func runFakeAgents(addr string, bare, connEach bool) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "fake agents:", err)
		return 1
	}
	var cl pb.CoordinatorServiceClient
	fakes := make([]*fakeAgent, benchAgents)
	for i := range fakes {
		if cl == nil || connEach {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return fail(err)
			}
			defer cc.Close()
			cl = pb.NewCoordinatorServiceClient(cc)
		}
		var err error
		if fakes[i], err = dialFake(ctx, cl, fmt.Sprintf("bench-%d", i), i, hdr.Default); err != nil {
			return fail(err)
		}
	}
	// Each agent cycles through reports of its own, built now so that
	// building costs no round anything; a report is marshaled when it is
	// sent, so setting its seq before each send reuses it.
	const distinct = 8
	reports := make([][]*pb.ConnectRequest, len(fakes))
	var wire int
	for i, f := range fakes {
		var window uint32
		select {
		case window = <-f.windows:
		case <-f.done:
			return fail(fmt.Errorf("agent %d: stream ended before a phase", i))
		}
		for k := range distinct {
			m := benchReport(0, window, i*distinct+k)
			if bare {
				m.GetReport().Metrics, m.GetReport().Turns = nil, nil
			}
			reports[i] = append(reports[i], m)
			wire += proto.Size(m)
		}
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", wire/(len(fakes)*distinct))
	_ = out.Flush()

	in := bufio.NewScanner(os.Stdin)
	for seq := uint64(1); in.Scan(); {
		switch in.Text() {
		case "cpu":
			fmt.Fprintf(out, "cpu %d\n", cpuTime())
		case "round":
			var wg sync.WaitGroup
			errs := make(chan error, len(fakes))
			for i, f := range fakes {
				m := reports[i][int(seq)%distinct]
				m.GetReport().Seq = seq
				wg.Go(func() {
					if err := f.send(m); err != nil {
						errs <- fmt.Errorf("agent %d: send report %d: %w", i, seq, err)
					} else if !f.waitAck(ctx, seq) {
						errs <- fmt.Errorf("agent %d: report %d not acked", i, seq)
					}
				})
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				return fail(err)
			}
			seq++
			fmt.Fprintln(out, "done")
		}
		_ = out.Flush()
	}
	return 0
}

// BenchmarkReportMetrics measures what the Prometheus load metrics add
// to one 10-histogram report at the coordinator, on top of
// BenchmarkMergeReport's merge: the report's counters, and every
// scrapeEvery reports (a second at 1,000 reports/s) a publication of the
// open window's merged latency histograms (TTFT, ITL, TPOT, E2E, lag)
// and a scrape (a Gather), counted in the figures.
func BenchmarkReportMetrics(b *testing.B) {
	likeTheCommand(b)
	cfg := hdr.Default
	reps := make([]report, 64)
	// The reports' histograms are checked as the run loop checks them,
	// merging them into a window, which hands them to the metrics.
	w, agent := newWindow(1, 0, KindMeasure, time.Unix(0, 0), cfg), &member{id: "bench"}
	for i := range reps {
		rep, err := messageFromPB(benchReport(uint64(i+1), 1, i), cfg)
		if err != nil {
			b.Fatal(err)
		}
		reps[i] = rep.(report)
		if err := w.apply(agent, reps[i], nil); err != nil {
			b.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	w.mode, w.level = "kv", 100
	m.report(w, reps[0].Window)
	m.publish([]*window{w}, time.Unix(1, 0), false)
	if _, err := reg.Gather(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	bytes0, objects0 := allocs()
	for n := range b.N {
		m.report(w, reps[n%len(reps)].Window)
		if (n+1)%scrapeEvery == 0 {
			m.publish([]*window{w}, time.Unix(int64(2+n/scrapeEvery), 0), false)
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	bytes1, objects1 := allocs()
	reportFigures(b, cpuTime()-cpu0, bytes1-bytes0, objects1-objects0, float64(b.N))
}
