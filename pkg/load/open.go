package load

import (
	"context"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// arrive runs the open loop: it starts a conversation at each arrival of the
// schedule until ctx is done or no new conversation can start. With
// MaxConcurrency an arrival that finds every slot taken waits for one; its
// intended time stays, so the wait shows as lag, and the following arrivals
// keep their own times (they go out at once when a slot frees).
func (e *Engine) arrive(ctx, turnCtx context.Context, start time.Time) {
	sch := newSchedule(e.cfg.RequestRate, e.cfg.shape(), e.cfg.Seed)
	var slots chan struct{}
	if e.cfg.MaxConcurrency > 0 {
		slots = make(chan struct{}, e.cfg.MaxConcurrency)
	}
	var p pauser
	defer p.close()
	for {
		at := start.Add(sch.next())
		if !p.until(e, ctx, nil, at) {
			e.dropDue(ctx, sch, start, at)
			return
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				e.dropDue(ctx, sch, start, at)
				return
			case <-e.spent:
				return
			}
		}
		idx, ok := e.indexer.Next()
		if !ok {
			e.indexerDry()
			if slots != nil {
				<-slots
			}
			return
		}
		e.wg.Add(1)
		e.sessions.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.sessions.Add(-1)
			if slots != nil {
				defer func() { <-slots }()
			}
			var p pauser
			defer p.close()
			turnCtx, cancel := sessionContext(turnCtx)
			defer cancel()
			e.converse(ctx, turnCtx, idx, at, nil, &p)
		}()
	}
}

// dropDue counts, when ctx ended the open loop, the arrivals that were due
// (first at, then the rest of the schedule up to now) but never sent.
func (e *Engine) dropDue(ctx context.Context, sch *schedule, start, at time.Time) {
	if ctx.Err() == nil {
		return
	}
	now := time.Now()
	var n int64
	for !at.After(now) {
		n++
		at = start.Add(sch.next())
	}
	if n > 0 {
		e.rec.Update(e.win.current(), func(c *record.Counters) { c.Dropped += n })
	}
}
