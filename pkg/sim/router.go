package sim

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// router is the simulated frontend. It picks a worker per request in the
// current mode and keeps the per-worker load it needs: requests in flight,
// active blocks and prompt tokens still to prefill (Dynamo's ActiveSequences
// in spirit). Load is tracked in every mode so that a runtime mode switch
// starts from the true load. Safe for concurrent use.
type router struct {
	cfg  Config
	idx  *indexer
	mode atomic.Value // Mode

	mu       sync.Mutex
	gen      uint64 // bumped by reset; tickets of older generations are ignored
	rr       uint64
	rng      *rand.Rand
	inflight []int
	active   []map[uint64]int // per worker: block hash -> requests in flight using it
	partial  []int            // per worker: unshared blocks in flight (prompt tails, generated blocks)
	prefill  []int            // prompt tokens routed but not yet past their first token
	ring     []ringPoint
}

type ringPoint struct {
	hash   uint64
	worker int
}

// ticket records one routing decision so its load can be taken back.
type ticket struct {
	worker      int
	gen         uint64
	hashes      []uint64
	partial     int
	prefill     int
	overlap     int // blocks the router believed cached on worker
	prefillDone bool
}

// routeInput is what a routing decision may look at.
type routeInput struct {
	tokens int      // prompt tokens
	hashes []uint64 // chained block hashes of the prompt's full blocks
	prefix string   // text prefix-hash hashes
}

func newRouter(cfg Config, idx *indexer) *router {
	r := &router{
		cfg:      cfg,
		idx:      idx,
		rng:      rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5deece66d)),
		inflight: make([]int, cfg.Replicas),
		active:   make([]map[uint64]int, cfg.Replicas),
		partial:  make([]int, cfg.Replicas),
		prefill:  make([]int, cfg.Replicas),
	}
	for w := range r.active {
		r.active[w] = make(map[uint64]int)
	}
	r.mode.Store(cfg.Router)
	for w := range cfg.Replicas {
		for v := range cfg.Replication {
			h := fnv.New64a()
			_, _ = h.Write([]byte(workerName(w)))
			_, _ = h.Write([]byte{byte(v), byte(v >> 8), byte(v >> 16), '#'})
			r.ring = append(r.ring, ringPoint{hash: mix64(h.Sum64()), worker: w})
		}
	}
	slices.SortFunc(r.ring, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return a.worker - b.worker
	})
	return r
}

func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func (r *router) getMode() Mode  { return r.mode.Load().(Mode) }
func (r *router) setMode(m Mode) { r.mode.Store(m) }

// reset drops all router state as a frontend restart does: the indexer is
// emptied, the round-robin counter restarts and the load of requests routed
// before is forgotten.
func (r *router) reset() {
	r.idx.reset()
	r.mu.Lock()
	r.gen++
	r.rr = 0
	clear(r.inflight)
	for _, m := range r.active {
		clear(m)
	}
	clear(r.partial)
	clear(r.prefill)
	r.mu.Unlock()
}

// route picks a worker for in and records its load.
func (r *router) route(in *routeInput) *ticket {
	mode := r.getMode()
	bs := r.cfg.Engine.BlockSize
	n := r.cfg.Replicas
	var overlap []int
	if mode == ModeKV {
		overlap = make([]int, n)
		r.idx.overlaps(in.hashes, overlap)
	}
	partial := 0
	if in.tokens%bs != 0 {
		partial = 1
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var w int
	switch mode {
	case ModeKV:
		w = r.pickKV(in, overlap, partial)
	case ModePrefixHash:
		w = r.pickPrefixHash(in.prefix)
	case ModeRandom:
		w = r.rng.IntN(n)
	case ModeLeastLoaded:
		w = r.pickLeast()
	default:
		w = int(r.rr % uint64(n))
		r.rr++
	}
	t := &ticket{worker: w, gen: r.gen, hashes: in.hashes, partial: partial, prefill: in.tokens}
	if overlap != nil {
		t.overlap = overlap[w]
		t.prefill = max(0, in.tokens-overlap[w]*bs)
	}
	r.inflight[w]++
	r.partial[w] += partial
	for _, h := range t.hashes {
		r.active[w][h]++
	}
	r.prefill[w] += t.prefill
	return t
}

// pickKV implements Dynamo's KV router cost: for each worker,
// overlap_weight x blocks it would still have to prefill (its queued prefill
// plus this prompt minus the cached overlap) + active decode blocks (its
// active blocks plus this request's). Active blocks are counted once per
// worker however many requests in flight share them, as Dynamo's
// ActiveSequences does, so requests on one document pile up cheaply. The
// cheapest wins; with a temperature, a softmax over normalized negated
// costs samples the worker.
func (r *router) pickKV(in *routeInput, overlap []int, partial int) int {
	bs := float64(r.cfg.Engine.BlockSize)
	costs := make([]float64, len(overlap))
	lo, hi := math.Inf(1), math.Inf(-1)
	for w := range costs {
		prefillBlocks := float64(r.prefill[w]+in.tokens)/bs - float64(overlap[w])
		fresh := 0
		for _, h := range in.hashes {
			if r.active[w][h] == 0 {
				fresh++
			}
		}
		decodeBlocks := float64(len(r.active[w]) + r.partial[w] + fresh + partial)
		c := r.cfg.OverlapWeight*prefillBlocks + decodeBlocks
		costs[w] = c
		lo, hi = min(lo, c), max(hi, c)
	}
	if t := r.cfg.RouterTemperature; t > 0 && hi > lo {
		weights := make([]float64, len(costs))
		sum := 0.0
		for w, c := range costs {
			weights[w] = math.Exp(-(c - lo) / (hi - lo) / t)
			sum += weights[w]
		}
		x := r.rng.Float64() * sum
		for w, p := range weights {
			if x -= p; x < 0 {
				return w
			}
		}
		return len(costs) - 1
	}
	return r.pickMin(costs)
}

// pickMin returns the index of the smallest value, ties broken at random.
func (r *router) pickMin(vals []float64) int {
	best, ties := -1, 0
	for w, v := range vals {
		switch {
		case best < 0 || v < vals[best]:
			best, ties = w, 1
		case v == vals[best]:
			ties++
			if r.rng.IntN(ties) == 0 {
				best = w
			}
		}
	}
	return best
}

func (r *router) pickLeast() int {
	vals := make([]float64, len(r.inflight))
	for w, v := range r.inflight {
		vals[w] = float64(v)
	}
	return r.pickMin(vals)
}

// pickPrefixHash is kubeai's PrefixHash strategy: consistent hashing of the
// prompt prefix with bounded loads (Mirrokni et al.): walk the ring from the
// key's point and take the first worker whose in-flight count stays within
// LoadFactor x the mean after adding this request.
func (r *router) pickPrefixHash(prefix string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(prefix))
	key := mix64(h.Sum64())
	total := 1
	for _, v := range r.inflight {
		total += v
	}
	limit := int(math.Ceil(r.cfg.LoadFactor * float64(total) / float64(len(r.inflight))))
	start, _ := slices.BinarySearchFunc(r.ring, key, func(p ringPoint, k uint64) int {
		switch {
		case p.hash < k:
			return -1
		case p.hash > k:
			return 1
		}
		return 0
	})
	for i := range r.ring {
		p := r.ring[(start+i)%len(r.ring)]
		if r.inflight[p.worker]+1 <= limit {
			return p.worker
		}
	}
	return r.ring[start%len(r.ring)].worker
}

// prefillDone takes the ticket's prompt off its worker's prefill queue.
func (r *router) prefillDone(t *ticket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.prefillDone || t.gen != r.gen {
		t.prefillDone = true
		return
	}
	t.prefillDone = true
	r.prefill[t.worker] -= t.prefill
}

// grow counts one more block of generated tokens on the ticket's worker:
// Dynamo's router updates a request's active blocks during generation.
func (r *router) grow(t *ticket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.gen != r.gen {
		return
	}
	t.partial++
	r.partial[t.worker]++
}

// done takes back all of the ticket's load.
func (r *router) done(t *ticket) {
	r.prefillDone(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.gen != r.gen {
		return
	}
	r.inflight[t.worker]--
	r.partial[t.worker] -= t.partial
	m := r.active[t.worker]
	for _, h := range t.hashes {
		if m[h]--; m[h] <= 0 {
			delete(m, h)
		}
	}
}

// load returns the requests in flight per worker.
func (r *router) load() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.inflight...)
}
