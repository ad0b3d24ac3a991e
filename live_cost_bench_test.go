//go:build integration

package main

// The live view's cost as two whole runs: `fleetbench run` at 3,200
// sessions against a scripted server, once bare and once with the
// dashboard's event stream open and /metrics scraped every second, each
// in a process of its own so its CPU is the run's alone.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

// profiles numbers the runs' CPU profiles.
var profiles int

// liveRun is one whole run's figures.
type liveRun struct {
	cpu time.Duration // the run process's user+system CPU, start to exit
	// steady is its CPU over steadySpan, the steady part of the measured
	// window.
	steady, steadySpan time.Duration
	profile            string // its CPU profile over the steady window
	requests           int64  // completed requests measured
	// reads is the read system calls the process made over steadySpan
	// (/proc/PID/io syscr): how the client's reads batched tokens.
	reads   int64
	gcs     int // garbage collections over the whole run (gctrace)
	nice    int // the process's nice value (-10 when nice(1) could raise it)
	scrapes int // /metrics scrapes that answered
	events  int // dashboard events received
}

// perRequest is r's CPU per completed request over the steady window, and
// its read system calls per request.
func (r liveRun) perRequest(measure time.Duration) (cpu time.Duration, reads float64) {
	rps := float64(r.requests) / measure.Seconds()
	if rps == 0 || r.steadySpan <= 0 {
		return 0, 0
	}
	perSec := r.steadySpan.Seconds()
	return time.Duration(float64(r.steady) / perSec / rps), float64(r.reads) / perSec / rps
}

// runLive runs `fleetbench run` at sessions against target for warmup
// then measure; with live, it serves --metrics-listen, and while it runs a
// client holds the dashboard's event stream open and another scrapes
// /metrics every second.
func runLive(b *testing.B, target string, sessions int, warmup, measure time.Duration, live bool) liveRun {
	b.Helper()
	out := b.TempDir()
	args := []string{"--log-level", "error", "run", "--target", target, "--model", "scripted",
		"--concurrency", strconv.Itoa(sessions), "--ramp-up", (warmup / 2).String(),
		"--warmup", warmup.String(), "--duration", measure.String(), "--drain-timeout", "5s",
		"--skip-preflight", "--out", out}
	var addr string
	if live {
		addr = testserve.FreeAddr(b)
		args = append(args, "--metrics-listen", addr)
	}
	cmd := niced(b.Context(), os.Args[0], args...)
	// gctrace prints a line per collection on stderr, counted in gcs.
	gcTrace := "gctrace=1"
	if v := os.Getenv("GODEBUG"); v != "" {
		gcTrace += "," + v
	}
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "GODEBUG="+gcTrace)
	// Every run profiles its CPU over the steady window (bare runs too,
	// so the sampling's own small cost is on both sides), into
	// FLEETBENCH_LIVE_CPUPROFILE's directory when set.
	dir := os.Getenv("FLEETBENCH_LIVE_CPUPROFILE")
	if dir == "" {
		dir = b.TempDir()
	}
	name := "bare"
	if live {
		name = "live"
	}
	profiles++
	var r liveRun
	r.profile = filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, profiles))
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s,%s,%s", profileEnv, r.profile, warmup+2*time.Second, measure-3*time.Second))
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(b.Context())
	// The CPU is read from /proc over the steady part of the measured
	// window (from 2 s into it to 1 s before its end), so start-up, the
	// ramp and the drain, which vary from run to run, stay out of it.
	wg.Add(1)
	go func() {
		defer wg.Done()
		started := time.Now()
		sleepCtx(ctx, warmup+2*time.Second)
		pid := cmd.Process.Pid
		r.nice = procNice(pid)
		c0, s0 := testserve.ProcCPU(pid), procReads(pid)
		sleepCtx(ctx, time.Until(started.Add(warmup+measure-time.Second)))
		if ctx.Err() == nil {
			r.steady, r.reads = testserve.ProcCPU(pid)-c0, procReads(pid)-s0
			r.steadySpan = time.Since(started) - warmup - 2*time.Second
		}
	}()
	// FLEETBENCH_LIVE_WATCH=0 serves the live view but nobody watches
	// it, which tells the cost of serving it from that of watching it.
	if live && os.Getenv("FLEETBENCH_LIVE_WATCH") != "0" {
		wg.Add(2)
		go func() { defer wg.Done(); r.events = holdEvents(ctx, "http://"+addr+"/ui/events") }()
		go func() { defer wg.Done(); r.scrapes = scrapeEvery(ctx, "http://"+addr+"/metrics", time.Second) }()
	}
	err := cmd.Wait()
	cancel()
	wg.Wait()
	if err != nil {
		b.Fatalf("fleetbench run: %v\n%s", err, stderr.String())
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	raw, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		b.Fatal(err)
	}
	var res struct {
		Completed int64 `json:"completed"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		b.Fatalf("read result.json: %v", err)
	}
	r.requests = res.Completed
	for line := range strings.Lines(stderr.String()) {
		if strings.HasPrefix(line, "gc ") {
			r.gcs++
		}
	}
	return r
}

// procReads reads process pid's read system calls so far
// (/proc/PID/io syscr), 0 when it cannot.
func procReads(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// procNice reads process pid's nice value from /proc (0 when it cannot).
func procNice(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// nice is the 17th field after the command name's closing parenthesis.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 17 {
		return 0
	}
	n, _ := strconv.Atoi(f[16])
	return n
}

// holdEvents keeps the dashboard's event stream open until ctx ends,
// reconnecting as a browser's EventSource does (after a pause) while the
// server is not up yet or once it ended the stream, and counts its events.
func holdEvents(ctx context.Context, url string) int {
	n := 0
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return n
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				n++
			}
		}
		_ = resp.Body.Close()
		sleepCtx(ctx, time.Second)
	}
	return n
}

// scrapeEvery reads url every interval until ctx ends, as Prometheus
// would, and counts the scrapes that answered.
func scrapeEvery(ctx context.Context, url string, interval time.Duration) int {
	n := 0
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return n
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			n++
		}
	}
}

// liveCode is what the live view runs in a `fleetbench run`: the page's
// feed and event stream, the load metrics and their scrape, the meter
// that drains the recorder for both, and the HTTP server that serves them
// (only the live run has one).
const liveCode = `fleetbench/pkg/ui\.|fleetbench/pkg/loadmetrics\.|fleet\.\(\*meter\)|promhttp|client_golang|net/http\.\(\*conn\)\.serve`

// pprofShare is the share (%) of the CPU samples of profiles, merged,
// with a function matching focus on their stack, read with `go tool
// pprof`.
func pprofShare(ctx context.Context, profiles []string, focus string) (float64, error) {
	// No node is dropped from the sum, however small.
	args := append([]string{"tool", "pprof", "-top", "-nodefraction=0", "-nodecount=1000000", "-focus=" + focus}, profiles...)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("go tool pprof: %w: %s", err, out)
	}
	m := pprofShareRE.FindSubmatch(out)
	if m == nil {
		return 0, nil // no sample matched: pprof prints no such line
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

var pprofShareRE = regexp.MustCompile(`Showing nodes accounting for \S+, ([0-9.]+)% of`)

// BenchmarkLiveCost is issue 14's cost check as whole runs: a
// 3,200-session `fleetbench run` (20 tokens 50 ms apart per turn, about
// 3,000 turns/s) bare, and the same run with the dashboard's event stream
// open and /metrics scraped every second (the watchers run in this
// process, so the run's CPU is its own). Every run is a process of its
// own, started at nice -10 when allowed, and pairs come in the order
// bare-live, live-bare, bare-live, ... so that two runs of the same kind
// meet at every pair boundary: the difference between those two is the
// method's own noise (an A/A comparison), printed beside the live one.
//
// The figures, over the steady part of each run's measured window:
//   - live-overhead-%: the live run's extra CPU per completed request
//     (budget: 2%) over the pairs whose two runs both kept up (kept-pairs;
//     see keptUpShare): the mean of the median over the pairs that ran
//     bare first and the median over those that ran live first, which
//     cancels the machine's drift (order-effect-% is the difference of
//     the two medians); live-overhead-med-% is the plain median, -lo-%
//     and -hi-% the lowest and highest pair, and live-overhead-all-% the
//     median over every pair;
//   - aa-noise-%: the median absolute difference in CPU per request
//     between the two same-kind runs at each pair boundary that both kept
//     up: a live figure within it is not told apart from noise;
//   - live-code-%: the share of all live runs' CPU samples (their
//     profiles merged) spent in the live view's code (liveCode): its
//     direct cost;
//   - each variant's cores, requests/s, read system calls per request
//     (how the client's reads batched tokens, which moves CPU per request
//     by more than 2% from run to run on a shared machine) and garbage
//     collections per run.
//
// FLEETBENCH_LIVE_SESSIONS, FLEETBENCH_LIVE_PAIRS and
// FLEETBENCH_LIVE_MEASURE change the size (defaults 3200, 20, 10s: one
// pair's A/A noise is ~5%, so 6 pairs' estimate moved by +-2% from pass to
// pass);
// FLEETBENCH_LIVE_WATCH=0 leaves the live runs unwatched (--metrics-listen
// alone).
func BenchmarkLiveCost(b *testing.B) {
	sessions, pairs, measure := 3200, 20, 10*time.Second
	if v, err := strconv.Atoi(os.Getenv("FLEETBENCH_LIVE_SESSIONS")); err == nil && v > 0 {
		sessions = v
	}
	if v, err := strconv.Atoi(os.Getenv("FLEETBENCH_LIVE_PAIRS")); err == nil && v > 0 {
		pairs = v
	}
	if v, err := time.ParseDuration(os.Getenv("FLEETBENCH_LIVE_MEASURE")); err == nil && v >= 5*time.Second {
		measure = v
	}
	const warmup = 10 * time.Second
	target := startScripted(b)
	for range b.N {
		// runs in the order run; live[i] says whether runs[i] was live.
		var runs []liveRun
		var live []bool
		for p := range pairs {
			// Pair p runs bare first when p is even: b l | l b | b l ...
			for k := range 2 {
				isLive := (p+k)%2 == 1
				r := runLive(b, target, sessions, warmup, measure, isLive)
				if r.requests == 0 {
					b.Fatalf("pair %d: a run completed no requests", p+1)
				}
				if r.steadySpan <= 0 {
					b.Fatalf("pair %d: a run ended before its steady window was read", p+1)
				}
				if isLive && os.Getenv("FLEETBENCH_LIVE_WATCH") != "0" && (r.scrapes == 0 || r.events == 0) {
					b.Fatalf("pair %d: the live run was not watched: %d scrapes, %d events", p+1, r.scrapes, r.events)
				}
				runs, live = append(runs, r), append(live, isLive)
			}
		}
		reportLiveCost(b, runs, live, measure)
	}
}

// keptUpShare is the share of the fastest run's requests a run must have
// completed to count as kept up: one that fell further short was starved
// (by other work on the machine, or the VM's host) and its CPU per
// request is not comparable, since a starved client's reads carry more
// tokens each.
const keptUpShare = 0.97

// reportLiveCost prints the figures of BenchmarkLiveCost from its runs,
// in the order run, pairs alternating as it runs them; live[i] says
// whether runs[i] was live.
func reportLiveCost(b *testing.B, runs []liveRun, live []bool, measure time.Duration) {
	rps := func(r liveRun) float64 { return float64(r.requests) / measure.Seconds() }
	best := 0.0
	for _, r := range runs {
		best = max(best, rps(r))
	}
	keptUp := func(r liveRun) bool { return rps(r) >= keptUpShare*best }
	cpu := func(r liveRun) float64 { c, _ := r.perRequest(measure); return c.Seconds() }
	var (
		all, kept, aa, aaKept                  []float64
		keptBy                                 [2][]float64 // kept pairs by which ran first: bare, live
		bareCPU, liveCPU, bareReads, liveReads []float64
		bareCores, liveCores, bareRPS, liveRPS []float64
		bareGC, liveGC                         []float64
		liveProfiles                           []string
		pairLines                              []string
		scrapes, events                        int
	)
	for p := range len(runs) / 2 {
		bare, lv := runs[2*p], runs[2*p+1]
		if live[2*p] {
			bare, lv = lv, bare
		}
		overhead := 100 * (cpu(lv)/cpu(bare) - 1)
		all = append(all, overhead)
		both := keptUp(bare) && keptUp(lv)
		if both {
			kept = append(kept, overhead)
			if live[2*p] {
				keptBy[1] = append(keptBy[1], overhead)
			} else {
				keptBy[0] = append(keptBy[0], overhead)
			}
		}
		bc, br := bare.perRequest(measure)
		lc, lr := lv.perRequest(measure)
		bareCPU, liveCPU = append(bareCPU, float64(bc.Microseconds())), append(liveCPU, float64(lc.Microseconds()))
		bareReads, liveReads = append(bareReads, br), append(liveReads, lr)
		bareCores = append(bareCores, bare.steady.Seconds()/bare.steadySpan.Seconds())
		liveCores = append(liveCores, lv.steady.Seconds()/lv.steadySpan.Seconds())
		bareRPS, liveRPS = append(bareRPS, rps(bare)), append(liveRPS, rps(lv))
		bareGC, liveGC = append(bareGC, float64(bare.gcs)), append(liveGC, float64(lv.gcs))
		liveProfiles = append(liveProfiles, lv.profile)
		scrapes += lv.scrapes
		events += lv.events
		first := "bare"
		if live[2*p] {
			first = "live"
		}
		pairLines = append(pairLines, fmt.Sprintf("pair %d (%s first, nice %d, both kept up: %t): bare %.3f cores, %.0f req/s, %d µs CPU and %.1f reads per request, %d GCs; live %.3f cores, %.0f req/s, %d µs and %.1f reads per request, %d GCs, %d scrapes, %d events: %+.2f%% CPU per request",
			p+1, first, bare.nice, both, bareCores[p], bareRPS[p], bc.Microseconds(), br, bare.gcs,
			liveCores[p], liveRPS[p], lc.Microseconds(), lr, lv.gcs, lv.scrapes, lv.events, overhead))
	}
	// The same-kind runs that meet at each pair boundary (A/A).
	for i := 1; i+1 < len(runs); i += 2 {
		d := 100 * math.Abs(cpu(runs[i+1])/cpu(runs[i])-1)
		aa = append(aa, d)
		if keptUp(runs[i]) && keptUp(runs[i+1]) {
			aaKept = append(aaKept, d)
		}
	}
	share, err := pprofShare(b.Context(), liveProfiles, liveCode)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("extra CPU per request of the live run: median %+.2f%% over all %d pairs (from %+.2f%% to %+.2f%%), A/A %.2f%%",
		median(all), len(all), slices.Min(all), slices.Max(all), median(aa))
	if len(kept) > 0 {
		b.Logf("over the %d pairs that both kept up (>= %.0f%% of %.0f req/s): median %+.2f%% (from %+.2f%% to %+.2f%%), A/A %.2f%% over %d boundaries",
			len(kept), 100*keptUpShare, best, median(kept), slices.Min(kept), slices.Max(kept), median(aaKept), len(aaKept))
		b.ReportMetric(median(kept), "live-overhead-med-%")
		b.ReportMetric(slices.Min(kept), "live-overhead-lo-%")
		b.ReportMetric(slices.Max(kept), "live-overhead-hi-%")
		if len(keptBy[0]) > 0 && len(keptBy[1]) > 0 {
			// The machine's speed drifts over minutes, which adds to the
			// later run of every pair: the pairs that ran bare first
			// carry it one way, those that ran live first the other, and
			// the mean of the two medians cancels it.
			bf, lf := median(keptBy[0]), median(keptBy[1])
			b.Logf("by order: median %+.2f%% over %d pairs that ran bare first, %+.2f%% over %d that ran live first; their mean %+.2f%%",
				bf, len(keptBy[0]), lf, len(keptBy[1]), (bf+lf)/2)
			b.ReportMetric((bf+lf)/2, "live-overhead-%")
			b.ReportMetric(bf-lf, "order-effect-%")
		}
	} else {
		b.Logf("no pair had both runs keep up (>= %.0f%% of %.0f req/s): the machine was too busy for a whole-run figure", 100*keptUpShare, best)
	}
	// The pairs after the summary: a benchmark's log is cut after its
	// first lines unless -v.
	for _, l := range pairLines {
		b.Log(l)
	}
	b.ReportMetric(float64(len(kept)), "kept-pairs")
	if len(aaKept) > 0 {
		b.ReportMetric(median(aaKept), "aa-noise-%")
	}
	b.ReportMetric(median(all), "live-overhead-all-%")
	b.ReportMetric(share, "live-code-%")
	b.ReportMetric(median(bareCPU), "bare-µs/req")
	b.ReportMetric(median(liveCPU), "live-µs/req")
	b.ReportMetric(median(bareReads), "bare-reads/req")
	b.ReportMetric(median(liveReads), "live-reads/req")
	b.ReportMetric(median(bareGC), "bare-gc/run")
	b.ReportMetric(median(liveGC), "live-gc/run")
	b.ReportMetric(median(bareRPS), "bare-req/s")
	b.ReportMetric(median(liveRPS), "live-req/s")
	b.ReportMetric(median(bareCores), "bare-cores")
	b.ReportMetric(median(liveCores), "live-cores")
	b.ReportMetric(float64(scrapes)/float64(len(all)), "scrapes/run")
	b.ReportMetric(float64(events)/float64(len(all)), "events/run")
}

// median returns the median of v (the mean of the middle two when even).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
