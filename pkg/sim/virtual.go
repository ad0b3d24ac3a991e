package sim

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Virtual runs a simulator's frontend, router, indexer and workers as a
// discrete-event simulation on one simulated clock: no goroutines, timers
// or HTTP. The engines' scheduler and cost model, the block pools, the
// router's cost and the indexer's event delay are the same code the server
// runs; only the sleeps are replaced by jumps of the clock. So its figures
// are exact functions of the configuration and the requests sent, with no
// host load or timer resolution in them: the calibration and the crossover
// test use it to check the model's physics in seconds (docs/simulator.md).
//
// A Virtual is not safe for concurrent use: one goroutine sends requests
// (from Send's callbacks too) and advances the clock.
type Virtual struct {
	s      *Sim
	base   time.Time // simulated time 0 as the workers' time.Time
	now    time.Duration
	events eventQueue
	order  uint64
	busy   []bool
	active [][]*vreq // per worker: requests routed to it and not done
	// idxDue is when the indexer's next delivery is scheduled, if idxSet.
	idxDue time.Duration
	idxSet bool
}

// VirtualReply is what a client would have seen of one request, in
// simulated time from when it was sent.
type VirtualReply struct {
	Worker       int
	PromptTokens int
	CachedTokens int
	TTFT         time.Duration // to the first token, the frontend included
	E2E          time.Duration // to the last token
	Text         string        // the reply, for the conversation's history
	Tokens       int
	Err          error
}

type vreq struct {
	sent    time.Duration
	prefix  string
	seq     *seq
	ticket  *ticket
	first   bool
	reply   VirtualReply
	onFirst func(VirtualReply)
	onDone  func(VirtualReply)
}

type vevent struct {
	at     time.Duration
	order  uint64
	kind   int // evArrive, evStep, evIndex
	worker int
	req    *vreq
}

const (
	evArrive = iota
	evStep
	evIndex
)

type eventQueue []vevent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].order < q[j].order
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(vevent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// NewVirtual builds a discrete-event simulator of cfg. TimeScale is
// ignored (the clock is simulated); ColdStart and the lifecycle settings
// do not apply.
func NewVirtual(cfg Config) (*Virtual, error) {
	cfg.TimeScale, cfg.ColdStart = 1, false
	s, err := New(cfg, hclog.NewNullLogger(), prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	return &Virtual{
		s:      s,
		base:   time.Unix(0, 0),
		busy:   make([]bool, cfg.Replicas),
		active: make([][]*vreq, cfg.Replicas),
	}, nil
}

// Now returns the simulated time.
func (v *Virtual) Now() time.Duration { return v.now }

// Gatherer returns the simulator's metrics, as GET /metrics would show
// them; time-valued ones are simulated time.
func (v *Virtual) Gatherer() prometheus.Gatherer { return v.s.gather }

// InFlight returns the router's requests in flight per worker.
func (v *Virtual) InFlight() []int { return v.s.router.load() }

// Send sends a chat request now, as a streaming client with max_tokens set
// does. onFirst (may be nil) is called at its first token and onDone when
// it ends; both run inside RunUntil and may send more requests.
func (v *Virtual) Send(msgs []openai.Message, maxTokens int, onFirst, onDone func(VirtualReply)) error {
	prompt := chatTokens(msgs)
	maxLen := v.s.cfg.Engine.MaxModelLen
	if len(prompt) >= maxLen || maxTokens < 1 || len(prompt)+maxTokens > maxLen {
		return fmt.Errorf("send request: %d prompt tokens and max_tokens %d do not fit %d", len(prompt), maxTokens, maxLen)
	}
	lp := lengthParams{maxTokens: maxTokens, capped: true}
	r := &vreq{
		sent: v.now,
		seq: &seq{
			prompt: prompt,
			out:    generate(prompt, 0, v.s.cfg.Output, lp, false),
			notify: make(chan struct{}, 1),
		},
		onFirst: onFirst,
		onDone:  onDone,
	}
	r.reply.PromptTokens = len(prompt)
	// kubeai's PrefixHash hashes a prefix of the first user message.
	for _, m := range msgs {
		if m.Role == openai.RoleUser {
			r.prefix = m.Content[:min(len(m.Content), v.s.cfg.PrefixChars)]
			break
		}
	}
	v.push(vevent{at: v.now + v.s.cfg.Frontend.Delay(len(prompt)), kind: evArrive, req: r})
	return nil
}

// RunUntil processes every event up to simulated time t and leaves the
// clock at t.
func (v *Virtual) RunUntil(t time.Duration) {
	for len(v.events) > 0 && v.events[0].at <= t {
		e := heap.Pop(&v.events).(vevent)
		v.now = e.at
		switch e.kind {
		case evArrive:
			v.arrive(e.req)
		case evStep:
			v.stepEnd(e.worker)
		case evIndex:
			v.idxSet = false
			v.deliverIndex()
		}
	}
	v.now = max(v.now, t)
}

func (v *Virtual) push(e vevent) {
	v.order++
	e.order = v.order
	heap.Push(&v.events, e)
}

func (v *Virtual) at() time.Time { return v.base.Add(v.now) }

// arrive routes a request that has passed the frontend and queues it on
// its worker, as serveRequest does.
func (v *Virtual) arrive(r *vreq) {
	sq := r.seq
	sq.hashes = blockHashes(sq.prompt, v.s.cfg.Engine.BlockSize)
	sq.arrival = v.at()
	r.ticket = v.s.router.route(&routeInput{tokens: len(sq.prompt), hashes: sq.hashes, prefix: r.prefix})
	t := r.ticket
	sq.grow = func() { v.s.router.grow(t) }
	w := r.ticket.worker
	r.reply.Worker = w
	wk := v.s.workers[w]
	if !v.busy[w] {
		// An idle engine's clock stands still; bring it to now.
		wk.clock = v.now
	}
	wk.enqueue(sq)
	v.active[w] = append(v.active[w], r)
	if !v.busy[w] {
		v.startStep(w)
	}
}

// startStep plans worker w's next step and schedules its end, as one turn
// of worker.run does before it sleeps.
func (v *Virtual) startStep(w int) {
	wk := v.s.workers[w]
	wk.schedule()
	wk.flushEvents(v.at())
	v.scheduleIndex()
	v.collect(w) // a request the pool can never hold fails in schedule
	if len(wk.plan) == 0 {
		v.busy[w] = false
		return
	}
	v.busy[w] = true
	v.push(vevent{at: v.now + wk.stepCost(), kind: evStep, worker: w})
}

func (v *Virtual) stepEnd(w int) {
	wk := v.s.workers[w]
	wk.clock = v.now
	wk.apply(v.at())
	wk.flushEvents(v.at())
	v.scheduleIndex()
	v.collect(w)
	v.startStep(w)
}

// collect hands first tokens and ends of w's requests to their callbacks.
func (v *Virtual) collect(w int) {
	keep := v.active[w][:0]
	var ended []*vreq
	for _, r := range v.active[w] {
		sq := r.seq
		if !r.first && sq.generated > 0 {
			r.first = true
			r.reply.TTFT = v.now - r.sent
			r.reply.CachedTokens = sq.cached
			v.s.router.prefillDone(r.ticket)
			if r.onFirst != nil {
				r.onFirst(r.reply)
			}
		}
		if !sq.done.Load() {
			keep = append(keep, r)
			continue
		}
		r.reply.E2E = v.now - r.sent
		r.reply.Err = sq.err
		r.reply.Tokens = sq.generated
		if sq.err == nil {
			r.reply.Text = sq.out.text
		}
		v.s.router.done(r.ticket)
		ended = append(ended, r)
	}
	clear(v.active[w][len(keep):])
	v.active[w] = keep
	for _, r := range ended {
		if r.onDone != nil {
			r.onDone(r.reply)
		}
	}
}

// scheduleIndex makes sure the indexer's next due batch is delivered.
func (v *Virtual) scheduleIndex() {
	x := v.s.idx
	x.qmu.Lock()
	var next time.Duration
	ok := len(x.queue) > 0
	if ok {
		next = x.queue[0].due.Sub(v.base)
	}
	x.qmu.Unlock()
	if ok && (!v.idxSet || next < v.idxDue) {
		v.idxDue, v.idxSet = next, true
		v.push(vevent{at: next, kind: evIndex})
	}
}

func (v *Virtual) deliverIndex() {
	if next, ok := v.s.idx.deliver(v.at()); ok {
		v.idxDue, v.idxSet = next.Sub(v.base), true
		v.push(vevent{at: v.idxDue, kind: evIndex})
	}
}
