//go:build soak

package main

// The soak: a coordinator, 4 agent processes and `fleetbench sim`, all
// separate processes on this machine, under faults injected on a
// schedule. `make soak` runs the full version (8,000 sessions, 16
// minutes, the faults in the first 4); FLEETBENCH_SOAK=short runs the same
// code small and quick, as `make test` does after the race-detected suite.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/benchresult"
)

// soakPlan is one soak's size.
type soakPlan struct {
	sessions int
	measure  time.Duration
	// faultsIn is the span the fault schedule is laid over (5%, 15%,
	// 25% and 35% of it). The full soak measures longer than that, so
	// that its last half, judged for growth, comes after the load has
	// recovered from the last fault.
	faultsIn  time.Duration
	maxTokens int
	// startup is the simulator's worker startup after a restart.
	startup time.Duration
	// replicas, maxBatch and kvBlocks size the simulator so that every
	// session can decode at once (replicas x maxBatch >= sessions): the
	// soak tests fleetbench, not an overloaded server's queue.
	replicas, maxBatch, kvBlocks int
}

func soakPlanFromEnv(t *testing.T) soakPlan {
	switch os.Getenv("FLEETBENCH_SOAK") {
	case "full":
		// Requests of 10 s and more: 400 tokens at the profile's 25-50 ms.
		// The last fault (the simulator's restart) ends every
		// conversation at 3m30s; the agents' collector target is back to
		// its level 2 to 3 minutes after the workers return, and their
		// RSS climbs after it, to the runtime's ceiling (about 1.1 times
		// the target, plus stacks and the binary), for 5 to 8 minutes
		// more: flat from minute 12 on 2026-12-02 (make soak, 07:15). So
		// the half judged for growth starts at 10 minutes.
		return soakPlan{sessions: 8000, measure: 20 * time.Minute, faultsIn: 10 * time.Minute, maxTokens: 400, startup: time.Minute,
			replicas: 32, maxBatch: 256, kvBlocks: 20000}
	case "short":
		return soakPlan{sessions: 400, measure: 100 * time.Second, faultsIn: 100 * time.Second, maxTokens: 120, startup: 5 * time.Second,
			replicas: 4, maxBatch: 128, kvBlocks: 8000}
	default:
		t.Skip("FLEETBENCH_SOAK is not set: `make soak` runs the full soak, FLEETBENCH_SOAK=short the short one")
		return soakPlan{}
	}
}

// cutProxy forwards one agent's gRPC connection to the coordinator and can
// cut it: close what is open and refuse new connections until restored.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// procStat is one sample of a process's resources.
type procStat struct {
	rss int64 // KiB
	// anon and file split rss (KiB): the process's own memory (heap,
	// stacks, the runtime's structures) and the pages of files it maps,
	// the binary's code and read-only data above all.
	anon, file int64
	fds        int
	threads    int
}

func readProcStat(pid int) (procStat, bool) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			s.rss, _ = strconv.ParseInt(f[0], 10, 64)
		case "RssAnon":
			s.anon, _ = strconv.ParseInt(f[0], 10, 64)
		case "RssFile":
			s.file, _ = strconv.ParseInt(f[0], 10, 64)
		case "Threads":
			s.threads, _ = strconv.Atoi(f[0])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, false
	}
	s.fds = len(fds)
	return s, true
}

// soakSample is one second of the soak.
type soakSample struct {
	at        time.Duration // since the measurement started
	inFlight  int           // at the simulator: the mean of the readings that answered
	read      int           // readings of the simulator's in-flight count that answered
	failed    int           // readings that did not
	readErr   error         // the last failed reading's error
	procs     map[string]procStat
	goroutine map[string]float64 // from each process's /metrics
	// heapGoal is each process's next collection target (the live heap
	// after the last collection times 1+GOGC/100), from /metrics.
	heapGoal map[string]float64
	// mem is each process's Go memory by kind (goMemory), from /metrics:
	// what its RSS is made of.
	mem map[string]map[string]float64
}

// goMemory are the Go runtime's memory figures the soak logs beside each
// process's RSS, from client_golang's Go collector.
var goMemory = []string{
	"go_memstats_heap_inuse_bytes",    // spans holding objects
	"go_memstats_heap_idle_bytes",     // spans holding none
	"go_memstats_heap_released_bytes", // of those, returned to the OS
	"go_memstats_stack_inuse_bytes",
	"go_memstats_sys_bytes", // all the runtime took from the OS
}

// metricValues reads unlabelled samples from a /metrics endpoint in one
// scrape, with a short timeout (a stopped process does not answer); a name
// it did not find is absent from the result.
func metricValues(ctx context.Context, url string, names ...string) map[string]float64 {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			got[name] = f
		}
	}
	return got
}

func soakInFlight(ctx context.Context, base string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/state", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read simulator state: %w", err)
	}
	defer resp.Body.Close()
	var st struct {
		InFlight []int `json:"in_flight"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("decode simulator state: %w", err)
	}
	n := 0
	for _, v := range st.InFlight {
		n += v
	}
	return n, nil
}

// soakMeanInFlight is the simulator's in-flight count over most of a
// second: the mean of five readings 150 ms apart. One instant can land on
// the turnover of many sessions at once, which a fault such as a worker
// restart lines up (all sessions' requests start again together and end
// together, a few seconds later, again and again); the mean weighs such a
// dip by how long it lasts. A reading that failed (the simulator's admin
// endpoint did not answer within 500 ms, as happens on a saturated
// machine) says nothing about the sessions: it is left out of the mean
// and counted in failed, with the last error in err. When every reading
// failed, read is 0 and the second is unmeasured.
func soakMeanInFlight(ctx context.Context, base string) (mean, read, failed int, err error) {
	const readings = 5
	sum := 0
	for i := range readings {
		if i > 0 {
			sleepCtx(ctx, 150*time.Millisecond)
		}
		n, rerr := soakInFlight(ctx, base)
		if rerr != nil {
			failed, err = failed+1, rerr
			continue
		}
		sum += n
		read++
	}
	if read > 0 {
		mean = (sum + read/2) / read
	}
	return mean, read, failed, err
}

var reportsSentRE = regexp.MustCompile(`agent done: .*reports_sent=(\d+) reports_unacked=(\d+)`)

// TestSoak runs the fleet through faults and checks nothing recorded is
// lost or counted twice, every window closes, the load holds outside the
// faults, and no process grows.
func TestSoak(t *testing.T) {
	plan := soakPlanFromEnv(t)
	// The verdict and figures for `make soak`'s results file (see
	// benchresult.Emit), written when the test ends, failed or not.
	figures := map[string]float64{"sessions": float64(plan.sessions), "measure-s": plan.measure.Seconds()}
	t.Cleanup(func() {
		figures["failures"] = 0
		if t.Failed() {
			figures["failures"] = 1
		}
		var ms []benchresult.Metric
		for unit, v := range figures {
			ms = append(ms, benchresult.Metric{Value: v, Unit: unit})
		}
		slices.SortFunc(ms, func(a, b benchresult.Metric) int { return strings.Compare(a.Unit, b.Unit) })
		if err := benchresult.Emit(benchresult.SoakPackage, "Soak", ms...); err != nil {
			t.Errorf("record the soak's figures: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), plan.measure+5*time.Minute)
	defer cancel()
	env := map[string]string{tokenEnv: "soak-token"}

	// The simulator, as users run it.
	simAddr := freeAddr(t)
	simBase := "http://" + simAddr
	simProc := startProc(t, ctx, "sim", "", nil, nil, "--log-level", "warn", "sim", "--listen", simAddr,
		"--replicas", strconv.Itoa(plan.replicas), "--max-batch", strconv.Itoa(plan.maxBatch), "--kv-blocks", strconv.Itoa(plan.kvBlocks),
		"--model", "sim-model", "--time-scale", "1", "--startup-time", plan.startup.String())
	if err := waitHTTP(ctx, simBase+"/v1/models"); err != nil {
		t.Fatalf("simulator: %v\n%s", err, simProc)
	}

	coordAddr, coordMetrics := freeAddr(t), freeAddr(t)
	out := t.TempDir()
	const warmup = 15 * time.Second
	coord := startProc(t, ctx, "coordinator", "", nil, env, "--log-level", "info", "coordinator",
		"--listen", coordAddr, "--agents", "4", "--target", simBase, "--model", "sim-model", "--api-key-env", "",
		"--concurrency", strconv.Itoa(plan.sessions), "--warmup", warmup.String(), "--duration", plan.measure.String(),
		"--max-tokens", strconv.Itoa(plan.maxTokens), "--prompt-tokens", "600", "--think-time", "none",
		"--metrics-listen", coordMetrics, "--out", out)

	proxies := make([]*cutProxy, 4)
	agentMetrics := make([]string, 4)
	agents := make([]*proc, 5) // the 5th is agent 3 restarted after its kill
	startAgent := func(slot, index int) {
		agentMetrics[index] = freeAddr(t)
		agents[slot] = startProc(t, ctx, fmt.Sprintf("agent %d", slot), "", nil, env, "--log-level", "info", "agent",
			"--coordinator", proxies[index].addr(), "--id", fmt.Sprintf("soak-%d", index), "--index", strconv.Itoa(index),
			"--metrics-listen", agentMetrics[index])
	}
	for i := range 4 {
		proxies[i] = newCutProxy(t, coordAddr)
		startAgent(i, i)
	}

	// The measurement starts after the agents join and the warm-up: wait
	// for the simulator to see the load, then for the warm-up.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, _ := soakInFlight(ctx, simBase)
		if n >= plan.sessions/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load never reached the simulator (in flight %d)\n%s", n, coord)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(warmup)
	start := time.Now()
	t.Logf("measurement started: %d sessions for %s", plan.sessions, plan.measure)

	// Sampling, every second, until the coordinator exits.
	var mu sync.Mutex
	var samples []soakSample
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-coord.done:
				return
			case <-tick.C:
			}
			s := soakSample{at: time.Since(start), procs: map[string]procStat{}, goroutine: map[string]float64{}, heapGoal: map[string]float64{}, mem: map[string]map[string]float64{}}
			s.inFlight, s.read, s.failed, s.readErr = soakMeanInFlight(ctx, simBase)
			procs := map[string]*proc{"coordinator": coord}
			for i := range 4 {
				procs[fmt.Sprintf("agent %d", i)] = agents[i]
			}
			mu.Lock()
			if agents[4] != nil {
				procs["agent 3"] = agents[4]
			}
			mu.Unlock()
			for name, p := range procs {
				if st, ok := readProcStat(p.cmd.Process.Pid); ok {
					s.procs[name] = st
				}
			}
			scrape := func(name, addr string) {
				m := metricValues(ctx, "http://"+addr+"/metrics", append([]string{"go_goroutines", "go_memstats_next_gc_bytes"}, goMemory...)...)
				if v, ok := m["go_goroutines"]; ok {
					s.goroutine[name] = v
				}
				if v, ok := m["go_memstats_next_gc_bytes"]; ok {
					s.heapGoal[name] = v
				}
				s.mem[name] = m
			}
			scrape("coordinator", coordMetrics)
			mu.Lock()
			addrs := slices.Clone(agentMetrics)
			mu.Unlock()
			for i, addr := range addrs {
				scrape(fmt.Sprintf("agent %d", i), addr)
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
		}
	}()

	// The faults, each with the seconds it disturbs the load.
	type fault struct {
		name     string
		at, span time.Duration
	}
	var faults []fault
	at := func(frac float64) time.Duration { return time.Duration(frac * float64(plan.faultsIn)) }
	sleepUntil := func(d time.Duration) {
		if w := time.Until(start.Add(d)); w > 0 {
			time.Sleep(w)
		}
	}
	// The faults fill the first half; the second half shows whether the
	// processes settle and stay flat after them.
	// 1. kill -9 agent 3, start it again 3 s later (a new incarnation).
	sleepUntil(at(0.05))
	_ = agents[3].cmd.Process.Signal(syscall.SIGKILL)
	faults = append(faults, fault{"kill -9 agent 3", time.Since(start), faultSpan})
	time.Sleep(3 * time.Second)
	mu.Lock()
	startAgent(4, 3)
	mu.Unlock()
	// 2. cut agent 1's connection for 6 s.
	sleepUntil(at(0.15))
	proxies[1].cut()
	faults = append(faults, fault{"cut agent 1's connection for 6 s", time.Since(start), 6*time.Second + faultSpan})
	time.Sleep(6 * time.Second)
	proxies[1].restore()
	// 3. stop the coordinator for 5 s.
	sleepUntil(at(0.25))
	_ = coord.cmd.Process.Signal(syscall.SIGSTOP)
	faults = append(faults, fault{"SIGSTOP the coordinator for 5 s", time.Since(start), 5*time.Second + faultSpan})
	time.Sleep(5 * time.Second)
	_ = coord.cmd.Process.Signal(syscall.SIGCONT)
	// 4. restart the simulator's workers (their caches and running
	// requests go).
	sleepUntil(at(0.35))
	restartAt := time.Since(start)
	var restart struct {
		StartupSeconds float64 `json:"startup_seconds"`
	}
	resp, err := http.Post(simBase+"/admin/restart/workers", "application/json", nil)
	if err != nil {
		t.Errorf("restart the simulator's workers: %v", err)
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&restart)
		resp.Body.Close()
	}
	// The workers serve nothing while they start again.
	faults = append(faults, fault{fmt.Sprintf("restart the simulator's workers (%.0f s to start)", restart.StartupSeconds),
		restartAt, time.Duration(restart.StartupSeconds*float64(time.Second)) + faultSpan})

	code := coord.wait(t, plan.measure+3*time.Minute)
	<-sampleDone
	for _, a := range agents {
		a.wait(t, time.Minute)
	}
	if code != exitOK {
		t.Errorf("coordinator exit %d\n%s", code, coord)
	}

	// Nothing lost or counted twice: every live agent's reports acked,
	// and what each incarnation sent is what the windows applied.
	windows, _ := filepath.Glob(filepath.Join(out, "window-*.json"))
	applied := map[string]int{} // agent id/incarnation
	lost := map[string]float64{}
	lostAtEnd := map[string]bool{}
	byID := map[string]int{} // reports applied of each id's incarnations that were not lost at the end
	closed := 0
	for _, f := range windows {
		var w struct {
			ID           int    `json:"id"`
			Kind         string `json:"kind"`
			ClosedBy     string `json:"closed_by"`
			LateRequests int64  `json:"late_requests"`
			Coverage     []struct {
				Agent       string  `json:"Agent"`
				Incarnation uint64  `json:"Incarnation"`
				LostSeconds float64 `json:"LostSeconds"`
				Reports     int     `json:"Reports"`
				Lost        bool    `json:"Lost"`
			} `json:"coverage"`
		}
		readJSON(t, f, &w)
		if w.ClosedBy == "watermarks" || w.ClosedBy == "grace" {
			closed++
		} else {
			t.Errorf("window %d (%s) closed by %q", w.ID, w.Kind, w.ClosedBy)
		}
		if w.LateRequests > 0 {
			t.Logf("window %d (%s): %d late requests (kept apart, not lost)", w.ID, w.Kind, w.LateRequests)
		}
		for _, c := range w.Coverage {
			key := fmt.Sprintf("%s#%d", c.Agent, c.Incarnation)
			applied[key] += c.Reports
			if c.LostSeconds > 0 {
				lost[key] += c.LostSeconds
			}
			if c.Lost {
				lostAtEnd[key] = true
			}
		}
	}
	if closed != 2 {
		t.Errorf("%d windows closed, want 2 (warm-up and measurement): %v", closed, windows)
	}
	sentTotal, appliedTotal := 0, 0
	for k, v := range applied {
		appliedTotal += v
		if !lostAtEnd[k] {
			id, _, _ := strings.Cut(k, "#")
			byID[id] += v
		}
	}
	for i, a := range agents {
		if i == 3 {
			continue // killed: its last reports may never have been acked
		}
		m := reportsSentRE.FindStringSubmatch(a.errb.String() + a.out.String())
		if m == nil {
			t.Errorf("%s: no final report count\n%s", a.name, a)
			continue
		}
		sent, _ := strconv.Atoi(m[1])
		unacked, _ := strconv.Atoi(m[2])
		sentTotal += sent
		id := fmt.Sprintf("soak-%d", min(i, 3))
		t.Logf("%s (%s): sent %d reports, %d unacked; the windows applied %d", a.name, id, sent, unacked, byID[id])
		if byID[id] != sent {
			t.Errorf("%s (%s): sent %d reports, the windows applied %d", a.name, id, sent, byID[id])
		}
		figures["unacked-reports"] += float64(unacked)
		if unacked != 0 {
			t.Errorf("%s: %d reports never acked", a.name, unacked)
		}
	}
	t.Logf("reports: %d sent by the agents that finished, %d applied in all (incarnations: %v); lost seconds %v", sentTotal, appliedTotal, applied, lost)
	if len(lostAtEnd) != 1 {
		t.Errorf("incarnations lost at the end %v, want exactly the killed agent 3", lostAtEnd)
	}
	if !hasPrefixKey(lost, "soak-1#") {
		t.Errorf("agent 1's cut connection states no lost seconds: %v", lost)
	}

	// The load held outside the faults: at least 95% of the sessions in
	// flight at the server, except in the 20 s after each fault.
	mu.Lock()
	defer mu.Unlock()
	inFault := func(at time.Duration) bool {
		for _, f := range faults {
			if at >= f.at-time.Second && at < f.at+f.span {
				return true
			}
		}
		return false
	}
	var kept, total, most, unmeasured, reads, failedReads int
	var lastErr error
	var worst soakSample
	worst.inFlight = plan.sessions
	for _, s := range samples {
		if s.at < 0 || s.at > plan.measure {
			continue
		}
		if inFault(s.at) {
			continue
		}
		total++
		reads, failedReads = reads+s.read+s.failed, failedReads+s.failed
		if s.readErr != nil {
			lastErr = s.readErr
		}
		if s.read == 0 {
			unmeasured++ // counted below the bar: nothing shows it was not
			continue
		}
		most = max(most, s.inFlight)
		if float64(s.inFlight) >= 0.95*float64(plan.sessions) {
			kept++
		}
		if s.inFlight < worst.inFlight {
			worst = s
		}
	}
	t.Logf("in flight at the simulator outside faults: %d of %d seconds at >= 95%% of %d; lowest %d at %s, highest %d",
		kept, total, plan.sessions, worst.inFlight, worst.at.Round(time.Second), most)
	if failedReads > 0 {
		// A reading that failed is left out of its second's mean; it used to
		// count as 0 sessions, which on a saturated machine turned slow
		// answers into dips of a fifth (4 readings of 5) of the sessions.
		t.Logf("simulator state readings: %d of %d failed, %d seconds with none (counted below the bar); last error: %v",
			failedReads, reads, unmeasured, lastErr)
	}
	// A second of the 100 s short soak can still catch the turnover of
	// many sessions at once (soakMeanInFlight; one dip in 50 seen with
	// single readings, three in 51 once the worker restart had lined the
	// sessions up): at most 5% of the seconds outside the faults may fall
	// below the bar or go unmeasured, and none may be empty.
	if total > 0 {
		figures["in-flight-seconds-%"] = 100 * float64(kept) / float64(total)
	}
	if total == 0 || total == unmeasured || float64(total-kept) > 0.05*float64(total) || worst.inFlight == 0 {
		t.Errorf("in flight below 95%% of %d sessions in %d of %d seconds outside the faults (%d of them unmeasured)", plan.sessions, total-kept, total, unmeasured)
	}

	// No process grows over the last half: the mean of its last quarter
	// within 10% of the mean of the quarter before, fault seconds left out.
	// RSS is judged over the full soak only: over the short one's 100 s
	// a process's RSS still follows its heap up to the collector's target
	// (GOGC=400 lets the heap reach five times the live data), which says
	// nothing of a leak; open files and goroutines are exact either way.
	// The split of RSS into anonymous and file-backed pages is printed,
	// not judged: the file part is the binary's pages (flat from the
	// first minute), the anonymous part the heap RSS already follows.
	judgeRSS := plan.measure >= 5*time.Minute
	// growth judges one figure; a judged one's growth in percent also goes
	// to figures under unit, the most of any process.
	growth := func(name, unit string, judged bool, get func(soakSample) (float64, bool)) {
		var q3, q4 []float64
		for _, s := range samples {
			v, ok := get(s)
			if !ok || inFault(s.at) {
				continue
			}
			switch {
			case s.at >= plan.measure/2 && s.at < plan.measure*3/4:
				q3 = append(q3, v)
			case s.at >= plan.measure*3/4 && s.at <= plan.measure:
				q4 = append(q4, v)
			}
		}
		if len(q3) == 0 || len(q4) == 0 {
			t.Logf("%s: too few samples", name)
			return
		}
		m3, m4 := mean(q3), mean(q4)
		t.Logf("%s: %.0f then %.0f (%+.1f%%)", name, m3, m4, 100*(m4-m3)/m3)
		if !judged {
			return
		}
		if g, ok := figures[unit]; !ok || 100*(m4-m3)/m3 > g {
			figures[unit] = 100 * (m4 - m3) / m3
		}
		if m4 > 1.10*m3+8 { // +8: a few descriptors or goroutines of slack on small counts
			t.Errorf("%s grew from %.0f to %.0f over the last half", name, m3, m4)
		}
	}
	names := []string{"coordinator", "agent 0", "agent 1", "agent 2", "agent 3"}
	// The memory over time, a line a minute: RSS and the collector's
	// target of each process, then what the Go runtime holds of the RSS:
	// heap spans in use, free heap spans not returned to the OS, stacks,
	// the runtime's own structures (what it took from the OS besides the
	// heap and the stacks: span and GC metadata, caches), and what is
	// left of the RSS outside all of that (the binary's pages, memory the
	// runtime returned that the kernel still counts) (MiB).
	for _, s := range samples {
		if s.at%time.Minute >= time.Second {
			continue
		}
		var b strings.Builder
		for _, n := range names {
			m := s.mem[n]
			const mib = 1 << 20
			inuse, kept := m["go_memstats_heap_inuse_bytes"], m["go_memstats_heap_idle_bytes"]-m["go_memstats_heap_released_bytes"]
			stacks := m["go_memstats_stack_inuse_bytes"]
			own := m["go_memstats_sys_bytes"] - inuse - m["go_memstats_heap_idle_bytes"] - stacks
			p := s.procs[n]
			rss := float64(p.rss) * 1024
			fmt.Fprintf(&b, "  %s %.0f/%.0f (%.0f+%.0f+%.0f+%.0f, %.0f outside; anon %.0f file %.0f)", n, rss/mib, s.heapGoal[n]/mib,
				inuse/mib, kept/mib, stacks/mib, own/mib, (rss-inuse-kept-stacks-own)/mib, float64(p.anon)/1024, float64(p.file)/1024)
		}
		t.Logf("memory at %s (RSS/GC target MiB (heap in use + free heap kept + stacks + runtime, outside; RSS anonymous and file-backed)), %d in flight (%d of %d readings):%s", s.at.Round(time.Second), s.inFlight, s.read, s.read+s.failed, b.String())
	}
	for _, n := range names {
		growth(n+" RSS KiB", "rss-growth-%", judgeRSS, func(s soakSample) (float64, bool) { p, ok := s.procs[n]; return float64(p.rss), ok })
		growth(n+" RSS anonymous KiB", "", false, func(s soakSample) (float64, bool) { p, ok := s.procs[n]; return float64(p.anon), ok })
		growth(n+" RSS file-backed KiB", "", false, func(s soakSample) (float64, bool) { p, ok := s.procs[n]; return float64(p.file), ok })
		growth(n+" open files", "open-files-growth-%", true, func(s soakSample) (float64, bool) { p, ok := s.procs[n]; return float64(p.fds), ok })
		growth(n+" goroutines", "goroutines-growth-%", true, func(s soakSample) (float64, bool) { v, ok := s.goroutine[n]; return v, ok })
	}
	for _, f := range faults {
		t.Logf("fault at %s: %s", f.at.Round(time.Second), f.name)
	}
	for _, line := range strings.Split(coord.errb.String(), "\n") {
		for _, ev := range []string{"agent joined", "agent lost", "agent disconnected", "window closed", "stage done", "stage draining", "ERROR", "WARN"} {
			if strings.Contains(line, ev) {
				t.Logf("coordinator: %s", line)
				break
			}
		}
	}
	stdout := coord.out.String()
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "schedule lag") || strings.Contains(line, "Successful requests") ||
			strings.Contains(line, "Failed requests") || strings.Contains(line, "P99 TTFT (ms)") || strings.Contains(line, "Median TTFT (ms)") {
			t.Logf("result: %s", strings.TrimSpace(line))
		}
	}
	if i := strings.Index(stdout, "Agents:"); i >= 0 {
		t.Logf("coordinator's agents:\n%s", stdout[i:])
	}
}

// faultSpan is how long after a fault the load may stay below its
// nominal level: a lost agent's sessions move to the others, a restarted
// simulator's requests fail and restart.
const faultSpan = 12 * time.Second

func hasPrefixKey(m map[string]float64, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last: %w)", url, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
