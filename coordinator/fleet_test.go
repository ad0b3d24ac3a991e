package coordinator_test

// End-to-end tests: a coordinator and real agents over loopback gRPC. They
// live in the external test package so the coordinator package itself never
// imports the agent package.

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

const testToken = "s3cret-test-token"

// scriptSource is a deterministic workload: conversation i has turns
// turns whose user text names (i, k).
type scriptSource struct{ turns int }

func (s scriptSource) Name() string { return "script" }
func (s scriptSource) Conversation(i int) workload.Conversation {
	return &scriptConv{i: i, turns: s.turns}
}

type scriptConv struct{ i, turns int }

func (c *scriptConv) Index() int     { return c.i }
func (c *scriptConv) System() string { return "" }
func (c *scriptConv) Turns() int     { return c.turns }
func (c *scriptConv) Next(ctx context.Context, k int, _ []openai.Message) (workload.Turn, error) {
	if err := ctx.Err(); err != nil {
		return workload.Turn{}, err
	}
	return workload.Turn{User: fmt.Sprintf("c%d t%d", c.i, k)}, nil
}

// scriptedLatency is a pure function of the request text, so the same
// requests give the same measurements in any process.
func scriptedLatency(text string) (ttft, e2e time.Duration, tokens int) {
	h := fnv.New64a()
	h.Write([]byte(text))
	v := h.Sum64()
	ttft = time.Duration(1000+v%20000) * time.Microsecond // 1..21 ms
	tokens = 2 + int(v>>20)%30
	e2e = ttft + time.Duration(tokens)*time.Duration(100+(v>>40)%500)*time.Microsecond
	return ttft, e2e, tokens
}

// scriptedStreamer answers at once with the scripted measurement; pause
// adds real time so windows and heartbeats interleave with the load.
func scriptedStreamer(pause time.Duration) load.Streamer {
	return load.StreamerFunc(func(ctx context.Context, req *client.Request) *client.Result {
		start := time.Now()
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return &client.Result{Start: start, Class: client.ClassCancelled, Err: ctx.Err()}
			}
		}
		text := req.Messages[len(req.Messages)-1].Content
		ttft, e2e, tokens := scriptedLatency(text)
		itl := make([]time.Duration, tokens-1)
		for i := range itl {
			itl[i] = (e2e - ttft) / time.Duration(tokens-1)
		}
		return &client.Result{
			Start: start, TTFB: ttft / 2, TTFT: ttft, E2E: e2e, ITL: itl, Text: "ok",
			PromptTokens: 100, OutputTokens: tokens, CachedTokens: 40, UsageReported: true, FinishReason: "stop",
			Status: 200,
		}
	})
}

func scriptedBuilder(turns int, pause time.Duration) agent.Builder {
	return func(context.Context, agent.Spec) (agent.Target, error) {
		return agent.Target{Source: scriptSource{turns: turns}, Streamer: scriptedStreamer(pause)}, nil
	}
}

func testLogger(t testing.TB) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("FLEETBENCH_TEST_LOG"))
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{Name: "test", Level: level, Output: testWriter{t}})
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// fleet describes one end-to-end run.
type fleet struct {
	agents  int
	cfg     coordinator.Config
	builder agent.Builder
	// builderFor, when set, gives agent i its own builder.
	builderFor func(i int) agent.Builder
	// per-agent hooks and dialers (optional)
	agentOpts func(i int) []agent.Option
	agentCfg  func(i int, c *agent.Config)
	// wrap may replace agent i's context (to kill it).
	wrap func(i int, ctx context.Context) context.Context
	// server overrides the gRPC config (default: the test token).
	server *coordinator.ServerConfig
	// control, when set, runs beside the run with the coordinator (to
	// change the level); its context ends when the run does.
	control func(ctx context.Context, c *coordinator.Coordinator)
	// after, when set, runs agent i again once its first Run returned
	// (a restarted process under the same id).
	after func(ctx context.Context, i int, cfg agent.Config) error
	// opts are the coordinator's options (a metrics registry).
	opts []coordinator.Option
}

func (f fleet) run(t *testing.T, ctx context.Context) (*coordinator.Result, error) {
	t.Helper()
	f.cfg.Agents = f.agents
	if f.cfg.HeartbeatInterval == 0 {
		f.cfg.HeartbeatInterval = 100 * time.Millisecond
		f.cfg.HeartbeatTimeout = 3 * time.Second
	}
	if f.cfg.Grace == 0 {
		f.cfg.Grace = 30 * time.Second
	}
	f.cfg.StartDelay = 200 * time.Millisecond
	c, err := coordinator.New(f.cfg, testLogger(t), f.opts...)
	if err != nil {
		t.Fatal(err)
	}
	sc := coordinator.ServerConfig{Token: testToken}
	if f.server != nil {
		sc = *f.server
	}
	if f.control != nil {
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { f.control(cctx, c) })
		defer wg.Wait()
		defer stop()
	}
	return coordinator.RunLocal(ctx, c, f.agents, sc,
		func(ctx context.Context, addr string, i int) error {
			cfg := agent.Config{
				ID: fmt.Sprintf("agent-%d", i), Index: i, Coordinator: addr, Token: testToken,
				ReportInterval: 250 * time.Millisecond, CoordinatorTimeout: 3 * time.Second,
				BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, DrainTimeout: 2 * time.Second,
			}
			if f.agentCfg != nil {
				f.agentCfg(i, &cfg)
			}
			var opts []agent.Option
			if f.agentOpts != nil {
				opts = f.agentOpts(i)
			}
			b := f.builder
			if f.builderFor != nil {
				b = f.builderFor(i)
			}
			a, err := agent.New(cfg, b, testLogger(t), opts...)
			if err != nil {
				return err
			}
			actx := ctx
			if f.wrap != nil {
				actx = f.wrap(i, ctx)
			}
			err = a.Run(actx)
			if f.after != nil && ctx.Err() == nil {
				return f.after(ctx, i, cfg)
			}
			return err
		})
}

// singleProcess runs the same workload in one engine, no gRPC.
func singleProcess(t *testing.T, convs, turns, level int) *record.Window {
	t.Helper()
	rec := record.NewRecorder(hdr.Default)
	var next atomic.Int64
	ix := load.IndexerFunc(func() (int, bool) {
		i := int(next.Add(1) - 1)
		return i, i < convs
	})
	e, err := load.New(load.Config{Concurrency: level}, scriptSource{turns: turns}, scriptedStreamer(0), rec, nil,
		load.WithIndexer(ix), load.WithWindow(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	total := record.NewWindow(0, hdr.Default)
	for _, w := range rec.Drain() {
		if err := total.Merge(w); err != nil {
			t.Fatal(err)
		}
	}
	return total
}

// exactMetrics are the metrics that depend only on the requests sent, not
// on scheduling (lag and the intended metrics do).
var exactMetrics = []record.Metric{record.TTFT, record.TTFB, record.ITL, record.TPOT, record.E2E}

func TestFleetMatchesSingleProcess(t *testing.T) {
	const convs, turns, level = 300, 3, 12
	want := singleProcess(t, convs, turns, level)
	if got := want.Counters.Requests; got != convs*turns {
		t.Fatalf("single process sent %d requests, want %d", got, convs*turns)
	}
	for _, agents := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("%d agents", agents), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := fleet{
				agents:  agents,
				builder: scriptedBuilder(turns, 0),
				cfg: coordinator.Config{Stages: []coordinator.Stage{{
					Level: level, Duration: 5 * time.Minute, Conversations: convs,
				}}},
			}.run(t, ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Stages[0].Measured
			if got.Counters.Requests != want.Counters.Requests || got.Counters.OutputTokens != want.Counters.OutputTokens ||
				got.Counters.InputTokens != want.Counters.InputTokens || got.Counters.CachedTokens != want.Counters.CachedTokens {
				t.Fatalf("counters differ:\n got %+v\nwant %+v", got.Counters, want.Counters)
			}
			for _, m := range exactMetrics {
				// Same requests, same values: the merged histogram is
				// identical, so every percentile is too.
				if !got.Hist[m].Equal(want.Hist[m]) {
					t.Errorf("%s histogram differs: fleet %v, single %v", m, got.Hist[m].Summary(), want.Hist[m].Summary())
				}
				for _, p := range []float64{50, 95, 99} {
					if g, w := got.Hist[m].Percentile(p), want.Hist[m].Percentile(p); g != w {
						t.Errorf("%s p%v = %v, single process %v", m, p, g, w)
					}
				}
			}
			for turn, ts := range want.Turns {
				if gt := got.Turns[turn]; gt == nil || gt.Requests != ts.Requests || !gt.TTFT.Equal(ts.TTFT) {
					t.Errorf("turn %d stats differ", turn)
				}
			}
		})
	}
}

// nearestRank is the textbook percentile over raw values.
func nearestRank(vals []time.Duration, p float64) time.Duration {
	s := slices.Clone(vals)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

func TestMergedPercentilesMatchPerRequestRecords(t *testing.T) {
	var mu sync.Mutex
	var ttfts, e2es []time.Duration
	save := func(s *record.Sample) {
		if !s.Result.OK() {
			return
		}
		mu.Lock()
		ttfts = append(ttfts, s.Result.TTFT)
		e2es = append(e2es, s.Result.E2E)
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := fleet{
		agents:    3,
		builder:   scriptedBuilder(4, time.Millisecond),
		agentOpts: func(int) []agent.Option { return []agent.Option{agent.WithObserver(save)} },
		cfg: coordinator.Config{Window: 300 * time.Millisecond, Stages: []coordinator.Stage{{
			Level: 16, Duration: 5 * time.Minute, Conversations: 400,
		}}},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Stages[0].Measured
	if int(got.Counters.Requests) != len(ttfts) {
		t.Fatalf("merged %d requests, agents recorded %d", got.Counters.Requests, len(ttfts))
	}
	if len(res.Windows) < 2 {
		t.Errorf("want several windows, got %d", len(res.Windows))
	}
	for _, tc := range []struct {
		m    record.Metric
		vals []time.Duration
	}{{record.TTFT, ttfts}, {record.E2E, e2es}} {
		for _, p := range []float64{50, 95, 99} {
			exact := nearestRank(tc.vals, p)
			hp := got.Hist[tc.m].Percentile(p)
			if rel := math.Abs(float64(hp-exact)) / float64(exact); rel > 0.001 {
				t.Errorf("%s p%v: merged %v, nearest rank %v (%.4f%% off)", tc.m, p, hp, exact, 100*rel)
			}
		}
	}
}

// cutter dials the coordinator and can cut every connection it made.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	dials int
}

func (c *cutter) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.dials++
	c.mu.Unlock()
	return conn, nil
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) dialCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// ledger accounts for every report one agent made and every ack it got.
type ledger struct {
	mu      sync.Mutex
	reports map[uint64]int64 // seq -> requests
	acked   uint64
}

func newLedger() *ledger { return &ledger{reports: make(map[uint64]int64)} }

func (l *ledger) options() []agent.Option {
	return []agent.Option{agent.WithReportHook(func(seq uint64, w *record.Window) {
		l.mu.Lock()
		if _, dup := l.reports[seq]; dup {
			panic("sequence number reused")
		}
		l.reports[seq] = w.Counters.Requests + w.Counters.Failed
		l.mu.Unlock()
	}, func(seq uint64) {
		l.mu.Lock()
		l.acked = max(l.acked, seq)
		l.mu.Unlock()
	})}
}

// totals returns the requests in all reports and in acked ones.
func (l *ledger) totals() (all, acked int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq, n := range l.reports {
		all += n
		if seq <= l.acked {
			acked += n
		}
	}
	return all, acked
}

func (l *ledger) ackedSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// coverageRequests sums an agent's applied requests over all windows.
func coverageRequests(res *coordinator.Result, id string) (n int64) {
	for _, w := range res.Windows {
		for _, c := range w.Coverage {
			if c.Agent == id {
				n += c.Requests
			}
		}
	}
	return n
}

func totalRequests(res *coordinator.Result) (n int64) {
	for _, w := range res.Windows {
		m, err := w.Merged()
		if err != nil {
			panic(err)
		}
		n += m.Counters.Requests + m.Counters.Failed
	}
	return n
}

func TestAgentKilledMidWindow(t *testing.T) {
	const agents, victim = 3, 2
	ledgers := make([]*ledger, agents)
	cutters := make([]*cutter, agents)
	for i := range ledgers {
		ledgers[i], cutters[i] = newLedger(), &cutter{}
	}
	var kill context.CancelFunc
	var killMu sync.Mutex
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go func() {
		// Kill the victim once it has had a few reports acked: cut its
		// connection (no goodbye), then end its goroutine.
		for ledgers[victim].ackedSeq() < 5 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		cutters[victim].cut()
		killMu.Lock()
		kill()
		killMu.Unlock()
	}()
	res, err := fleet{
		agents:  agents,
		builder: scriptedBuilder(6, 5*time.Millisecond),
		agentOpts: func(i int) []agent.Option {
			return append(ledgers[i].options(), agent.WithDialer(cutters[i].dial))
		},
		agentCfg: func(i int, c *agent.Config) {},
		// 12 s leave the survivors time to restart the victim's sessions
		// after the heartbeat timeout even when a busy machine stalls the
		// coordinator's loop and the deadlines are extended (seen at 8 s).
		cfg: coordinator.Config{Window: time.Second, Stages: []coordinator.Stage{{
			Level: 12, Warmup: 500 * time.Millisecond, Duration: 12 * time.Second,
		}}},
		wrap: func(i int, ctx context.Context) context.Context {
			if i != victim {
				return ctx
			}
			ctx, c := context.WithCancel(ctx)
			killMu.Lock()
			kill = c
			killMu.Unlock()
			return ctx
		},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stages[0]
	if !st.Degraded {
		t.Error("stage not marked degraded")
	}
	var lostWindow *coordinator.WindowResult
	for _, w := range res.Windows {
		for _, c := range w.Coverage {
			if c.Agent == fmt.Sprintf("agent-%d", victim) && c.Lost && c.LostSeconds > 0 {
				lostWindow = w
			}
		}
	}
	if lostWindow == nil || !lostWindow.Degraded {
		t.Fatalf("no degraded window records the victim's lost coverage")
	}
	// Every report the victim's coordinator acked is in the result, and
	// nothing it never sent.
	all, acked := ledgers[victim].totals()
	got := coverageRequests(res, fmt.Sprintf("agent-%d", victim))
	if got < acked || got > all {
		t.Errorf("victim's applied requests %d, want between acked %d and sent %d", got, acked, all)
	}
	// The survivors' reports are all in, and the windows hold exactly the
	// applied reports.
	var sum int64
	for i := range agents {
		n := coverageRequests(res, fmt.Sprintf("agent-%d", i))
		sum += n
		if i != victim {
			if all, acked := ledgers[i].totals(); n != all {
				t.Errorf("agent %d: %d requests applied, %d reported, %d acked (seqs %d, acked seq %d)", i, n, all, acked, len(ledgers[i].reports), ledgers[i].ackedSeq())
			}
		}
	}
	if total := totalRequests(res); total != sum {
		t.Errorf("windows hold %d requests, coverage says %d", total, sum)
	}
	// Its sessions went on elsewhere, from turn 1, marked restarted.
	var restarted int64
	for _, w := range res.Windows {
		restarted += w.Data.Counters.Restarted
	}
	if restarted == 0 {
		t.Error("no restarted turns: the victim's sessions did not continue elsewhere")
	}
}

func TestConnectionCutAndRestored(t *testing.T) {
	const agents = 2
	ledgers := []*ledger{newLedger(), newLedger()}
	cutters := []*cutter{{}, {}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	go func() {
		// Cut agent 1's connection twice while it has reports in flight.
		for n := 0; n < 2; n++ {
			for ledgers[1].ackedSeq() < uint64(4+6*n) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			cutters[1].cut()
		}
	}()
	res, err := fleet{
		agents:  agents,
		builder: scriptedBuilder(4, 3*time.Millisecond),
		agentOpts: func(i int) []agent.Option {
			return append(ledgers[i].options(), agent.WithDialer(cutters[i].dial))
		},
		cfg: coordinator.Config{Window: 500 * time.Millisecond, Stages: []coordinator.Stage{{
			Level: 8, Duration: 4 * time.Second,
		}}},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cutters[1].dialCount(); d < 3 {
		t.Fatalf("agent 1 dialed %d times, want reconnects after 2 cuts", d)
	}
	var sum int64
	for i := range agents {
		all, _ := ledgers[i].totals()
		got := coverageRequests(res, fmt.Sprintf("agent-%d", i))
		if got != all {
			t.Errorf("agent %d: %d requests applied, %d reported (lost or double-counted)", i, got, all)
		}
		sum += all
	}
	if total := totalRequests(res); total != sum {
		t.Errorf("result holds %d requests, agents reported %d", total, sum)
	}
	for _, w := range res.Windows {
		if w.Degraded {
			t.Errorf("window %d degraded by a short cut", w.ID)
		}
	}
}

// TestTurnsOutlastGrace: turns slower than the grace (an overloaded
// server), so the windows close by grace while the agents still run turns
// and the run ends with data not yet reported. Every report an agent sends,
// the last ones after the stop included (here every one: the agents
// report only when their load ends), is applied and acked: what the
// agents recorded equals what the result holds, measured and late.
func TestTurnsOutlastGrace(t *testing.T) {
	const agents = 2
	var mu sync.Mutex
	sent := map[int]map[uint64]int64{} // agent -> seq -> requests
	acked := map[int]uint64{}
	f := fleet{
		agents: agents, builder: scriptedBuilder(1000, 700*time.Millisecond),
		cfg: coordinator.Config{
			Stages: []coordinator.Stage{{Level: 6, Duration: 2 * time.Second}},
			Window: time.Second, Grace: 100 * time.Millisecond,
		},
		// No report until the engine is done or the agent stops: the
		// windows close by grace and the stop comes before the data.
		agentCfg: func(_ int, c *agent.Config) { c.ReportInterval = time.Hour },
		agentOpts: func(i int) []agent.Option {
			return []agent.Option{agent.WithReportHook(func(seq uint64, w *record.Window) {
				mu.Lock()
				defer mu.Unlock()
				if sent[i] == nil {
					sent[i] = map[uint64]int64{}
				}
				sent[i][seq] = w.Counters.Requests + w.Counters.Failed
			}, func(seq uint64) {
				mu.Lock()
				defer mu.Unlock()
				acked[i] = max(acked[i], seq)
			})}
		},
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := f.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	mu.Lock()
	for i := range agents {
		for seq, n := range sent[i] {
			want += n
			if seq > acked[i] {
				t.Errorf("agent %d: report %d (%d requests) never acked", i, seq, n)
			}
		}
	}
	mu.Unlock()
	var got, late int64
	graced := 0
	for _, w := range res.Windows {
		got += w.Data.Counters.Requests + w.Data.Counters.Failed
		if w.Late != nil {
			got += w.Late.Counters.Requests + w.Late.Counters.Failed
		}
		late += w.LateRequests
		if w.ClosedBy == "grace" {
			graced++
		}
	}
	t.Logf("%d windows, %d closed by grace; agents recorded %d requests, the result holds %d (%d late)", len(res.Windows), graced, want, got, late)
	if graced == 0 || late == 0 {
		t.Fatalf("no window closed by grace with late data (%d by grace, %d late requests): the test did not play turns outlasting the grace", graced, late)
	}
	if got != want || want == 0 {
		t.Errorf("the result holds %d requests, the agents reported %d", got, want)
	}
}
