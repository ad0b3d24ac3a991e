package sim

// blockPool is one replica's paged KV cache with prefix caching, modelled on
// vLLM V1's block pool. Blocks are either private (allocated to a running
// sequence but not yet full, so not shareable), cached and referenced by
// running sequences, or cached and free: blocks of finished requests stay
// cached with no references, in an LRU list, until memory is needed. Free
// blocks are evicted from the LRU head; sequences release their blocks tail
// first, so a conversation's newest blocks go before its shared prefix.
//
// A blockPool is owned by one engine goroutine and is not safe for
// concurrent use.
type blockPool struct {
	total   int
	private int // allocated, not hashed
	inUse   int // hashed, refs > 0
	blocks  map[uint64]*cblock
	lru     cblock // sentinel of the free-cached list; lru.next is oldest
	lruLen  int

	// events collects stored (true) and removed (false) block hashes for
	// the kv router, in order; the engine drains it after each step.
	events    []blockEvent
	evictions int64
}

type blockEvent struct {
	hash   uint64
	stored bool
}

type cblock struct {
	hash       uint64
	refs       int
	prev, next *cblock
}

func newBlockPool(total int) *blockPool {
	p := &blockPool{total: total, blocks: make(map[uint64]*cblock, total)}
	p.lru.next, p.lru.prev = &p.lru, &p.lru
	return p
}

// free is the number of blocks that hold nothing.
func (p *blockPool) free() int { return p.total - p.private - p.inUse - p.lruLen }

// usage is the fraction of blocks held by running sequences, as vLLM's
// kv_cache_usage_perc reports it (cached free blocks count as free).
func (p *blockPool) usage() float64 {
	return float64(p.private+p.inUse) / float64(p.total)
}

// match returns how many leading hashes are cached, looking at most limit.
func (p *blockPool) match(hashes []uint64, limit int) int {
	n := 0
	for n < len(hashes) && n < limit {
		if _, ok := p.blocks[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// acquire adds a reference to a cached block.
func (p *blockPool) acquire(h uint64) {
	b := p.blocks[h]
	if b.refs == 0 {
		p.unlink(b)
		p.inUse++
	}
	b.refs++
}

// release drops a reference; an unreferenced block joins the LRU tail.
func (p *blockPool) release(h uint64) {
	b := p.blocks[h]
	b.refs--
	if b.refs == 0 {
		p.inUse--
		b.prev, b.next = p.lru.prev, &p.lru
		p.lru.prev.next = b
		p.lru.prev = b
		p.lruLen++
	}
}

func (p *blockPool) unlink(b *cblock) {
	b.prev.next = b.next
	b.next.prev = b.prev
	b.prev, b.next = nil, nil
	p.lruLen--
}

// reserve allocates n private blocks, evicting cached free blocks LRU
// first as needed. It returns false, allocating nothing, when even an empty
// LRU list would not make room.
func (p *blockPool) reserve(n int) bool {
	if n <= 0 {
		return true
	}
	if p.free()+p.lruLen < n {
		return false
	}
	for p.free() < n {
		b := p.lru.next
		p.unlink(b)
		delete(p.blocks, b.hash)
		p.events = append(p.events, blockEvent{hash: b.hash})
		p.evictions++
	}
	p.private += n
	return true
}

// releasePrivate returns n private blocks.
func (p *blockPool) releasePrivate(n int) { p.private -= n }

// commit turns one private block, now full, into the cached block h with
// one reference. When h is cached already (another sequence computed the
// same prefix meanwhile) the private block is dropped and h is shared.
func (p *blockPool) commit(h uint64) {
	p.private--
	if _, ok := p.blocks[h]; ok {
		p.acquire(h)
		return
	}
	p.blocks[h] = &cblock{hash: h, refs: 1}
	p.inUse++
	p.events = append(p.events, blockEvent{hash: h, stored: true})
}

// flush forgets everything, as a restarted worker does. It emits no
// events: a dead worker does not report; the router drops it instead.
func (p *blockPool) flush() {
	clear(p.blocks)
	p.lru.next, p.lru.prev = &p.lru, &p.lru
	p.private, p.inUse, p.lruLen = 0, 0, 0
	p.events = p.events[:0]
}

// drainEvents returns the pending events and resets the list.
func (p *blockPool) drainEvents() []blockEvent {
	if len(p.events) == 0 {
		return nil
	}
	ev := p.events
	p.events = make([]blockEvent, 0, len(ev))
	return ev
}
