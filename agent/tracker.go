package agent

import (
	"slices"
	"sync"

	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/shard"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// tracker keeps the conversations this agent is running, so the
// coordinator can restart them elsewhere if the agent is lost. It is fed
// by the sessions (concurrently) and read by the agent's loop.
type tracker struct {
	mu     sync.Mutex
	turns  map[int]int // conversation -> its number of turns
	order  []int       // start order, for the cap
	capped int
}

func newTracker(limit int) *tracker {
	return &tracker{turns: make(map[int]int), capped: limit}
}

// start notes conversation conv of n turns as running. The set is capped:
// a session abandoned after a failure never completes, so the oldest
// entries fall out rather than growing forever.
func (t *tracker) start(conv, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.turns[conv] = n
	t.order = append(t.order, conv)
	for len(t.turns) > t.capped && len(t.order) > 0 {
		delete(t.turns, t.order[0])
		t.order = t.order[1:]
	}
	if len(t.order) > 4*t.capped+64 { // compact entries already gone
		t.order = slices.DeleteFunc(t.order, func(c int) bool { _, ok := t.turns[c]; return !ok })
	}
}

// observe removes a conversation whose last turn finished.
func (t *tracker) observe(conv, turn int) {
	t.mu.Lock()
	if n, ok := t.turns[conv]; ok && turn >= n {
		delete(t.turns, conv)
	}
	t.mu.Unlock()
}

// active returns the running conversations, sorted.
func (t *tracker) active() []int {
	t.mu.Lock()
	out := make([]int, 0, len(t.turns))
	for c := range t.turns {
		out = append(out, c)
	}
	t.mu.Unlock()
	slices.Sort(out)
	return out
}

// trackingIndexer hands out the shard's indices and tracks them. mu makes
// handing out an index and tracking it one step, so snapshot never sees a
// conversation that is neither tracked, queued, nor at or past the cursor.
type trackingIndexer struct {
	mu  sync.Mutex
	ix  *shard.Indexer
	src workload.Source
	tr  *tracker
}

func (x *trackingIndexer) Next() (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, ok := x.ix.Next()
	if ok {
		x.tr.start(i, x.src.Conversation(i).Turns())
	}
	return i, ok
}

// snapshot returns the shard cursor and every conversation started or
// queued below it and not finished: a conversation this agent starts later
// is in the list or at or past the cursor.
func (x *trackingIndexer) snapshot() (cursor int, active []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	active = append(x.tr.active(), x.ix.Pending()...)
	slices.Sort(active)
	return x.ix.Cursor(), slices.Compact(active)
}

// Restarted implements load.Restarter: the engine marks the samples of
// conversations taken over from a lost agent.
func (x *trackingIndexer) Restarted(conv int) bool { return x.ix.Restarted(conv) }

var (
	_ load.Indexer   = (*trackingIndexer)(nil)
	_ load.Restarter = (*trackingIndexer)(nil)
)

// observer follows conversations to their end; next is the caller's
// observer.
func observer(tr *tracker, next func(*record.Sample)) func(*record.Sample) {
	return func(s *record.Sample) {
		tr.observe(s.Conversation, s.Turn)
		if next != nil {
			next(s)
		}
	}
}
