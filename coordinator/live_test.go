package coordinator_test

// End-to-end tests of live changes, loss policies, output files,
// restarted agents and coordinator loss, over real loopback gRPC.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// countingTarget is a fake inference server: every request takes pause and
// is counted while in flight; peak is the highest in-flight count since the
// last resetPeak.
type countingTarget struct {
	pause    time.Duration
	inflight atomic.Int64
	peak     atomic.Int64
	started  atomic.Int64
	mu       sync.Mutex
	starts   []time.Time
}

func (ct *countingTarget) streamer() load.Streamer {
	inner := scriptedStreamer(0)
	return load.StreamerFunc(func(ctx context.Context, req *client.Request) *client.Result {
		now := time.Now()
		ct.started.Add(1)
		ct.mu.Lock()
		ct.starts = append(ct.starts, now)
		ct.mu.Unlock()
		n := ct.inflight.Add(1)
		defer ct.inflight.Add(-1)
		for p := ct.peak.Load(); n > p && !ct.peak.CompareAndSwap(p, n); p = ct.peak.Load() {
		}
		select {
		case <-time.After(ct.pause):
		case <-ctx.Done():
			return &client.Result{Start: now, Class: client.ClassCancelled, Err: ctx.Err()}
		}
		res := inner.Stream(ctx, req)
		res.Start = now
		return res
	})
}

// peakOver resets the peak, waits d and returns the peak in flight.
func (ct *countingTarget) peakOver(ctx context.Context, d time.Duration) int64 {
	ct.peak.Store(ct.inflight.Load())
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return ct.peak.Load()
}

func (ct *countingTarget) startsAfter(t time.Time) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	n := 0
	for _, s := range ct.starts {
		if s.After(t) {
			n++
		}
	}
	return n
}

// assignments records every assignment each agent applied.
type assignments struct {
	mu  sync.Mutex
	all []agent.Assignment
}

func (as *assignments) hook() agent.Option {
	return agent.WithAssignmentHook(func(a agent.Assignment) {
		as.mu.Lock()
		as.all = append(as.all, a)
		as.mu.Unlock()
	})
}

// byEpoch returns, for each epoch, the level and the sum of the shares.
func (as *assignments) byEpoch() map[uint64][2]int {
	as.mu.Lock()
	defer as.mu.Unlock()
	out := make(map[uint64][2]int)
	for _, a := range as.all {
		e := out[a.Epoch]
		out[a.Epoch] = [2]int{a.Level, e[1] + a.Concurrency}
	}
	return out
}

// applied reports whether n agents have applied an assignment at level
// whose shares sum to it.
func (as *assignments) applied(level, n int) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	count, sum := map[uint64]int{}, map[uint64]int{}
	for _, a := range as.all {
		if a.Level == level {
			count[a.Epoch]++
			sum[a.Epoch] += a.Concurrency
		}
	}
	for e, c := range count {
		if c == n && sum[e] == level {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func TestSetConcurrencyLive(t *testing.T) {
	const agents = 3
	target := &countingTarget{pause: 20 * time.Millisecond}
	var builds atomic.Int64
	var as assignments
	type phase struct {
		level int
		peak  int64
	}
	var observed []phase
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	res, err := fleet{
		agents: agents,
		builder: func(context.Context, agent.Spec) (agent.Target, error) {
			builds.Add(1)
			return agent.Target{Source: scriptSource{turns: 4}, Streamer: target.streamer()}, nil
		},
		agentOpts: func(int) []agent.Option { return []agent.Option{as.hook()} },
		cfg: coordinator.Config{Window: 500 * time.Millisecond, Stages: []coordinator.Stage{{
			Level: 6, Duration: 7 * time.Second,
		}}},
		control: func(ctx context.Context, c *coordinator.Coordinator) {
			for target.started.Load() == 0 && ctx.Err() == nil {
				sleepCtx(ctx, 10*time.Millisecond)
			}
			sleepCtx(ctx, 500*time.Millisecond)
			observed = append(observed, phase{6, target.peakOver(ctx, 500*time.Millisecond)})
			for _, level := range []int{13, 2} {
				if err := c.SetConcurrency(ctx, level); err != nil {
					t.Errorf("SetConcurrency(%d): %v", level, err)
					return
				}
				// Wait until every agent has its new share, then for
				// retiring sessions to finish their turn (20 ms).
				for !as.applied(level, agents) && ctx.Err() == nil {
					sleepCtx(ctx, 10*time.Millisecond)
				}
				sleepCtx(ctx, 300*time.Millisecond)
				observed = append(observed, phase{level, target.peakOver(ctx, 700*time.Millisecond)})
			}
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(observed) != 3 {
		t.Fatalf("observed %d phases, want 3 (run ended early?)", len(observed))
	}
	for _, p := range observed {
		if p.peak != int64(p.level) {
			t.Errorf("level %d: fleet's peak in-flight requests %d, want exactly %d", p.level, p.peak, p.level)
		}
	}
	if n := builds.Load(); n != agents {
		t.Errorf("%d load engines built, want %d: the stage restarted", n, agents)
	}
	// Every reshard's shares sum to its level.
	seen := map[int]bool{}
	for epoch, e := range as.byEpoch() {
		if e[0] != e[1] {
			t.Errorf("epoch %d: shares sum to %d, level %d", epoch, e[1], e[0])
		}
		seen[e[0]] = true
	}
	for _, l := range []int{6, 13, 2} {
		if !seen[l] {
			t.Errorf("no assignment at level %d", l)
		}
	}
	if len(res.Stages) != 1 {
		t.Fatalf("%d stages, want 1", len(res.Stages))
	}
	levels := map[int]bool{}
	for _, w := range res.Windows {
		levels[w.Level] = true
	}
	if !levels[13] || !levels[2] {
		t.Errorf("window levels %v, want windows at 13 and 2", levels)
	}
}

// killer kills agent victim (cuts its connection, then ends its Run) once
// the coordinator has acked acks of its reports.
type killer struct {
	victim int
	acks   uint64
	ledger *ledger
	cutter *cutter
	mu     sync.Mutex
	kill   context.CancelFunc
	killed atomic.Bool
}

func newKiller(victim int, acks uint64) *killer {
	return &killer{victim: victim, acks: acks, ledger: newLedger(), cutter: &cutter{}}
}

func (k *killer) wrap(i int, ctx context.Context) context.Context {
	if i != k.victim || k.killed.Load() {
		return ctx
	}
	ctx, c := context.WithCancel(ctx)
	k.mu.Lock()
	k.kill = c
	k.mu.Unlock()
	return ctx
}

func (k *killer) opts(i int) []agent.Option {
	if i != k.victim || k.killed.Load() {
		return nil
	}
	return append(k.ledger.options(), agent.WithDialer(k.cutter.dial))
}

func (k *killer) watch(ctx context.Context) {
	for k.ledger.ackedSeq() < k.acks {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	k.killed.Store(true)
	k.cutter.cut()
	k.mu.Lock()
	k.kill()
	k.mu.Unlock()
}

func TestLossPolicyRerun(t *testing.T) {
	k := newKiller(2, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go k.watch(ctx)
	res, err := fleet{
		agents: 3, builder: scriptedBuilder(4, 5*time.Millisecond), agentOpts: k.opts, wrap: k.wrap,
		cfg: coordinator.Config{
			OnLoss: coordinator.PolicyRerun, Window: time.Second, HeartbeatInterval: 100 * time.Millisecond,
			HeartbeatTimeout: time.Second, Stages: []coordinator.Stage{{Level: 9, Duration: 3 * time.Second}},
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stages[0]
	var measured, reruns int
	want := record.NewWindow(0, hdr.Default)
	for _, w := range res.Windows {
		if w.Kind != coordinator.KindMeasure {
			continue
		}
		measured++
		if w.Rerun {
			reruns++
			if !w.Degraded {
				t.Errorf("window %d re-run but not degraded", w.ID)
			}
			continue
		}
		m, err := w.Merged()
		if err != nil {
			t.Fatal(err)
		}
		if err := want.Merge(m); err != nil {
			t.Fatal(err)
		}
	}
	if reruns == 0 {
		t.Fatal("no window marked re-run after the loss")
	}
	if measured != 3+reruns {
		t.Errorf("%d measured windows with %d re-run, want %d", measured, reruns, 3+reruns)
	}
	if !st.Degraded {
		t.Error("stage not marked degraded")
	}
	if st.Measured.Counters.Requests != want.Counters.Requests || !st.Measured.Hist[record.TTFT].Equal(want.Hist[record.TTFT]) {
		t.Errorf("stage result has %d requests, the windows not re-run %d: re-run windows must be left out",
			st.Measured.Counters.Requests, want.Counters.Requests)
	}
}

func TestLossPolicyFail(t *testing.T) {
	k := newKiller(1, 3)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go k.watch(ctx)
	res, err := fleet{
		agents: 3, builder: scriptedBuilder(4, 5*time.Millisecond), agentOpts: k.opts, wrap: k.wrap,
		cfg: coordinator.Config{
			OnLoss: coordinator.PolicyFail, Window: 500 * time.Millisecond, OutDir: out,
			HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second,
			Stages: []coordinator.Stage{{Level: 9, Duration: 20 * time.Second}},
		},
	}.run(t, ctx)
	if !errors.Is(err, coordinator.ErrAgentLost) || !strings.Contains(err.Error(), `"agent-1"`) {
		t.Fatalf("run error = %v, want ErrAgentLost naming agent-1", err)
	}
	if res == nil || len(res.Windows) == 0 {
		t.Fatal("no result returned with the error")
	}
	if d := res.Windows[len(res.Windows)-1].End.Sub(res.Windows[0].Start); d > 10*time.Second {
		t.Errorf("run went on for %v after the loss", d)
	}
	// What was received is on disk: one file per window, holding exactly
	// the result's requests.
	var onDisk int64
	for _, w := range res.Windows {
		f, err := coordinator.ReadWindowFile(filepath.Join(out, fmt.Sprintf("window-%d.json", w.ID)))
		if err != nil {
			t.Fatal(err)
		}
		onDisk += f.Counters.Requests + f.Counters.Failed + f.LateRequests
	}
	if total := totalRequests(res); total == 0 || onDisk != total {
		t.Errorf("window files hold %d requests, the result %d", onDisk, total)
	}
}

// sameWindow reports how two merged windows differ, "" when they do not.
func sameWindow(a, b *record.Window) string {
	ca, cb := a.Counters, b.Counters
	if ca.Requests != cb.Requests || ca.Failed != cb.Failed || ca.InputTokens != cb.InputTokens ||
		ca.OutputTokens != cb.OutputTokens || ca.CachedTokens != cb.CachedTokens || ca.Restarted != cb.Restarted ||
		ca.ConversationsStarted != cb.ConversationsStarted || len(ca.FailedByClass) != len(cb.FailedByClass) ||
		!maps.Equal(ca.FinishReasons, cb.FinishReasons) || !maps.Equal(ca.WorkerHeaders, cb.WorkerHeaders) {
		return fmt.Sprintf("counters %+v vs %+v", ca, cb)
	}
	for m := range record.NumMetrics {
		ha, hb := a.Hist[m], b.Hist[m]
		if ha == nil {
			ha = hdr.Default.New()
		}
		if hb == nil {
			hb = hdr.Default.New()
		}
		if !ha.Equal(hb) {
			return fmt.Sprintf("%s histogram differs", m)
		}
	}
	if len(a.Turns) != len(b.Turns) {
		return fmt.Sprintf("%d vs %d turns", len(a.Turns), len(b.Turns))
	}
	for i, ta := range a.Turns {
		tb := b.Turns[i]
		if tb == nil || ta.Requests != tb.Requests || ta.PromptTokens != tb.PromptTokens || !ta.TTFT.Equal(tb.TTFT) {
			return fmt.Sprintf("turn %d differs", i)
		}
	}
	if !a.FirstSend.Equal(b.FirstSend) || !a.LastEnd.Equal(b.LastEnd) {
		return "send/end times differ"
	}
	return ""
}

func TestWindowFilesWrittenAsWindowsClose(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// A reader polls the directory during the run: a file must appear
	// while the run goes on (not only at its end) and must always parse
	// (written atomically, never torn).
	var torn atomic.Int64
	firstSeen := make(chan time.Time, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for ctx.Err() == nil {
			names, _ := filepath.Glob(filepath.Join(out, "window-*.json"))
			for _, n := range names {
				if _, err := coordinator.ReadWindowFile(n); err != nil && !errors.Is(err, os.ErrNotExist) {
					torn.Add(1)
				}
				select {
				case firstSeen <- time.Now():
				default:
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	res, err := fleet{
		agents: 2, builder: scriptedBuilder(3, 2*time.Millisecond),
		cfg: coordinator.Config{Window: 400 * time.Millisecond, OutDir: out, Stages: []coordinator.Stage{{
			Level: 6, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
		}}},
	}.run(t, ctx)
	ended := time.Now()
	cancel()
	<-readerDone
	if err != nil {
		t.Fatal(err)
	}
	select {
	case seen := <-firstSeen:
		if ended.Sub(seen) < time.Second {
			t.Errorf("first window file appeared %v before the run ended, want files as windows close", ended.Sub(seen))
		}
	default:
		t.Fatal("no window file appeared")
	}
	if n := torn.Load(); n > 0 {
		t.Errorf("%d reads of a torn window file", n)
	}
	if tmp, _ := filepath.Glob(filepath.Join(out, ".tmp-*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	if len(res.Windows) < 5 {
		t.Fatalf("%d windows, want a warm-up and 5 measured", len(res.Windows))
	}
	for _, w := range res.Windows {
		f, err := coordinator.ReadWindowFile(filepath.Join(out, fmt.Sprintf("window-%d.json", w.ID)))
		if err != nil {
			t.Fatal(err)
		}
		data, late, err := f.Data(hdr.Default)
		if err != nil {
			t.Fatal(err)
		}
		if d := sameWindow(data, w.Data); d != "" {
			t.Errorf("window %d: file differs from the result: %s", w.ID, d)
		}
		if (late == nil) != (w.Late == nil) {
			t.Errorf("window %d: late samples in file %v, in result %v", w.ID, late != nil, w.Late != nil)
		}
		if f.Kind != w.Kind.String() || f.ClosedBy != w.ClosedBy || f.Level != w.Level {
			t.Errorf("window %d: file says %s/%s/%d", w.ID, f.Kind, f.ClosedBy, f.Level)
		}
	}
}

func TestRestartedAgentNotDoubleCounted(t *testing.T) {
	const agents, victim = 3, 0
	k := newKiller(victim, 4)
	second := newLedger()
	ledgers := []*ledger{nil, newLedger(), newLedger()}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go k.watch(ctx)
	res, err := fleet{
		agents: agents, builder: scriptedBuilder(4, 5*time.Millisecond), wrap: k.wrap,
		agentOpts: func(i int) []agent.Option {
			if i == victim {
				return k.opts(i)
			}
			return ledgers[i].options()
		},
		cfg: coordinator.Config{Window: 500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
			HeartbeatTimeout: 2 * time.Second, Stages: []coordinator.Stage{{Level: 9, Duration: 4 * time.Second}}},
		after: func(ctx context.Context, i int, cfg agent.Config) error {
			if i != victim {
				return nil
			}
			// The same id restarts at once, before the old process could
			// be declared lost: a new incarnation with none of the old
			// one's state.
			a, err := agent.New(cfg, scriptedBuilder(4, 5*time.Millisecond), testLogger(t), second.options()...)
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("agent-%d", victim)
	// Windows are in time order, so the first incarnation seen is the
	// first process.
	var incarnations []uint64
	applied := map[uint64]int64{}
	for _, w := range res.Windows {
		for _, c := range w.Coverage {
			if c.Agent != id {
				continue
			}
			if !slices.Contains(incarnations, c.Incarnation) {
				incarnations = append(incarnations, c.Incarnation)
			}
			applied[c.Incarnation] += c.Requests
		}
	}
	if len(incarnations) != 2 {
		t.Fatalf("agent %s has coverage under %d incarnations, want 2", id, len(incarnations))
	}
	firstApplied, secondApplied := applied[incarnations[0]], applied[incarnations[1]]
	all1, acked1 := k.ledger.totals()
	all2, _ := second.totals()
	if firstApplied < acked1 || firstApplied > all1 {
		t.Errorf("first incarnation: %d requests applied, want between its acked %d and sent %d", firstApplied, acked1, all1)
	}
	if secondApplied != all2 || all2 == 0 {
		t.Errorf("second incarnation: %d requests applied, %d reported", secondApplied, all2)
	}
	sum := firstApplied + secondApplied
	for i := 1; i < agents; i++ {
		all, _ := ledgers[i].totals()
		if got := coverageRequests(res, fmt.Sprintf("agent-%d", i)); got != all {
			t.Errorf("agent %d: %d applied, %d reported", i, got, all)
		}
		sum += all
	}
	if total := totalRequests(res); total != sum {
		t.Errorf("windows hold %d requests, the agents' applied reports %d: counted twice or lost", total, sum)
	}
}

func TestAgentStopsLoadWhenCoordinatorVanishes(t *testing.T) {
	const coordTimeout, drain = time.Second, 500 * time.Millisecond
	target := &countingTarget{pause: 50 * time.Millisecond}
	c, err := coordinator.New(coordinator.Config{
		Agents: 1, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Hour, StartDelay: 50 * time.Millisecond,
		Stages: []coordinator.Stage{{Level: 4, Duration: time.Hour}},
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := c.NewServer(coordinator.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	go func() { _, _ = c.Run(runCtx) }()

	a, err := agent.New(agent.Config{
		ID: "a", Index: 0, Coordinator: lis.Addr().String(), CoordinatorTimeout: coordTimeout, DrainTimeout: drain,
		ReportInterval: 100 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}, func(context.Context, agent.Spec) (agent.Target, error) {
		return agent.Target{Source: scriptSource{turns: 1000}, Streamer: target.streamer()}, nil
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	for target.inflight.Load() < 4 {
		select {
		case <-ctx.Done():
			t.Fatal("load never started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The coordinator vanishes: no stop, no goodbye, nothing listening.
	srv.Stop()
	vanished := time.Now()
	// A closed loop has gaps between turns, so watch the starts, not the
	// in-flight count: once the timeout has passed no request may start,
	// and the last ones end within the drain timeout.
	bound := coordTimeout + drain + 300*time.Millisecond
	time.Sleep(bound + 200*time.Millisecond)
	if n := target.inflight.Load(); n > 0 {
		t.Errorf("%d requests still in flight %v after the coordinator vanished", n, time.Since(vanished))
	}
	if n := target.startsAfter(vanished.Add(coordTimeout + 300*time.Millisecond)); n > 0 {
		t.Errorf("%d requests started after the coordinator timeout %v", n, coordTimeout)
	}
	if n := target.startsAfter(vanished.Add(coordTimeout / 2)); n == 0 {
		t.Errorf("no request started in the %v after the coordinator vanished: load must go on until the timeout", coordTimeout/2)
	}
	select {
	case err := <-agentDone:
		t.Fatalf("agent Run returned %v; it should keep trying to reconnect", err)
	default:
	}
	cancel()
	if err := <-agentDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("agent Run = %v", err)
	}
}

// TestLostAgentLeavesNoConversationUnrun runs a fixed set of conversations
// and kills an agent between two heartbeats: every conversation, those it
// started after its last heartbeat included, still runs to its last turn
// somewhere.
func TestLostAgentLeavesNoConversationUnrun(t *testing.T) {
	const convs, turns = 360, 3
	k := newKiller(1, 3)
	var mu sync.Mutex
	completed := map[int]bool{}
	done := func(s *record.Sample) {
		if s.Turn == turns && s.Result.OK() {
			mu.Lock()
			completed[s.Conversation] = true
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go k.watch(ctx)
	res, err := fleet{
		agents: 3, builder: scriptedBuilder(turns, 10*time.Millisecond), wrap: k.wrap,
		agentOpts: func(i int) []agent.Option { return append(k.opts(i), agent.WithObserver(done)) },
		cfg: coordinator.Config{
			HeartbeatInterval: 700 * time.Millisecond, HeartbeatTimeout: 1500 * time.Millisecond,
			Stages: []coordinator.Stage{{Level: 9, Duration: time.Minute, Conversations: convs}},
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !k.killed.Load() {
		t.Fatal("the victim was never killed")
	}
	var missing []int
	for i := range convs {
		if !completed[i] {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d conversations never completed: %v", len(missing), missing)
	}
	if res.Stages[0].Measured.Counters.Restarted == 0 {
		t.Error("no restarted turns")
	}
}

// pausedProxy forwards TCP between an agent and the coordinator and can
// hold every byte for a while without closing anything: what a stalled
// coordinator or a congested network looks like from the agent.
type pausedProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	gate chan struct{} // closed while forwarding
}

func newPausedProxy(t *testing.T, target string) *pausedProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausedProxy{ln: ln, gate: make(chan struct{})}
	close(p.gate)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				g := p.gate
				p.mu.Unlock()
				<-g
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.resume() })
	return p
}

func (p *pausedProxy) pause() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *pausedProxy) resume() {
	p.mu.Lock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	p.mu.Unlock()
}

// TestAgentTellsItStoppedForSilence: the coordinator is alive but its
// words are held back longer than the agent's coordinator timeout, so the
// agent stops its load. When the words arrive again, the agent says so at
// once and the coordinator accounts it as a failed agent (here the only
// one: the run fails naming why), instead of measuring a level that did
// not run.
func TestAgentTellsItStoppedForSilence(t *testing.T) {
	const coordTimeout = time.Second
	target := &countingTarget{pause: 50 * time.Millisecond}
	c, err := coordinator.New(coordinator.Config{
		Agents: 1, HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Hour, StartDelay: 50 * time.Millisecond,
		Stages: []coordinator.Stage{{Level: 4, Duration: time.Hour}},
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := c.NewServer(coordinator.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	proxy := newPausedProxy(t, lis.Addr().String())
	runErr := make(chan error, 1)
	go func() { _, err := c.Run(ctx); runErr <- err }()

	a, err := agent.New(agent.Config{
		ID: "a", Index: 0, Coordinator: proxy.ln.Addr().String(), CoordinatorTimeout: coordTimeout, DrainTimeout: 200 * time.Millisecond,
		ReportInterval: 100 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}, func(context.Context, agent.Spec) (agent.Target, error) {
		return agent.Target{Source: scriptSource{turns: 1000}, Streamer: target.streamer()}, nil
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.Run(ctx) }()
	for target.inflight.Load() < 4 {
		select {
		case <-ctx.Done():
			t.Fatal("load never started")
		case <-time.After(10 * time.Millisecond):
		}
	}
	proxy.pause()
	time.Sleep(coordTimeout + time.Second)
	if n := target.inflight.Load(); n > 0 {
		t.Fatalf("%d requests in flight %v into the coordinator's silence: the agent did not stop", n, coordTimeout+time.Second)
	}
	proxy.resume()
	select {
	case err := <-runErr:
		if err == nil || !strings.Contains(err.Error(), "without word from the coordinator") {
			t.Fatalf("Run = %v; want the agent's failure, saying it stopped for the coordinator's silence", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the coordinator did not hear that the agent stopped its load")
	}
}

// TestModeWarmup: a stage with a mode warm-up runs its ModeWarmupLevel
// first, in a warm-up window of its own, then its Level, live, without
// restarting the agents' engines; the measured windows are at Level and
// the result counts nothing from the mode warm-up.
func TestModeWarmup(t *testing.T) {
	const agents = 2
	target := &countingTarget{pause: 20 * time.Millisecond}
	var builds atomic.Int64
	var as assignments
	var during, after int64
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := fleet{
		agents: agents,
		builder: func(context.Context, agent.Spec) (agent.Target, error) {
			builds.Add(1)
			return agent.Target{Source: scriptSource{turns: 4}, Streamer: target.streamer()}, nil
		},
		agentOpts: func(int) []agent.Option { return []agent.Option{as.hook()} },
		cfg: coordinator.Config{Window: 500 * time.Millisecond, Stages: []coordinator.Stage{{
			Level: 3, ModeWarmup: 2 * time.Second, ModeWarmupLevel: 9, Warmup: 500 * time.Millisecond, Duration: 2 * time.Second,
		}}},
		control: func(ctx context.Context, c *coordinator.Coordinator) {
			for target.started.Load() == 0 && ctx.Err() == nil {
				sleepCtx(ctx, 10*time.Millisecond)
			}
			sleepCtx(ctx, 300*time.Millisecond)
			during = target.peakOver(ctx, 700*time.Millisecond)
			for !as.applied(3, agents) && ctx.Err() == nil {
				sleepCtx(ctx, 10*time.Millisecond)
			}
			sleepCtx(ctx, 300*time.Millisecond)
			after = target.peakOver(ctx, 700*time.Millisecond)
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if during != 9 || after != 3 {
		t.Errorf("peak in-flight requests %d during the mode warm-up and %d after, want 9 and 3", during, after)
	}
	if n := builds.Load(); n != agents {
		t.Errorf("%d load engines built, want %d: the stage restarted", n, agents)
	}
	if len(res.Stages) != 1 {
		t.Fatalf("%d stages, want 1", len(res.Stages))
	}
	st := res.Stages[0]
	if st.Level != 3 {
		t.Errorf("stage result level %d, want 3", st.Level)
	}
	var warm, measured int
	for _, w := range res.Windows {
		switch w.Kind {
		case coordinator.KindWarmup:
			warm++
		case coordinator.KindMeasure:
			measured++
			if w.Level != 3 {
				t.Errorf("measured window %d at level %d, want 3", w.ID, w.Level)
			}
		}
	}
	if warm != 2 || measured != 4 {
		t.Errorf("%d warm-up and %d measured windows, want 2 (mode warm-up, warm-up) and 4", warm, measured)
	}
}
