// Package coordinator is fleetbench's coordinator: it accepts agents on one
// gRPC stream each, shards the conversations of each stage across them,
// opens and closes the measurement windows, and merges the agents' HDR
// histograms into exact fleet-wide results.
//
// One goroutine (Run's loop) owns every piece of run state; gRPC streams
// feed it through a channel and receive its messages through per-connection
// queues. Generated protobuf types stop at the edge (server.go, convert.go).
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/shard"
)

// Errors returned to agents at join; the edge maps them to status codes.
var (
	// ErrHistogramMismatch refuses an agent whose histogram configuration
	// differs from the coordinator's.
	ErrHistogramMismatch = errors.New("histogram configuration mismatch")
	// ErrRunOver refuses an agent that joins after the run ended.
	ErrRunOver = errors.New("run is over")
	// ErrAlreadyRun is returned by a second call of Run.
	ErrAlreadyRun = errors.New("coordinator already ran")
)

// tick is the loop's scheduling resolution. Phases carry exact start
// instants and are sent PhaseLead ahead, so agents switch windows on time
// whatever the tick.
const tick = 20 * time.Millisecond

// outQueue is a connection's outbound queue length. A connection whose
// queue is full is closed (its agent reconnects and resumes).
const outQueue = 1024

// Coordinator runs one fleet run: every stage of Config.Stages with the
// same connected agents, idle between stages. Create it with New, attach
// its gRPC service with Register (or use Serve), then call Run once.
// SetConcurrency and Run are safe to call from any goroutine.
type Coordinator struct {
	cfg    Config
	logger hclog.Logger
	now    func() time.Time

	events  chan event
	done    chan struct{} // closed when Run's loop has ended
	reg     prometheus.Registerer
	metrics *metrics
	ran     sync.Once
	conns   sync.WaitGroup // stream goroutines of the edge
}

// Option changes a Coordinator's defaults.
type Option func(*Coordinator)

// WithClock makes the coordinator read time from now (tests).
func WithClock(now func() time.Time) Option { return func(c *Coordinator) { c.now = now } }

// WithRegisterer registers the coordinator's metrics (agents connected,
// reports applied and duplicate, windows closed, late requests, agents
// lost, the last measured window's TTFT) with reg. Without it they are
// kept but not exported. A registry takes one coordinator's metrics.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *Coordinator) { c.reg = reg } }

// New validates cfg and returns a coordinator. logger may be nil.
func New(cfg Config, logger hclog.Logger, opts ...Option) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate coordinator config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	c := &Coordinator{
		cfg:    cfg.withDefaults(),
		logger: logger.Named("coordinator"),
		now:    time.Now,
		events: make(chan event, 256),
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(c)
	}
	var err error
	if c.metrics, err = newMetrics(c.reg); err != nil {
		return nil, err
	}
	return c, nil
}

// event is something the loop must handle.
type event interface{ isEvent() }

// joinEvent asks the loop to admit an agent on a new connection.
type joinEvent struct {
	hello hello
	conn  *conn
	reply chan error
}

// msgEvent carries one inbound message of a connection.
type msgEvent struct {
	conn *conn
	msg  any
}

// leaveEvent says a connection's stream ended.
type leaveEvent struct {
	conn *conn
	err  error
}

type concurrencyEvent struct{ level int }

// lostEvent says an agent is gone for good (its pod failed), so the loop
// need not wait for its heartbeats to stop.
type lostEvent struct{ id, reason string }

func (joinEvent) isEvent()        {}
func (msgEvent) isEvent()         {}
func (leaveEvent) isEvent()       {}
func (concurrencyEvent) isEvent() {}
func (lostEvent) isEvent()        {}

// conn is one agent stream as the loop sees it. out is written only by the
// loop; closed (kick) is closed once by the loop to end the stream.
type conn struct {
	agentID string
	out     chan any
	kick    chan struct{}
	kicked  bool
}

func newConn() *conn {
	return &conn{out: make(chan any, outQueue), kick: make(chan struct{})}
}

// send queues m without blocking; a full queue closes the connection.
func (cn *conn) send(m any) bool {
	if cn.kicked {
		return false
	}
	select {
	case cn.out <- m:
		return true
	default:
		cn.close()
		return false
	}
}

func (cn *conn) close() {
	if !cn.kicked {
		cn.kicked = true
		close(cn.kick)
	}
}

// submit hands an event to the loop, giving up when ctx is done or the run
// is over.
func (c *Coordinator) submit(ctx context.Context, e event) error {
	select {
	case c.events <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrRunOver
	}
}

// join admits an agent; called by the edge for each new stream. The
// welcome is the first message queued on the returned connection.
func (c *Coordinator) join(ctx context.Context, h hello) (*conn, error) {
	cn := newConn()
	cn.agentID = h.ID
	reply := make(chan error, 1)
	if err := c.submit(ctx, joinEvent{hello: h, conn: cn, reply: reply}); err != nil {
		return nil, err
	}
	select {
	case err := <-reply:
		if err != nil {
			return nil, err
		}
		return cn, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrRunOver
	}
}

// SetConcurrency changes the running stage's level: the coordinator
// recomputes every agent's share and pushes it without stopping the load.
// Later stages keep their own levels.
func (c *Coordinator) SetConcurrency(ctx context.Context, level int) error {
	if level < 1 {
		return fmt.Errorf("set concurrency %d: must be >= 1", level)
	}
	return c.submit(ctx, concurrencyEvent{level: level})
}

// AgentLost tells the run that agent id is gone for good (its process
// died: a pod OOM-killed, failed or deleted), so its sessions move to the
// others at once instead of after Config.HeartbeatTimeout. An unknown or
// already lost agent is ignored; an agent that joins later under the same
// id is admitted as new. It returns ErrRunOver once the run is over (a
// loss reported as it ends is ignored), or ctx's error. It is safe to
// call from any goroutine.
func (c *Coordinator) AgentLost(ctx context.Context, id, reason string) error {
	select {
	case <-c.done:
		// The events channel has room after the run too: say it is over.
		return ErrRunOver
	default:
	}
	return c.submit(ctx, lostEvent{id: id, reason: reason})
}

// Run waits for the agents, runs every stage with the same agents (each
// preceded by Config.BeforeStage and separated by the stages' cooldowns)
// and returns the merged result. It returns early with what was measured
// and ctx's error when ctx is done (the stage it cut short is in
// Result.Stages, marked Interrupted), with BeforeStage's error, and with
// ErrAgentLost under PolicyFail. Agents are told to stop before it
// returns, and a running BeforeStage has returned. Run may be called once.
func (c *Coordinator) Run(ctx context.Context) (*Result, error) {
	first := false
	c.ran.Do(func() { first = true })
	if !first {
		return nil, ErrAlreadyRun
	}
	r := newRun(c.cfg, c.logger, c.now())
	r.metrics = c.metrics
	defer close(c.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	// BeforeStage runs beside the loop, which keeps serving the agents;
	// whoever starts it cancels it and waits for it.
	hookCtx, cancelHook := context.WithCancel(ctx)
	var hooks sync.WaitGroup
	defer hooks.Wait()
	defer cancelHook()
	hookDone := make(chan error, 1)
	for {
		select {
		case <-ctx.Done():
			r.abort(ctx.Err().Error(), c.now())
			return r.result(), ctx.Err()
		case err := <-hookDone:
			r.beforeStageDone(err, c.now())
		case e := <-c.events:
			r.handle(e, c.now())
			// Take everything already queued before judging silence:
			// after a pause of this process, heartbeats wait here.
			for n := len(c.events); n > 0; n-- {
				r.handle(<-c.events, c.now())
			}
		case <-t.C:
		}
		done := r.step(c.now())
		c.metrics.agents.Set(float64(len(r.byIndex)))
		if done {
			return r.result(), r.err
		}
		if r.hookDue {
			r.hookDue = false
			i, s, before := r.next, r.cfg.Stages[r.next], r.cfg.BeforeStage
			hooks.Go(func() { hookDone <- before(hookCtx, i, s) })
		}
	}
}

// run is the state of one run, owned by Run's goroutine.
type run struct {
	cfg     Config
	logger  hclog.Logger
	metrics *metrics

	agents  map[string]*member // by agent id, lost ones included
	byIndex map[int]*member    // live members by index
	epoch   uint64

	state    runState
	deadline time.Time // of the current wait (join, ready)
	stage    int
	level    int
	st       *stageRun
	nextID   uint32
	windows  []*window // every window of the run, by id order
	byID     map[uint32]*window
	out      *writer
	err      error
	finished []*StageResult
	stopSent bool
	lastStep time.Time

	// Between stages (stIdle): the stage to start next, the end of the
	// cooldown, and the BeforeStage hook's progress.
	next        int
	idleUntil   time.Time
	hookDue     bool // Run must start BeforeStage(next)
	hookRunning bool
}

type runState int

const (
	stWaiting   runState = iota // for cfg.Agents to join
	stAssigning                 // assignments sent, waiting for Ready
	stRunning                   // windows open on schedule
	stDraining                  // drain sent, waiting for windows to close
	stIdle                      // between stages: cooldown, then BeforeStage
	stDone
)

// member is an agent as the run knows it.
type member struct {
	id          string
	index       int
	capacity    int
	incarnation uint64
	conn        *conn     // nil while disconnected
	lastSeen    time.Time // heartbeat deadline base; moved on by excuseStall
	heard       time.Time // when its last message really arrived
	joined      time.Time // became a member of the current stage
	lost        bool
	lostAt      time.Time
	applied     uint64 // highest report seq applied
	wm          uint32
	hasWM       bool
	finished    bool // load stopped for this stage
	readyEpoch  uint64
	share       int
	active      []int // from the last heartbeat: running or queued below cursor
	cursor      int   // shard cursor of the last heartbeat
	logger      hclog.Logger
}

// stageRun is the schedule of the running stage.
type stageRun struct {
	idx      int
	stage    Stage
	res      *StageResult
	start    time.Time
	ends     time.Time   // planned end of the measured time (grows on re-run)
	bounds   []time.Time // start of each planned window
	kinds    []Kind
	opened   int // windows opened so far
	phaseOut int // phases sent so far
	drainAt  time.Time
	drained  bool
	reruns   int
	cur      *window
}

func newRun(cfg Config, logger hclog.Logger, now time.Time) *run {
	r := &run{
		cfg:      cfg,
		logger:   logger,
		agents:   make(map[string]*member),
		byIndex:  make(map[int]*member),
		byID:     make(map[uint32]*window),
		deadline: now.Add(cfg.JoinTimeout),
		nextID:   1,
	}
	if cfg.OutDir != "" {
		r.out = &writer{dir: cfg.OutDir, logger: logger}
	}
	return r
}

// live returns the live members sorted by index.
func (r *run) live() []*member {
	ms := make([]*member, 0, len(r.byIndex))
	for _, m := range r.byIndex {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return a.index - b.index })
	return ms
}

func (r *run) handle(e event, now time.Time) {
	switch e := e.(type) {
	case joinEvent:
		e.reply <- r.join(e.hello, e.conn, now)
	case msgEvent:
		r.message(e.conn, e.msg, now)
	case leaveEvent:
		m := r.agents[e.conn.agentID]
		if m != nil && m.conn == e.conn {
			m.conn = nil
			if !m.lost && r.state != stDone {
				m.logger.Warn("agent disconnected", "error", e.err)
			}
		}
		e.conn.close()
	case lostEvent:
		if m := r.agents[e.id]; m != nil && !m.lost {
			r.lose(m, now, e.reason)
		}
	case concurrencyEvent:
		if r.st == nil || r.state != stRunning {
			r.logger.Warn("concurrency change ignored: no stage is running", "level", e.level)
			return
		}
		r.logger.Info("changing concurrency", "from", r.level, "to", e.level)
		r.level = e.level
		r.reshard(nil, now)
	}
}

// join admits an agent on cn and queues its welcome (and, mid-stage, what
// it needs to join the load) on cn.
func (r *run) join(h hello, cn *conn, now time.Time) error {
	if r.state == stDone {
		return ErrRunOver
	}
	if h.Fingerprint != r.cfg.Histogram.Fingerprint() || h.Histogram != r.cfg.Histogram {
		return fmt.Errorf("admit agent %q with histogram %s, want %s: %w",
			h.ID, h.Fingerprint, r.cfg.Histogram.Fingerprint(), ErrHistogramMismatch)
	}
	m := r.agents[h.ID]
	resumed := m != nil && m.incarnation == h.Incarnation
	if m != nil && !resumed && !m.lost {
		// A new process under a known id: the old one is gone with its
		// unacked reports.
		r.lose(m, now, "agent restarted")
	}
	if m == nil || !resumed {
		m = &member{id: h.ID, incarnation: h.Incarnation, capacity: h.Capacity, index: -1}
		if old := r.agents[h.ID]; old != nil {
			m.index = old.index
		}
		if h.Index >= 0 {
			m.index = h.Index
		}
		r.agents[h.ID] = m
	}
	if m.conn != nil {
		m.conn.close() // replaced by the new stream
	}
	m.conn = cn
	m.lastSeen, m.heard = now, now
	if m.index < 0 || (r.byIndex[m.index] != nil && r.byIndex[m.index] != m) {
		m.index = r.freeIndex()
	}
	m.logger = r.logger.With("agent_id", m.id, "index", m.index)
	w := welcome{Index: m.index, Acked: m.applied, Heartbeat: r.cfg.HeartbeatInterval}
	if m.lost || r.byIndex[m.index] != m {
		m.lost = false
		m.finished = false
		m.hasWM = false
		m.joined = now
		r.byIndex[m.index] = m
		m.logger.Info("agent joined", "capacity", h.Capacity, "version", h.Version, "members", len(r.byIndex))
		// The welcome goes first so the assignment follows it.
		cn.send(w)
		if r.state == stRunning || r.state == stAssigning {
			r.reshard(nil, now)
			if r.st != nil && r.st.cur != nil {
				r.st.cur.addMember(m, now)
				cn.send(phase{Window: r.st.cur.id, Kind: r.st.cur.kind, StartAt: now, Level: r.level, Mode: r.st.stage.Mode})
			}
		}
		return nil
	}
	m.logger.Info("agent reconnected", "acked_seq", m.applied)
	cn.send(w)
	// Replay what the agent needs to pick up where it was.
	if r.st != nil && (r.state == stRunning || r.state == stAssigning || r.state == stDraining) {
		cn.send(r.assignmentFor(m, nil))
		if r.st.cur != nil && !r.st.drained {
			cn.send(phase{Window: r.st.cur.id, Kind: r.st.cur.kind, StartAt: r.st.cur.start, Level: r.level, Mode: r.st.stage.Mode})
		}
		if r.st.drained {
			cn.send(phase{Window: r.st.cur.id, Kind: KindDrain, StartAt: r.st.drainAt, Level: r.level, Mode: r.st.stage.Mode})
		}
	}
	return nil
}

func (r *run) freeIndex() int {
	for i := 0; ; i++ {
		taken := false
		for _, m := range r.agents {
			if m.index == i && !m.lost {
				taken = true
				break
			}
		}
		if !taken && r.byIndex[i] == nil {
			return i
		}
	}
}

func (r *run) message(cn *conn, msg any, now time.Time) {
	m := r.agents[cn.agentID]
	if m == nil || m.conn != cn {
		return // a replaced stream
	}
	m.lastSeen, m.heard = now, now
	switch msg := msg.(type) {
	case heartbeat:
		m.active, m.cursor = msg.Active, msg.Next
	case ready:
		if msg.Epoch > m.readyEpoch {
			m.readyEpoch = msg.Epoch
		}
	case started:
		if r.st != nil && r.st.res.Offsets != nil {
			if _, ok := r.st.res.Offsets[m.id]; !ok {
				r.st.res.Offsets[m.id] = msg.Offset
				m.logger.Debug("agent started", "window", msg.Window, "offset", msg.Offset)
			}
		}
	case report:
		r.apply(m, msg, now)
	case watermark:
		if msg.Seq <= m.applied && (!m.hasWM || msg.Window >= m.wm) {
			m.wm, m.hasWM = msg.Window, true
		}
		// An agent repeats its last watermark until its next stage's
		// engine is built: a finished one of an earlier stage must not
		// mark it finished in this one (its windows would close early).
		if w := r.byID[msg.Window]; msg.Finished && msg.Seq <= m.applied && r.st != nil && w != nil && w.stage == r.st.idx {
			m.finished = true
		}
	}
}

// apply merges a report once per (agent, seq) and acks it.
func (r *run) apply(m *member, rep report, now time.Time) {
	if rep.Seq <= m.applied {
		r.metrics.reportsDuplicate.Inc()
		m.conn.send(ack{Seq: m.applied}) // a resend of something applied
		return
	}
	if rep.Seq != m.applied+1 {
		m.logger.Warn("report sequence gap", "expected", m.applied+1, "got", rep.Seq)
	}
	m.applied = rep.Seq
	defer m.conn.send(ack{Seq: m.applied})
	w := r.byID[rep.Window.ID]
	if w == nil {
		// Only a broken agent stamps a window never announced.
		m.logger.Error("report for an unknown window", "window", rep.Window.ID, "requests", rep.Window.Counters.Requests)
		return
	}
	r.metrics.reportsApplied.Inc()
	closed := w.closed
	if err := w.apply(m, rep.Window, r.out); err != nil {
		r.metrics.mergeErrors.Inc()
		m.logger.Error("merge report", "window", w.id, "error", err)
	}
	if closed {
		r.metrics.lateRequests.Add(float64(rep.Window.Counters.Requests + rep.Window.Counters.Failed))
	}
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(m.id, w.id, rep.Window)
	}
}

// assignmentFor builds m's assignment in the current stage.
func (r *run) assignmentFor(m *member, restart []int, takeOvers ...takeOver) assignment {
	members := make([]int, 0, len(r.byIndex))
	for i := range r.byIndex {
		members = append(members, i)
	}
	slices.Sort(members)
	rate := 0.0
	if r.st.stage.RequestRate > 0 {
		shares := make([]int, 0, len(members))
		pos := 0
		for k, i := range members {
			shares = append(shares, r.byIndex[i].share)
			if i == m.index {
				pos = k
			}
		}
		rate = shard.SplitRate(r.st.stage.RequestRate, shares)[pos]
	}
	return assignment{
		Epoch: r.epoch, Stage: r.st.idx, Index: m.index, Members: members, Spec: r.cfg.Spec,
		Concurrency: m.share, Level: r.level, Rate: rate, Mode: r.st.stage.Mode,
		Restart: restart, Limit: r.st.stage.Conversations, TakeOver: takeOvers,
	}
}

// reshard recomputes shares over the live members and sends each its
// assignment; restarts maps an agent index to conversations it must start
// again, and takeOvers names members just lost with their cursors.
func (r *run) reshard(restarts map[int][]int, now time.Time, takeOvers ...takeOver) {
	if r.st == nil {
		return
	}
	live := r.live()
	caps := make([]int, len(live))
	for i, m := range live {
		caps[i] = m.capacity
	}
	level := r.level
	if r.st.stage.RequestRate > 0 && level == 0 {
		level = 0
	}
	shares, err := shard.Split(level, caps)
	if err != nil {
		r.logger.Warn("split level over capacities failed, splitting evenly", "level", level, "error", err)
		shares, _ = shard.Split(level, make([]int, len(live)))
	}
	r.epoch++
	for i, m := range live {
		m.share = shares[i]
	}
	for _, m := range live {
		if m.conn != nil {
			m.conn.send(r.assignmentFor(m, restarts[m.index], takeOvers...))
		}
	}
	r.logger.Debug("resharded", "epoch", r.epoch, "members", len(live), "level", level, "shares", shares)
}

// lose declares m lost: its sessions move to the others and every open
// window it contributed to is degraded.
func (r *run) lose(m *member, now time.Time, why string) {
	if m.lost {
		return
	}
	// The loss instant is the last message, not the deadline base a stall
	// of this process moved on: coverage must not credit the silence.
	m.lost, m.lostAt = true, m.heard
	if r.byIndex[m.index] == m {
		delete(r.byIndex, m.index)
	}
	if m.conn != nil {
		m.conn.close()
		m.conn = nil
	}
	r.metrics.agentsLost.Inc()
	m.logger.Warn("agent lost", "reason", why, "last_seen", m.heard, "acked_seq", m.applied, "members", len(r.byIndex))
	if r.st == nil || r.state == stWaiting || r.state == stDone {
		return
	}
	degradedMeasure := false
	for _, w := range r.windows {
		if w.closed || w.stage != r.st.idx {
			continue
		}
		if w.lose(m, now) && w.kind == KindMeasure {
			degradedMeasure = true
			switch r.cfg.OnLoss {
			case PolicyRerun:
				if r.st.reruns < MaxReruns && !w.rerun {
					w.rerun = true
					r.st.reruns++
					r.st.extend()
				}
			case PolicyFail:
				r.err = fmt.Errorf("run stage %d: agent %q: %w", r.st.idx, m.id, ErrAgentLost)
			}
		}
	}
	if degradedMeasure {
		r.st.res.Degraded = true
	}
	if len(r.byIndex) == 0 {
		r.logger.Error("every agent is lost")
		return
	}
	// Restart the lost agent's conversations on their new owners: those
	// running or queued at its last heartbeat go to their new owners by
	// name; those it may have started since have indices at or past the
	// heartbeat's cursor, which every survivor re-runs from its own shard
	// (shard.Indexer.TakeOver). A conversation it finished after that
	// heartbeat may so run twice, the second time marked restarted; none
	// is left unrun. The survivors' shares sum to the level again, so the
	// level's concurrency stays exact.
	members := make([]int, 0, len(r.byIndex))
	for i := range r.byIndex {
		members = append(members, i)
	}
	restarts := make(map[int][]int)
	for _, conv := range m.active {
		o, err := shard.Owner(conv, members)
		if err == nil {
			restarts[o] = append(restarts[o], conv)
		}
	}
	if r.state == stRunning || r.state == stAssigning {
		r.reshard(restarts, now, takeOver{Index: m.index, From: m.cursor})
	}
}

// step advances the run to now; it reports true when Run should return.
func (r *run) step(now time.Time) bool {
	r.excuseStall(now)
	// Loss detection: silence past the heartbeat timeout.
	for _, m := range r.agents {
		if !m.lost && now.Sub(m.lastSeen) > r.cfg.HeartbeatTimeout {
			r.lose(m, now, "heartbeat timeout")
		}
	}
	// A running BeforeStage is not interrupted here: its result ends the
	// run (beforeStageDone).
	if r.err != nil && r.state != stDone && r.state != stDraining && (r.state != stIdle || !r.hookRunning) {
		r.drain(now)
	}
	switch r.state {
	case stWaiting:
		if len(r.byIndex) >= r.cfg.Agents {
			r.idle(0, now)
		} else if now.After(r.deadline) {
			r.err = fmt.Errorf("wait for agents: %d of %d joined in %v", len(r.byIndex), r.cfg.Agents, r.cfg.JoinTimeout)
			r.finish("no agents")
			return true
		}
	case stAssigning:
		ready := len(r.byIndex) > 0
		for _, m := range r.byIndex {
			if m.readyEpoch < r.epoch && m.conn != nil {
				ready = false
			}
		}
		if ready || now.After(r.deadline) {
			if !ready {
				r.logger.Warn("starting without every agent ready", "timeout", r.cfg.ReadyTimeout)
			}
			r.schedule(now)
		}
	case stRunning:
		r.advance(now)
	case stDraining:
		if r.closeWindows(now) {
			r.endStage(now)
		}
	case stIdle:
		if !r.hookRunning && !now.Before(r.idleUntil) {
			if r.cfg.BeforeStage == nil {
				r.beforeStageDone(nil, now)
			} else {
				r.hookDue, r.hookRunning = true, true
				r.logger.Debug("before stage", "stage", r.next)
			}
		}
	case stDone:
		return true
	}
	if r.state == stRunning {
		r.closeWindows(now)
	}
	return r.state == stDone
}

// excuseStall forgives agents the silence of a pause of this process (GC,
// CPU starvation, a stopped VM): if the loop itself did not run for a
// while, it could not hear anyone, so the silence counts from now.
func (r *run) excuseStall(now time.Time) {
	if !r.lastStep.IsZero() {
		if gap := now.Sub(r.lastStep); gap > r.cfg.HeartbeatTimeout/2 {
			r.logger.Warn("coordinator loop stalled; extending agents' heartbeat deadlines", "stall", gap)
			for _, m := range r.agents {
				if !m.lost {
					m.lastSeen = m.lastSeen.Add(gap)
				}
			}
		}
	}
	r.lastStep = now
}

// idle leaves the agents idle until until, then runs BeforeStage(i) and
// starts stage i.
func (r *run) idle(i int, until time.Time) {
	r.state, r.next, r.idleUntil = stIdle, i, until
}

// beforeStageDone starts the next stage once BeforeStage(next) returned
// err (nil without a hook).
func (r *run) beforeStageDone(err error, now time.Time) {
	r.hookRunning = false
	if r.state != stIdle {
		return // the run ended meanwhile
	}
	switch {
	case err != nil:
		r.err = fmt.Errorf("before stage %d: %w", r.next, err)
	case len(r.byIndex) == 0:
		r.err = fmt.Errorf("start stage %d: every agent: %w", r.next, ErrAgentLost)
	default:
		r.startStage(r.next, now)
		return
	}
	r.finish(r.errReason())
}

// startStage sends the stage's assignments.
func (r *run) startStage(i int, now time.Time) {
	s := r.cfg.Stages[i]
	r.stage, r.level = i, s.Level
	r.st = &stageRun{idx: i, stage: s, res: &StageResult{
		Index: i, Level: s.Level, RequestRate: s.RequestRate, Mode: s.Mode, Offsets: make(map[string]time.Duration),
	}}
	for _, m := range r.byIndex {
		m.joined, m.finished, m.hasWM = now, false, false
	}
	r.state, r.deadline = stAssigning, now.Add(r.cfg.ReadyTimeout)
	r.logger.Info("stage assigned", "stage", i, "level", s.Level, "mode", s.Mode, "agents", len(r.byIndex))
	r.reshard(nil, now)
}

// schedule fixes the stage's window bounds and broadcasts the start.
func (r *run) schedule(now time.Time) {
	st := r.st
	st.start = now.Add(r.cfg.StartDelay)
	st.res.Start = st.start
	t := st.start
	if st.stage.Warmup > 0 {
		st.bounds, st.kinds = append(st.bounds, t), append(st.kinds, KindWarmup)
		t = t.Add(st.stage.Warmup)
	}
	win := r.cfg.Window
	if st.stage.Window > 0 {
		win = st.stage.Window
	}
	if win <= 0 || win > st.stage.Duration {
		win = st.stage.Duration
	}
	measureEnd := t.Add(st.stage.Duration)
	for ; t.Before(measureEnd); t = t.Add(win) {
		st.bounds, st.kinds = append(st.bounds, t), append(st.kinds, KindMeasure)
	}
	st.ends = measureEnd
	r.state = stRunning
	r.logger.Info("stage scheduled", "stage", st.idx, "start_at", st.start, "windows", len(st.bounds))
	r.advance(now)
}

// extend appends one measured window (PolicyRerun).
func (st *stageRun) extend() {
	win := st.ends.Sub(st.bounds[len(st.bounds)-1])
	st.bounds, st.kinds = append(st.bounds, st.ends), append(st.kinds, KindMeasure)
	st.ends = st.ends.Add(win)
}

// advance sends phases due within PhaseLead and opens windows whose start
// has come; at the end of the measured time it drains.
func (r *run) advance(now time.Time) {
	st := r.st
	lead := now.Add(r.cfg.PhaseLead)
	for st.phaseOut < len(st.bounds) && (st.phaseOut == 0 || !st.bounds[st.phaseOut].After(lead)) {
		w := r.openWindow(st.bounds[st.phaseOut], st.kinds[st.phaseOut], now)
		r.broadcast(phase{Window: w.id, Kind: w.kind, StartAt: w.start, Level: r.level, Mode: st.stage.Mode})
		st.phaseOut++
	}
	// The current window is the last opened one whose start has passed.
	for _, w := range r.windows {
		if w.stage == st.idx && !w.start.After(now) {
			st.cur = w
		}
	}
	allFinished := len(r.byIndex) > 0
	for _, m := range r.byIndex {
		allFinished = allFinished && m.finished
	}
	switch {
	case !st.ends.After(lead):
		r.drainAtTime(st.ends, now)
	case allFinished && st.stage.Conversations > 0:
		r.logger.Info("every agent ran out of conversations", "stage", st.idx)
		r.drainAtTime(now, now)
	}
}

func (r *run) drain(now time.Time) {
	if r.st == nil || r.state == stIdle {
		r.finish(r.errReason())
		return
	}
	r.drainAtTime(now, now)
}

func (r *run) errReason() string {
	if r.err != nil {
		return r.err.Error()
	}
	return "done"
}

// drainAtTime tells agents to stop at t and fixes the windows' ends.
func (r *run) drainAtTime(t, now time.Time) {
	st := r.st
	st.drained, st.drainAt = true, t
	// Every announced window stays (agents may have switched to it); the
	// last one ends at t, or at its start if it had not begun.
	last := r.lastWindow(st.idx)
	if last != nil {
		last.end = later(t, last.start)
		st.cur = last
		r.broadcast(phase{Window: last.id, Kind: KindDrain, StartAt: t, Level: r.level, Mode: st.stage.Mode})
	}
	r.state = stDraining
	r.logger.Info("stage draining", "stage", st.idx, "at", t)
}

// openWindow creates the next window of the stage.
func (r *run) openWindow(start time.Time, kind Kind, now time.Time) *window {
	st := r.st
	w := newWindow(r.nextID, st.idx, kind, start, r.cfg.Histogram)
	w.level, w.mode = r.level, st.stage.Mode
	r.nextID++
	// Until the next window is planned, the window ends at the stage's end.
	w.end = st.ends
	if prev := r.lastWindow(st.idx); prev != nil {
		prev.end = start
	}
	for _, m := range r.byIndex {
		w.addMember(m, start)
	}
	r.windows = append(r.windows, w)
	r.byID[w.id] = w
	st.res.Windows = append(st.res.Windows, w.id)
	st.opened++
	return w
}

func (r *run) lastWindow(stage int) *window {
	for i := len(r.windows) - 1; i >= 0; i-- {
		if r.windows[i].stage == stage {
			return r.windows[i]
		}
	}
	return nil
}

func (r *run) broadcast(m any) {
	for _, mb := range r.byIndex {
		if mb.conn != nil {
			mb.conn.send(m)
		}
	}
}

// closeWindows closes every window whose agents are all past it or whose
// grace has run out; it reports whether the stage's windows are all closed.
func (r *run) closeWindows(now time.Time) bool {
	all := true
	for _, w := range r.windows {
		if w.closed {
			continue
		}
		if w.stage != r.st.idx {
			continue
		}
		if w.end.After(now) || (r.state != stDraining && r.st.cur == w) {
			all = false
			continue
		}
		by := ""
		if w.watermarksPassed() {
			by = "watermarks"
		} else if now.Sub(w.end) > r.cfg.Grace {
			by = "grace"
		}
		if by == "" {
			all = false
			continue
		}
		w.close(by, now)
		r.metrics.windowClosed(w)
		r.logger.Info("window closed", "window", w.id, "kind", w.kind, "closed_by", by,
			"requests", w.data.Counters.Requests, "degraded", w.degraded)
		if r.cfg.OnWindowClosed != nil {
			r.cfg.OnWindowClosed(w.result())
		}
		if r.out != nil {
			if err := r.out.write(w); err != nil {
				r.logger.Error("write window", "window", w.id, "error", err)
			}
		}
	}
	return all
}

// endStage merges the stage's windows and starts the next stage or ends.
func (r *run) endStage(now time.Time) {
	st := r.st
	r.closeStage(false)
	r.logger.Info("stage done", "stage", st.idx, "requests", st.res.Measured.Counters.Requests,
		"start_skew", st.res.StartSkew, "degraded", st.res.Degraded)
	if r.err == nil && st.idx+1 < len(r.cfg.Stages) && len(r.byIndex) > 0 {
		r.idle(st.idx+1, now.Add(st.stage.Cooldown))
		return
	}
	if r.err == nil && len(r.byIndex) == 0 {
		r.err = fmt.Errorf("run stage %d: every agent: %w", st.idx, ErrAgentLost)
	}
	r.finish(r.errReason())
}

// closeStage merges the running stage's windows (all closed) into its
// result and hands it over.
func (r *run) closeStage(interrupted bool) {
	st := r.st
	st.res.Interrupted = interrupted
	st.res.Measured = record.NewWindow(0, r.cfg.Histogram)
	offsets := make([]time.Duration, 0, len(st.res.Offsets))
	for _, o := range st.res.Offsets {
		offsets = append(offsets, o)
	}
	if len(offsets) > 0 {
		st.res.StartSkew = slices.Max(offsets) - slices.Min(offsets)
	}
	for _, w := range r.windows {
		if w.stage != st.idx || w.kind != KindMeasure || w.rerun {
			continue
		}
		m, err := w.result().Merged()
		if err == nil {
			err = st.res.Measured.Merge(m)
		}
		if err != nil {
			r.logger.Error("merge stage", "window", w.id, "error", err)
		}
	}
	r.finished = append(r.finished, st.res)
	if r.cfg.OnStageDone != nil {
		r.cfg.OnStageDone(st.res)
	}
}

// finish tells every agent to stop.
func (r *run) finish(reason string) {
	if !r.stopSent {
		r.stopSent = true
		for _, m := range r.agents {
			if m.conn != nil {
				m.conn.send(stop{Reason: reason})
			}
		}
	}
	r.state = stDone
}

// abort ends the run on cancellation, closing what can be closed: the
// stage it cuts short goes into the result marked Interrupted.
func (r *run) abort(reason string, now time.Time) {
	if r.st != nil && (r.state == stAssigning || r.state == stRunning || r.state == stDraining) {
		for _, w := range r.windows {
			if !w.closed && w.stage == r.st.idx {
				w.close("cancelled", now)
				r.metrics.windowClosed(w)
				if r.cfg.OnWindowClosed != nil {
					r.cfg.OnWindowClosed(w.result())
				}
			}
		}
		r.closeStage(true)
		r.logger.Info("stage interrupted", "stage", r.st.idx, "requests", r.st.res.Measured.Counters.Requests)
	}
	r.finish(reason)
}

// result builds the Result from the run state.
func (r *run) result() *Result {
	res := &Result{Stages: r.finished}
	for _, w := range r.windows {
		res.Windows = append(res.Windows, w.result())
	}
	return res
}
