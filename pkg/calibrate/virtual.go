package calibrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// RunVirtual measures every level in every mode like Run, but on
// sim.Virtual: the same engines, router and document chats played as a
// discrete-event simulation in simulated time, with closed-loop sessions
// that send each turn the moment the last one ended. It takes seconds,
// does not depend on the host's load or timers, and gives the same figures
// on every run; TimeScale is ignored. What it leaves out is what the
// wall-clock Run adds: HTTP, the client and the host's scheduling.
func RunVirtual(ctx context.Context, o Options) ([]Point, error) {
	var out []Point
	src, err := workload.NewDocChat(workload.DocChatConfig{
		Seed: o.Seed, PromptTokens: o.PromptTokens, MaxTokens: o.MaxTokens,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	for _, m := range o.Modes {
		var v *sim.Virtual
		next := 0 // next conversation index, across the mode's levels
		for _, n := range o.Levels {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			if v == nil || o.FreshPerPoint {
				cfg, err := sim.ProfileConfig(o.Profile)
				if err != nil {
					return out, err
				}
				cfg.Router = m
				if o.Tune != nil {
					o.Tune(&cfg)
				}
				if v, err = sim.NewVirtual(cfg); err != nil {
					return out, err
				}
				if o.Prime > 0 {
					po := o
					po.Warmup, po.Window = o.Prime, time.Second
					if _, err := measureVirtual(ctx, po, v, src, &next, m, slices.Max(o.Levels)); err != nil && !errors.Is(err, errNoFirstToken) {
						return out, fmt.Errorf("prime %s: %w", m, err)
					}
				}
			}
			p, err := measureVirtual(ctx, o, v, src, &next, m, n)
			if err != nil {
				return out, fmt.Errorf("measure %s at %d sessions in simulated time: %w", m, n, err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// measureVirtual plays one level on v from its current time: sessions
// start at once, the window follows the warm-up, and at the end the
// sessions stop sending (their turns in flight still run on into the next
// level's warm-up, as a sweep's do).
func measureVirtual(ctx context.Context, o Options, v *sim.Virtual, src *workload.DocChat, next *int, mode sim.Mode, sessions int) (Point, error) {
	t0 := v.Now()
	winStart, winEnd := t0+o.Warmup, t0+o.Warmup+o.Window
	p := Point{Sessions: sessions, Mode: mode}
	stopped := false
	var (
		ttft              []time.Duration
		completed, outTok int
		sendErr           error
	)
	var startConv func()
	var sendTurn func(conv workload.Conversation, k int, history []openai.Message)
	sendTurn = func(conv workload.Conversation, k int, history []openai.Message) {
		if stopped {
			return
		}
		turn, err := conv.Next(ctx, k, history)
		if err != nil {
			sendErr = err
			return
		}
		mt := turn.MaxTokens
		if mt == 0 {
			mt = o.MaxTokens
		}
		history = append(history, openai.Message{Role: openai.RoleUser, Content: turn.User})
		sent := v.Now()
		inWindow := sent >= winStart && sent < winEnd
		if inWindow {
			p.Requests++
		}
		err = v.Send(history, mt,
			func(r sim.VirtualReply) {
				if inWindow {
					ttft = append(ttft, r.TTFT)
				}
			},
			func(r sim.VirtualReply) {
				end := sent + r.E2E
				if r.Err != nil {
					p.Failed++
					startConv()
					return
				}
				if end >= winStart && end < winEnd {
					completed++
					outTok += r.Tokens
				}
				if k+1 < conv.Turns() {
					h := append(history, openai.Message{Role: openai.RoleAssistant, Content: r.Text})
					sendTurn(conv, k+1, h)
					return
				}
				startConv()
			})
		if err != nil {
			sendErr = err
		}
	}
	startConv = func() {
		if stopped {
			return
		}
		conv := src.Conversation(*next)
		*next++
		var history []openai.Message
		if sys := conv.System(); sys != "" {
			history = append(history, openai.Message{Role: openai.RoleSystem, Content: sys})
		}
		sendTurn(conv, 0, history)
	}
	for range sessions {
		startConv()
	}
	v.RunUntil(winStart)
	if err := ctx.Err(); err != nil {
		return p, err
	}
	before, err := prefix(v.Gatherer())
	if err != nil {
		return p, err
	}
	v.RunUntil(winEnd)
	after, err := prefix(v.Gatherer())
	if err != nil {
		return p, err
	}
	// Turns sent near the end of the window get their first token after it.
	v.RunUntil(winEnd + 3*time.Second)
	stopped = true
	if sendErr != nil {
		return p, sendErr
	}
	if q := after[1] - before[1]; q > 0 {
		p.HitRate = (after[0] - before[0]) / q
	}
	if len(ttft) == 0 {
		return p, errNoFirstToken
	}
	p.TTFTP50, p.TTFTP95 = quantile(ttft, 0.50), quantile(ttft, 0.95)
	p.RPS = float64(completed) / o.Window.Seconds()
	if completed > 0 {
		p.MeanOutput = float64(outTok) / float64(completed)
	}
	return p, nil
}
