package load

import (
	"context"
	"errors"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// outcome is how a conversation ended.
type outcome int

const (
	outcomeDone   outcome = iota // every turn succeeded
	outcomeFailed                // a turn failed; the conversation was ended
	outcomeStop                  // ctx done, session retired or budget spent
)

// converse runs conversation idx on the calling goroutine. base is when its
// first turn was due: the open loop's arrival, or when the closed-loop
// session became free. It returns when the last turn ended and how.
//
// Intended send times: the first turn is due at base plus the time
// Conversation.Next took (a user model's latency is not the server's lag;
// an open-loop arrival's wait for a slot is) plus its think time. Turn k > 0
// is due at the previous turn's end plus its think time, or when Next
// returned if that is later (the user model "types" during the think time).
//
// A failed turn ends the conversation: its history would lack the assistant
// reply the next turn builds on. It is recorded with its failure class and
// the conversation is not counted as completed.
func (e *Engine) converse(ctx, turnCtx context.Context, idx int, base time.Time, stop <-chan struct{}, p *pauser) (time.Time, outcome) {
	conv := e.src.Conversation(idx)
	turns := conv.Turns()
	if e.singleTurn || turns < 1 {
		turns = 1
	}
	var headers map[string]string
	if e.cfg.SessionHeader != "" {
		// One map for the whole conversation; the client only reads it.
		headers = map[string]string{e.cfg.SessionHeader: SessionID(e.cfg.Seed, idx)}
	}
	restarted := false
	if r, ok := e.indexer.(Restarter); ok {
		restarted = r.Restarted(idx)
	}
	history := make([]openai.Message, 0, 2*turns+1)
	if sys := conv.System(); sys != "" {
		history = append(history, openai.Message{Role: openai.RoleSystem, Content: sys})
	}
	prevEnd := base
	for k := range turns {
		called := time.Now()
		turn, err := conv.Next(ctx, k, history)
		if err != nil {
			// Next fails only when ctx is done.
			return prevEnd, outcomeStop
		}
		returned := time.Now()
		var intended time.Time
		if k == 0 {
			intended = base.Add(returned.Sub(called) + turn.ThinkTime)
		} else {
			intended = prevEnd.Add(turn.ThinkTime)
			if returned.After(intended) {
				intended = returned
			}
		}
		if !p.until(e, ctx, stop, intended) || !e.reserve() {
			if k > 0 && closed(stop) {
				e.retired.Add(1)
			}
			return prevEnd, outcomeStop
		}
		maxTokens := turn.MaxTokens
		if maxTokens == 0 {
			maxTokens = e.cfg.MaxTokens
		}
		history = append(history, openai.Message{Role: openai.RoleUser, Content: turn.User})
		res := e.send(turnCtx, &turnInfo{
			conv:     idx,
			turn:     k,
			last:     k == turns-1,
			intended: intended,
			fallback: turn.Fallback,
			restart:  restarted,
			req:      client.Request{Messages: history, MaxTokens: maxTokens, Headers: headers},
		})
		prevEnd = turnEnd(res)
		if !res.OK() {
			if ctx.Err() != nil {
				return prevEnd, outcomeStop
			}
			return prevEnd, outcomeFailed
		}
		history = append(history, openai.Message{Role: openai.RoleAssistant, Content: res.Text})
	}
	return prevEnd, outcomeDone
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// turnInfo is what send needs to know about a turn.
type turnInfo struct {
	conv     int
	turn     int // 0-based
	last     bool
	intended time.Time
	fallback bool
	restart  bool
	req      client.Request
}

// send streams one turn, records it and returns the result. The turn is
// counted in flight in its window until it has been recorded, so
// Watermark never runs ahead of the Recorder.
func (e *Engine) send(turnCtx context.Context, t *turnInfo) *client.Result {
	w := e.win.begin()
	e.inflight.Add(1)
	e.sent.Add(1)
	res := e.s.Stream(turnCtx, &t.req)
	e.inflight.Add(-1)
	if res == nil {
		// A Streamer broke its contract; count the turn rather than crash.
		res = &client.Result{Class: client.ClassProtocol, Err: errNilResult}
	}

	s := record.Sample{Window: w, Conversation: t.conv, Turn: t.turn + 1, Restarted: t.restart, Intended: t.intended, Result: res}
	e.rec.Record(&s)
	late := e.lateAfter > 0 && !res.Start.IsZero() && s.Lag() > e.lateAfter
	first, completed := t.turn == 0, t.last && res.OK()
	if first || completed || late || t.fallback {
		e.rec.Update(w, func(c *record.Counters) {
			if first {
				c.ConversationsStarted++
			}
			if completed {
				c.ConversationsCompleted++
			}
			if late {
				c.LateSends++
			}
			if t.fallback {
				c.Fallbacks++
			}
		})
	}
	if e.observe != nil {
		e.observe(&s)
	}
	e.win.end(w)
	return res
}

var errNilResult = errors.New("streamer returned no result")

// turnEnd is when a turn's stream ended, on the client's monotonic clock.
func turnEnd(res *client.Result) time.Time {
	if res.Start.IsZero() {
		return time.Now()
	}
	return res.Start.Add(res.E2E)
}
