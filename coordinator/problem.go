package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrAgentFailed is wrapped by Run's error when an agent said it cannot run
// its share (a Problem) and the run cannot go on without it: no agent is
// left, or the policy is PolicyFail.
var ErrAgentFailed = errors.New("agent failed")

// AgentsFailedError is Run's error when no agent can run: every agent's
// reason, grouped by class and message, with the agents that gave it.
type AgentsFailedError struct {
	Groups []FailureGroup
}

// FailureGroup is one reason several agents failed for.
type FailureGroup struct {
	Step, Class, Message string
	Agents               []string
}

func (e *AgentsFailedError) Error() string {
	parts := make([]string, 0, len(e.Groups))
	for _, g := range e.Groups {
		n := "1 agent"
		if len(g.Agents) != 1 {
			n = fmt.Sprintf("%d agents", len(g.Agents))
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s: %s", n, strings.Join(g.Agents, ", "), g.Class, g.Message))
	}
	return "no agent can run: " + strings.Join(parts, "; ")
}

// Unwrap makes errors.Is find ErrAgentFailed.
func (e *AgentsFailedError) Unwrap() error { return ErrAgentFailed }

// AgentStatus is what became of one agent of a run.
type AgentStatus struct {
	ID    string
	Index int
	// State is StateReady (it ran its share), StateJoined (it never said
	// it was ready), StateFailed (it said it cannot run) or StateLost (it
	// went silent, or what runs it saw it die).
	State string
	// Step, Class and Reason say why an agent failed; Reason alone why
	// one was lost.
	Step, Class, Reason string
	// Warnings are the non-fatal problems it reported, "class: message".
	Warnings []string
}

// Agent states of AgentStatus.
const (
	StateJoined = "joined"
	StateReady  = "ready"
	StateFailed = "failed"
	StateLost   = "lost"
)

// String is one line: "agent-1 failed at join (credential): ...".
func (s AgentStatus) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.ID, s.State)
	switch s.State {
	case StateFailed:
		fmt.Fprintf(&b, " at %s (%s): %s", s.Step, s.Class, s.Reason)
	case StateLost:
		fmt.Fprintf(&b, ": %s", s.Reason)
	}
	if len(s.Warnings) > 0 {
		fmt.Fprintf(&b, "; warnings: %s", strings.Join(s.Warnings, "; "))
	}
	return b.String()
}

// problem acts at once on an agent's problem. A warning is kept for the
// agent's status. A fatal one fails the agent: it is told to stop, leaves
// the run like a lost agent (its sessions move to the others, the stage is
// degraded), and the run ends when no agent is left or the policy is
// PolicyFail.
func (r *run) problem(m *member, p problem, now time.Time) {
	if !p.Fatal {
		if !slices.Contains(m.warnings, p) {
			m.warnings = append(m.warnings, p)
			m.logger.Warn("agent warns", "step", p.Step, "class", p.Class, "message", p.Message)
		}
		return
	}
	m.logger.Error("agent cannot run", "step", p.Step, "stage", p.Stage, "class", p.Class, "error", p.Message)
	// The stop goes out on the stream, which stays open until the agent
	// closes it: lose must not cut it before the stop is sent.
	cn := m.conn
	m.conn = nil
	r.lose(m, now, fmt.Sprintf("failed at %s (%s): %s", p.Step, p.Class, p.Message))
	m.failed = &p
	if cn != nil {
		cn.send(stop{Reason: fmt.Sprintf("refused: %s: %s", p.Class, p.Message)})
	}
	if r.st != nil && (r.state == stAssigning || r.state == stRunning || r.state == stDraining) {
		r.st.res.Degraded = true
	}
	r.checkFailed()
}

// checkFailed ends the run when agents failed and it cannot go on: no
// agent is left once every expected one has joined or failed, or the
// policy is PolicyFail.
func (r *run) checkFailed() {
	failed := r.failedAgents()
	if len(failed) == 0 || r.err != nil {
		return
	}
	waiting := r.state == stWaiting && len(r.byIndex)+len(failed) < r.cfg.Agents
	switch {
	case len(r.byIndex) == 0 && !waiting:
		r.err = r.failedError(failed)
	case r.cfg.OnLoss == PolicyFail:
		m := failed[0]
		r.err = fmt.Errorf("agent %q (%s): %s: %w", m.id, m.failed.Class, m.failed.Message, ErrAgentFailed)
	}
}

// failedAgents returns the agents that failed and did not come back, by id.
func (r *run) failedAgents() []*member {
	var out []*member
	for _, m := range r.agents {
		if m.failed != nil && m.lost {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *member) int { return strings.Compare(a.id, b.id) })
	return out
}

// failedError groups the failed agents' reasons.
func (r *run) failedError(failed []*member) *AgentsFailedError {
	e := &AgentsFailedError{}
	for _, m := range failed {
		p := m.failed
		i := slices.IndexFunc(e.Groups, func(g FailureGroup) bool {
			return g.Step == p.Step && g.Class == p.Class && g.Message == p.Message
		})
		if i < 0 {
			e.Groups = append(e.Groups, FailureGroup{Step: p.Step, Class: p.Class, Message: p.Message})
			i = len(e.Groups) - 1
		}
		e.Groups[i].Agents = append(e.Groups[i].Agents, m.id)
	}
	return e
}

// statuses returns every agent's status, by id.
func (r *run) statuses() []AgentStatus {
	out := make([]AgentStatus, 0, len(r.agents))
	for _, m := range r.agents {
		s := AgentStatus{ID: m.id, Index: m.index, State: StateJoined}
		switch {
		case m.failed != nil:
			s.State, s.Step, s.Class, s.Reason = StateFailed, m.failed.Step, m.failed.Class, m.failed.Message
		case m.lost:
			s.State, s.Reason = StateLost, m.lostWhy
		case m.everReady:
			s.State = StateReady
		}
		for _, w := range m.warnings {
			s.Warnings = append(s.Warnings, w.Class+": "+w.Message)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b AgentStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}
