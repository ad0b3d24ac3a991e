package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Reasons a sequence fails inside a worker.
var (
	errWorkerRestart = errors.New("worker restarted while the request was running")
	errNoKVRoom      = errors.New("request needs more KV cache blocks than the worker has")
	errShutdown      = errors.New("simulator shutting down")
)

// seq is one request inside a worker. The handler goroutine builds it and
// hands it to the worker; afterwards the engine goroutine owns the fields
// above the published section, and the two talk only through the atomics,
// the notify channel and fields written before an atomic store that the
// reader loads first.
type seq struct {
	prompt  []uint32
	hashes  []uint64 // chained hashes of full blocks; the engine extends it
	out     *completion
	arrival time.Time
	notify  chan struct{} // capacity 1; poked after each published change
	// grow, when set, is called on the engine goroutine for each block of
	// generated tokens the first time it fills, so the router can count
	// it among the worker's active blocks as Dynamo's does.
	grow func()

	// Engine-owned.
	queuedAt   time.Duration // worker's simulated clock when it joined the queue
	computed   int           // tokens whose KV is computed
	held       int           // blocks held: hashedHeld cached + the rest private
	hashedHeld int
	generated  int
	queried    bool // prefix cache lookup counted
	grown      int  // blocks past the prompt reported through grow

	// Published: cached, firstAt and simTTFT are written before progress
	// reaches 1; err is written before done.
	cached   int
	firstAt  time.Time
	simTTFT  time.Duration // simulated time from queuedAt to the first token
	err      error
	progress atomic.Int32
	done     atomic.Bool
	aborted  atomic.Bool // set by the handler when its client went away

	// epoch is the workers' restart count when the frontend admitted the
	// request: one admitted before a restart that reaches its worker after
	// it fails as the requests in flight did (see Sim.RestartWorkers).
	epoch uint64
}

func (s *seq) known() int { return len(s.prompt) + s.generated }

// tokenAt returns token i of prompt + reply.
func (s *seq) tokenAt(i int) uint32 {
	if i < len(s.prompt) {
		return s.prompt[i]
	}
	return s.out.ids[i-len(s.prompt)]
}

func (s *seq) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

type ctrlMsg struct {
	restart bool
	epoch   uint64 // with restart: the restart count it makes
	ack     chan struct{}
}

// worker is one replica: one engine goroutine (run) owns the queues and the
// block pool and advances every sequence once per step, so the number of
// goroutines does not grow with tokens or sequences.
type worker struct {
	idx     int
	name    string
	cfg     EngineConfig
	scale   float64
	m       *workerMetrics
	publish func(w int, ev []blockEvent, at time.Time)

	submit  chan *seq
	ctrl    chan ctrlMsg
	aborts  atomic.Int32
	waiting []*seq
	running []*seq
	pool    *blockPool
	rng     *rand.Rand // draft acceptance
	plan    []planned
	scratch []uint32
	lastEv  int64
	// clock is the worker's simulated time: the sum of the unscaled
	// durations of the steps it has run. It does not advance while the
	// worker is idle, and host load cannot stretch it.
	clock time.Duration
	// epoch counts the restarts this worker has gone through.
	epoch uint64
}

type planned struct {
	s *seq
	n int
}

func newWorker(idx int, cfg EngineConfig, scale float64, m *workerMetrics, publish func(int, []blockEvent, time.Time)) *worker {
	return &worker{
		idx:     idx,
		name:    workerName(idx),
		cfg:     cfg,
		scale:   scale,
		m:       m,
		publish: publish,
		submit:  make(chan *seq, 4096),
		ctrl:    make(chan ctrlMsg),
		pool:    newBlockPool(cfg.NumBlocks),
		rng:     rand.New(rand.NewPCG(uint64(idx)+1, 0xacce97)),
	}
}

// abort asks the engine to drop s at its next step.
func (w *worker) abort(s *seq) {
	if s.aborted.CompareAndSwap(false, true) {
		w.aborts.Add(1)
	}
}

// run is the engine loop. It returns when ctx is done, failing what it holds.
func (w *worker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var prevEnd time.Time
	for {
		w.drainSubmit()
		if len(w.running) == 0 && len(w.waiting) == 0 {
			w.gauges()
			select {
			case <-ctx.Done():
				w.failAll(errShutdown)
				return
			case s := <-w.submit:
				w.enqueue(s)
			case c := <-w.ctrl:
				w.control(c)
			}
			continue
		}
		select {
		case c := <-w.ctrl:
			w.control(c)
			continue
		default:
		}
		w.schedule()
		w.flushEvents(time.Now())
		if len(w.plan) == 0 {
			continue
		}
		cost := w.stepCost()
		dur := time.Duration(float64(cost) / w.scale)
		now := time.Now()
		// Steps are laid end to end from the intended end of the previous
		// one, so timer overshoot does not accumulate; after a stall
		// (idle, or a long overshoot) the schedule restarts from now. An
		// engine does not catch up on a longer lag by running steps back
		// to back: the clients were held up by the same stall, and steps
		// run ahead of them would form smaller batches than simulated time
		// gives (tried: TestTimeScaleInvariance's p50 at time scale 20
		// fell 27% on a loaded host).
		end := now.Add(dur)
		if lag := now.Sub(prevEnd); lag >= 0 && lag < dur {
			end = prevEnd.Add(dur)
		}
		w.gauges()
		timer.Reset(end.Sub(now))
		select {
		case <-ctx.Done():
			w.failAll(errShutdown)
			return
		case <-timer.C:
		}
		prevEnd = end
		w.clock += cost
		w.apply(end)
		w.flushEvents(end)
	}
}

func (w *worker) drainSubmit() {
	for {
		select {
		case s := <-w.submit:
			w.enqueue(s)
		default:
			return
		}
	}
}

// enqueue appends a newly submitted sequence to the waiting queue. Its
// simulated TTFT counts from here: a step already running when it arrived
// is not charged to it, as that depends on where in the step the host
// delivered it.
func (w *worker) enqueue(s *seq) {
	if s.epoch < w.epoch {
		w.fail(s, errWorkerRestart)
		return
	}
	s.queuedAt = w.clock
	w.waiting = append(w.waiting, s)
}

func (w *worker) control(c ctrlMsg) {
	if c.restart {
		w.drainSubmit()
		w.epoch = c.epoch
		w.failAll(errWorkerRestart)
		w.pool.flush()
		w.gauges()
	}
	close(c.ack)
}

func (w *worker) gauges() {
	w.m.running.Set(float64(len(w.running)))
	w.m.waiting.Set(float64(len(w.waiting)))
	w.m.inflight.Set(float64(len(w.running) + len(w.waiting)))
	w.m.kvUsage.Set(w.pool.usage())
	if d := w.pool.evictions - w.lastEv; d > 0 {
		w.m.evictions.Add(float64(d))
		w.lastEv = w.pool.evictions
	}
}

func (w *worker) flushEvents(at time.Time) {
	if ev := w.pool.drainEvents(); ev != nil {
		w.publish(w.idx, ev, at)
	}
}

// stepCost is the simulated duration of the planned step (see
// EngineConfig.stepCost): prefill tokens, decoding sequences and their
// attention over context, and the draft passes of speculative decoding.
func (w *worker) stepCost() time.Duration {
	var prefill, decode, ctxTokens int
	for _, p := range w.plan {
		if p.s.generated == 0 || p.n > 1 {
			prefill += p.n
		} else {
			decode++
			ctxTokens += p.s.computed
		}
	}
	return w.cfg.stepCost(prefill, decode, ctxTokens)
}

// accepted draws how many of the step's draft tokens the target accepts,
// at most limit: each is accepted with probability Acceptance as long as
// the ones before it were.
func (w *worker) accepted(limit int) int {
	j := 0
	for j < w.cfg.DraftTokens && j < limit && w.rng.Float64() < w.cfg.Acceptance {
		j++
	}
	return j
}

// ensure gives s the blocks for n more computed tokens.
func (w *worker) ensure(s *seq, n int) bool {
	bs := w.cfg.BlockSize
	need := (s.computed + n + bs - 1) / bs
	if extra := need - s.held; extra > 0 {
		if !w.pool.reserve(extra) {
			return false
		}
		s.held += extra
	}
	return true
}

// releaseBlocks returns all of s's blocks, newest first, so its tail is
// evicted before the prefix it shares with others.
func (w *worker) releaseBlocks(s *seq) {
	w.pool.releasePrivate(s.held - s.hashedHeld)
	for i := s.hashedHeld - 1; i >= 0; i-- {
		w.pool.release(s.hashes[i])
	}
	s.held, s.hashedHeld, s.computed = 0, 0, 0
}

// schedule plans one step like vLLM V1: running sequences first (one token
// each when decoding, a chunk of their remaining prompt when prefilling),
// preempting the newest running sequence (recompute) when blocks run out;
// then, if nothing was preempted, waiting sequences in FCFS order while
// the batch, the token budget and memory allow. The head of the queue that
// does not fit blocks those behind it.
func (w *worker) schedule() {
	w.dropAborted()
	w.plan = w.plan[:0]
	budget := w.cfg.MaxNumTokens
	preempted := false
	for i := 0; i < len(w.running) && budget > 0; {
		s := w.running[i]
		n := min(s.known()-s.computed, budget)
		// A decoding sequence feeds the target its last token and the
		// drafts to verify, and may keep them all.
		use := n
		if s.generated > 0 && n == 1 {
			use = 1 + w.cfg.DraftTokens
		}
		if !w.ensure(s, use) {
			last := len(w.running) - 1
			victim := w.running[last]
			w.running = w.running[:last]
			w.releaseBlocks(victim)
			w.waiting = append([]*seq{victim}, w.waiting...)
			w.m.preemptions.Inc()
			preempted = true
			if victim == s {
				break
			}
			continue
		}
		w.plan = append(w.plan, planned{s, n})
		budget -= use
		i++
	}
	if preempted {
		return
	}
	bs := w.cfg.BlockSize
	for len(w.waiting) > 0 && len(w.running) < w.cfg.MaxBatch && budget > 0 {
		s := w.waiting[0]
		// At least one token must be computed to sample the next one, as
		// in vLLM: a fully cached prompt recomputes its last block.
		hits := w.pool.match(s.hashes, (s.known()-1)/bs)
		for _, h := range s.hashes[:hits] {
			w.pool.acquire(h)
		}
		s.held, s.hashedHeld, s.computed = hits, hits, hits*bs
		n := min(s.known()-s.computed, budget)
		if !w.ensure(s, n) {
			w.releaseBlocks(s)
			if len(w.running) == 0 && len(w.plan) == 0 && w.pool.lruLen == 0 {
				w.waiting = w.waiting[1:]
				w.fail(s, errNoKVRoom)
				continue
			}
			break
		}
		if !s.queried {
			s.queried = true
			// Queue time in wall-clock seconds, as the client sees time.
			w.m.queueTime.Observe((w.clock - s.queuedAt).Seconds() / w.scale)
			s.cached = hits * bs
			w.m.prefixQueries.Add(float64(len(s.prompt)))
			w.m.prefixHits.Add(float64(s.cached))
		}
		w.waiting = w.waiting[1:]
		w.running = append(w.running, s)
		w.plan = append(w.plan, planned{s, n})
		budget -= n
	}
}

// dropAborted removes sequences whose clients went away.
func (w *worker) dropAborted() {
	if w.aborts.Swap(0) == 0 {
		return
	}
	keep := w.running[:0]
	for _, s := range w.running {
		if s.aborted.Load() {
			w.releaseBlocks(s)
			w.finish(s, nil, false)
			continue
		}
		keep = append(keep, s)
	}
	clear(w.running[len(keep):])
	w.running = keep
	wkeep := w.waiting[:0]
	for _, s := range w.waiting {
		if s.aborted.Load() {
			w.finish(s, nil, false)
			continue
		}
		wkeep = append(wkeep, s)
	}
	clear(w.waiting[len(wkeep):])
	w.waiting = wkeep
}

// apply makes the planned step happen at time now.
func (w *worker) apply(now time.Time) {
	bs := w.cfg.BlockSize
	finished := 0
	generated := 0
	for _, p := range w.plan {
		s := p.s
		gain := 1
		if s.generated > 0 && p.n == 1 {
			gain += w.accepted(len(s.out.ids) - s.generated - 1)
		}
		// A verify step computes the KV of the last token and of the
		// accepted drafts.
		s.computed += p.n + gain - 1
		for full := s.computed / bs; s.hashedHeld < full; s.hashedHeld++ {
			i := s.hashedHeld
			if i >= len(s.hashes) {
				parent := rootHash
				if i > 0 {
					parent = s.hashes[i-1]
				}
				w.scratch = w.scratch[:0]
				for t := i * bs; t < (i+1)*bs; t++ {
					w.scratch = append(w.scratch, s.tokenAt(t))
				}
				s.hashes = append(s.hashes, hashBlock(parent, w.scratch))
			}
			w.pool.commit(s.hashes[i])
			// A block that starts past the prompt holds only generated
			// tokens (the prompt's partial tail block the router counts
			// already); a recompute after preemption reports nothing new.
			if s.grow != nil && i*bs >= len(s.prompt) && i >= s.grown {
				s.grown = i + 1
				s.grow()
			}
		}
		if s.computed < s.known() {
			continue // a chunk of a longer prefill
		}
		if s.generated == 0 {
			s.firstAt = now
			s.simTTFT = w.clock - s.queuedAt
			w.m.ttft.Observe(now.Sub(s.arrival).Seconds())
			w.m.simTTFT.Observe(s.simTTFT.Seconds())
			w.m.promptTokens.Add(float64(len(s.prompt)))
		}
		s.generated += gain
		generated += gain
		s.progress.Store(int32(s.generated))
		if s.generated >= len(s.out.ids) {
			w.releaseBlocks(s)
			w.finish(s, nil, true)
			finished++
			continue
		}
		s.poke()
	}
	w.m.genTokens.Add(float64(generated))
	if finished > 0 {
		keep := w.running[:0]
		for _, s := range w.running {
			if !s.done.Load() {
				keep = append(keep, s)
			}
		}
		clear(w.running[len(keep):])
		w.running = keep
	}
}

// finish publishes the end of s. ok means it produced all its tokens.
func (w *worker) finish(s *seq, err error, ok bool) {
	switch {
	case ok && s.out.finish == openai.FinishLength:
		w.m.length.Inc()
	case ok:
		w.m.stop.Inc()
	default:
		w.m.abort.Inc()
	}
	s.err = err
	s.done.Store(true)
	s.poke()
}

func (w *worker) fail(s *seq, err error) {
	w.releaseBlocks(s)
	w.finish(s, err, false)
}

func (w *worker) failAll(err error) {
	w.drainSubmit()
	for _, s := range w.running {
		w.fail(s, err)
	}
	for _, s := range w.waiting {
		w.fail(s, err)
	}
	clear(w.running)
	clear(w.waiting)
	w.running, w.waiting = w.running[:0], w.waiting[:0]
}
