package sim

import (
	"context"
	"math/bits"
	"sync"
	"time"
)

// indexer is the kv router's view of the workers' caches: block hash ->
// set of workers (a bit mask) that reported the block stored and not yet
// removed. It learns only from the events workers publish, applied after a
// delay, as Dynamo's KvIndexer learns from KV events over NATS; it never
// looks at worker memory, so its view lags and can be wrong.
//
// publish, overlaps, reset and dropWorker are safe for concurrent use; run
// applies the events and must run in one goroutine.
type indexer struct {
	delay time.Duration // wall time

	mu     sync.RWMutex
	blocks map[uint64]uint64

	qmu   sync.Mutex
	queue []eventBatch
	epoch []uint64 // per worker; batches of older epochs are dropped
	wake  chan struct{}
}

type eventBatch struct {
	due    time.Time
	worker int
	epoch  uint64
	events []blockEvent
}

func newIndexer(workers int, delay time.Duration) *indexer {
	return &indexer{
		delay:  delay,
		blocks: make(map[uint64]uint64),
		epoch:  make([]uint64, workers),
		wake:   make(chan struct{}, 1),
	}
}

// publish queues a worker's events for delivery at now + delay.
func (x *indexer) publish(worker int, ev []blockEvent, now time.Time) {
	x.qmu.Lock()
	x.queue = append(x.queue, eventBatch{due: now.Add(x.delay), worker: worker, epoch: x.epoch[worker], events: ev})
	x.qmu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// run delivers queued events when they are due until ctx is done.
func (x *indexer) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Hour
		if next, ok := x.deliver(time.Now()); ok {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-x.wake:
		case <-timer.C:
		}
	}
}

// deliver applies the batches due at now and returns when the next one is
// due, if any. run calls it on the wall clock, Virtual on its simulated one.
func (x *indexer) deliver(now time.Time) (next time.Time, ok bool) {
	x.qmu.Lock()
	var due []eventBatch
	i := 0
	for i < len(x.queue) && !x.queue[i].due.After(now) {
		i++
	}
	if i > 0 {
		due = append(due, x.queue[:i]...)
		x.queue = append(x.queue[:0], x.queue[i:]...)
	}
	if len(x.queue) > 0 {
		next, ok = x.queue[0].due, true
	}
	epochs := append([]uint64(nil), x.epoch...)
	x.qmu.Unlock()
	if len(due) > 0 {
		x.apply(due, epochs)
	}
	return next, ok
}

func (x *indexer) apply(batches []eventBatch, epochs []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range batches {
		if b.epoch != epochs[b.worker] {
			continue
		}
		bit := uint64(1) << b.worker
		for _, e := range b.events {
			if e.stored {
				x.blocks[e.hash] |= bit
				continue
			}
			if m := x.blocks[e.hash] &^ bit; m == 0 {
				delete(x.blocks, e.hash)
			} else {
				x.blocks[e.hash] = m
			}
		}
	}
}

// overlaps sets out[w] to the number of leading hashes worker w holds.
func (x *indexer) overlaps(hashes []uint64, out []int) {
	all := uint64(1)<<len(out) - 1
	if len(out) == 64 {
		all = ^uint64(0)
	}
	mask := all
	x.mu.RLock()
	i := 0
	for ; i < len(hashes) && mask != 0; i++ {
		m := x.blocks[hashes[i]] & mask
		for gone := mask &^ m; gone != 0; gone &= gone - 1 {
			out[bits.TrailingZeros64(gone)] = i
		}
		mask = m
	}
	x.mu.RUnlock()
	for ; mask != 0; mask &= mask - 1 {
		out[bits.TrailingZeros64(mask)] = i
	}
}

// size returns the number of indexed blocks.
func (x *indexer) size() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.blocks)
}

// reset empties the index and drops events in flight, as a restarted
// frontend starts with an empty radix tree.
func (x *indexer) reset() {
	x.qmu.Lock()
	x.queue = x.queue[:0]
	for i := range x.epoch {
		x.epoch[i]++
	}
	x.qmu.Unlock()
	x.mu.Lock()
	clear(x.blocks)
	x.mu.Unlock()
}

// dropWorker forgets a worker's blocks and its events in flight, as the
// router does when a worker instance goes away.
func (x *indexer) dropWorker(w int) {
	x.qmu.Lock()
	x.epoch[w]++
	x.qmu.Unlock()
	bit := uint64(1) << w
	x.mu.Lock()
	for h, m := range x.blocks {
		if m&bit == 0 {
			continue
		}
		if m &^= bit; m == 0 {
			delete(x.blocks, h)
		} else {
			x.blocks[h] = m
		}
	}
	x.mu.Unlock()
}
