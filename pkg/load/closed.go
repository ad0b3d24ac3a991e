package load

import (
	"context"
	"time"
)

// Failure backoff of a closed-loop session: after a failed turn the session
// pauses before its next conversation, doubling from failPauseMin up to
// failPauseMax while turns keep failing, so a server that refuses
// connections is not hammered by sessions spinning on instant failures.
const (
	failPauseMin = 50 * time.Millisecond
	failPauseMax = 2 * time.Second
)

// session is one closed-loop session. pos is its index in Engine.live, -1
// once it was retired or ended; both are guarded by Engine.mu. stop is
// closed to retire it.
type session struct {
	stop chan struct{}
	pos  int
}

// supervise starts the closed loop's sessions and applies SetConcurrency
// until ctx is done or no new conversation can start.
func (e *Engine) supervise(ctx, turnCtx context.Context, start time.Time) {
	e.mu.Lock()
	n := e.target
	for i := range n {
		var at time.Time
		if e.rampUp > 0 {
			at = start.Add(e.rampUp * time.Duration(i) / time.Duration(n))
		}
		e.spawnLocked(ctx, turnCtx, at)
	}
	e.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.spent:
			return
		case <-e.noIndex:
			return
		case <-e.resize:
			e.reconcile(ctx, turnCtx)
		}
	}
}

// reconcile starts or retires sessions to match the target.
func (e *Engine) reconcile(ctx, turnCtx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.live) < e.target {
		e.spawnLocked(ctx, turnCtx, time.Time{})
	}
	retire := len(e.live) - e.target
	for range max(retire, 0) {
		s := e.live[len(e.live)-1]
		e.live = e.live[:len(e.live)-1]
		s.pos = -1
		close(s.stop)
	}
	e.logger.Debug("concurrency changed", "sessions", len(e.live), "retiring", max(retire, 0))
}

func (e *Engine) spawnLocked(ctx, turnCtx context.Context, at time.Time) {
	s := &session{stop: make(chan struct{}), pos: len(e.live)}
	e.live = append(e.live, s)
	e.wg.Add(1)
	e.sessions.Add(1)
	go e.runSession(ctx, turnCtx, s, at)
}

// leave removes an ending session from the live set.
func (e *Engine) leave(s *session) {
	e.mu.Lock()
	if s.pos >= 0 {
		last := e.live[len(e.live)-1]
		e.live[s.pos] = last
		last.pos = s.pos
		e.live = e.live[:len(e.live)-1]
		s.pos = -1
	}
	e.mu.Unlock()
}

// runSession runs conversations one after another until the session is
// retired, ctx is done or no new conversation can start. It first waits
// until at (ramp-up) when at is set.
func (e *Engine) runSession(ctx, turnCtx context.Context, s *session, at time.Time) {
	defer e.wg.Done()
	defer e.sessions.Add(-1)
	defer e.leave(s)
	var p pauser
	defer p.close()
	if !at.IsZero() && !p.until(e, ctx, s.stop, at) {
		return
	}
	turnCtx, cancel := sessionContext(turnCtx)
	defer cancel()
	free := time.Now()
	fails := 0
	for !e.stopping(ctx, s.stop) {
		idx, ok := e.indexer.Next()
		if !ok {
			e.indexerDry()
			return
		}
		var out outcome
		free, out = e.converse(ctx, turnCtx, idx, free, s.stop, &p)
		switch out {
		case outcomeStop:
			return
		case outcomeFailed:
			fails++
			pause := min(failPauseMin<<min(fails-1, 16), failPauseMax)
			if !p.until(e, ctx, s.stop, time.Now().Add(pause)) {
				return
			}
			free = time.Now()
		default:
			fails = 0
		}
	}
}

// sessionContext is a session's own child of turnCtx, for its turns. The
// client derives a context for each request from the one it is given, and
// the parent keeps its children in a map under a lock: thousands of
// sessions adding and removing theirs in the one shared turnCtx, from
// every CPU, contend for that lock and churn a map of thousands of
// entries, where a session's own context holds one child at a time.
func sessionContext(turnCtx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(turnCtx)
}
