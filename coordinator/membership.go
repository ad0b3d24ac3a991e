package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/shard"
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
	active      []int     // from the last heartbeat: running or queued below cursor
	cursor      int       // shard cursor of the last heartbeat
	failed      *problem  // the fatal problem it reported, nil while it can run
	warnings    []problem // non-fatal problems it reported
	lostWhy     string
	everReady   bool
	checked     bool // said it checked its environment (Ready of epoch 0)
	logger      hclog.Logger
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
	w := welcome{Index: m.index, Acked: m.applied, Heartbeat: r.cfg.HeartbeatInterval, Spec: r.cfg.Spec}
	if m.lost || r.byIndex[m.index] != m {
		m.lost, m.failed, m.lostWhy = false, nil, ""
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
		if r.cfg.OnHealth != nil {
			r.cfg.OnHealth(m.id, msg.Health)
		}
	case ready:
		if msg.Epoch == 0 {
			// Epoch 0: the agent checked its environment against the
			// spec and can run.
			m.checked = true
			break
		}
		if msg.Epoch > m.readyEpoch {
			m.readyEpoch = msg.Epoch
		}
		m.everReady = true
	case problem:
		r.problem(m, msg, now)
	case started:
		if r.st != nil && r.st.res.Offsets != nil {
			if _, ok := r.st.res.Offsets[m.id]; !ok {
				r.st.res.Offsets[m.id] = msg.Offset
				m.logger.Debug("agent started", "window", msg.Window, "offset", msg.Offset)
			}
		}
	case report:
		r.apply(m, msg, now)
	case badReport:
		r.reject(m, msg)
	case watermark:
		if msg.Seq <= m.applied && (!m.hasWM || msg.Window >= m.wm) {
			m.wm, m.hasWM = msg.Window, true
		}
		// An agent repeats its last watermark until its next stage's
		// engine is built: a finished one of an earlier stage must not
		// mark it finished in this one (its windows would close early),
		// nor one of an earlier assignment (a reshard may have given it a
		// lost agent's conversations to run).
		if w := r.byID[msg.Window]; msg.Finished && msg.Seq <= m.applied && msg.Epoch >= r.epoch && r.st != nil && w != nil && w.stage == r.st.idx {
			m.finished = true
		}
	}
}

// apply merges a report once per (agent, seq) and acks it. A report
// whose histograms the window refuses (malformed, another geometry) is
// rejected as one the edge could not decode.
func (r *run) apply(m *member, rep report, now time.Time) {
	if !r.take(m, rep.Seq) {
		return
	}
	defer m.conn.send(ack{Seq: m.applied})
	w := r.byID[rep.Window.ID]
	if w == nil {
		// Only a broken agent stamps a window never announced.
		m.logger.Error("report for an unknown window", "window", rep.Window.ID, "requests", rep.Window.Counters.Requests)
		return
	}
	closed := w.closed
	// The report's own histograms are read after the merge only by the
	// live view, OnReport and, for a late report, the load metrics.
	w.ingest.keep = closed || r.metrics.live != nil || r.cfg.OnReport != nil
	err := w.apply(m, rep, r.out)
	if refused(err) {
		r.refuse(m, rep.Seq, rep.Window.ID, err)
		return
	}
	r.metrics.reportsApplied.Inc()
	if err != nil {
		r.metrics.mergeErrors.Inc()
		m.logger.Error("merge report", "window", w.id, "error", err)
	}
	if !errors.Is(err, hdr.ErrConfigMismatch) {
		// What the window merged, late reports included (the results
		// count them too); a report of another geometry merged nothing.
		r.metrics.report(w, rep.Window)
	}
	if closed {
		r.metrics.lateRequests.Add(float64(rep.Window.Counters.Requests + rep.Window.Counters.Failed))
	}
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(m.id, w.id, rep.Window)
	}
}

// reject accounts for a report the edge could not decode, once per
// (agent, seq) as apply does (see refuse).
func (r *run) reject(m *member, rep badReport) {
	if !r.take(m, rep.Seq) {
		return
	}
	defer m.conn.send(ack{Seq: m.applied})
	r.refuse(m, rep.Seq, rep.Window, rep.Err)
}

// take moves m's applied sequence on to seq and reports whether seq is
// new; a resend of something applied is counted and acked again.
func (r *run) take(m *member, seq uint64) bool {
	if seq <= m.applied {
		r.metrics.reportsDuplicate.Inc()
		m.conn.send(ack{Seq: m.applied}) // a resend of something applied
		return false
	}
	if seq != m.applied+1 {
		m.logger.Warn("report sequence gap", "expected", m.applied+1, "got", seq)
	}
	m.applied = seq
	return true
}

// refuse accounts for a report of m that was refused, whole: it is acked
// by the caller, so the agent drops it and its later reports are applied
// as usual; counted as a merge error; and its window, missing that data,
// is marked degraded with the rejection in the agent's coverage.
func (r *run) refuse(m *member, seq uint64, window uint32, why error) {
	r.metrics.mergeErrors.Inc()
	m.logger.Error("report rejected", "seq", seq, "window", window, "error", why)
	w := r.byID[window]
	if w == nil {
		return
	}
	w.reject(m)
	if w.kind == KindMeasure && r.st != nil && w.stage == r.st.idx {
		r.st.res.Degraded = true
	}
	if w.closed && r.out != nil {
		if err := r.out.write(w); err != nil {
			m.logger.Error("write window", "window", w.id, "error", err)
		}
	}
}

// lose declares m lost: its sessions move to the others and every open
// window it contributed to is degraded.
func (r *run) lose(m *member, now time.Time, why string) {
	if m.lost {
		return
	}
	// The loss instant is the last message, not the deadline base a stall
	// of this process moved on: coverage must not credit the silence.
	m.lost, m.lostAt, m.lostWhy = true, m.heard, why
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
					r.measureSpan(r.st.ends)
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

func (r *run) broadcast(m any) {
	for _, mb := range r.byIndex {
		if mb.conn != nil {
			mb.conn.send(m)
		}
	}
}
