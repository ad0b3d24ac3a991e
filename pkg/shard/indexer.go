package shard

import "sync"

// Indexer yields the conversation indices one agent owns, in increasing
// order, after any conversations queued for restart. It satisfies
// load.Indexer. It is safe for concurrent use: every session calls Next, and
// the agent's control loop calls SetMembers and Restart.
type Indexer struct {
	mu       sync.Mutex
	self     int
	members  []int
	next     int   // next index to consider
	limit    int   // indices >= limit are not run; 0 means no limit
	restart  []int // queued restarts, FIFO
	restarts map[int]bool
}

// NewIndexer returns the indexer of agent index self among members. limit
// bounds the conversation indices (0..limit-1) for a fixed set of
// conversations; 0 means unbounded.
func NewIndexer(self int, members []int, limit int) *Indexer {
	return &Indexer{self: self, members: sortedCopy(members), limit: limit, restarts: make(map[int]bool)}
}

// Next returns the next conversation to start: a queued restart first, then
// the next owned index. It returns false when a limit is set and every owned
// index below it has been handed out.
func (x *Indexer) Next() (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.restart) > 0 {
		i := x.restart[0]
		x.restart = x.restart[1:]
		return i, true
	}
	for x.limit == 0 || x.next < x.limit {
		i := x.next
		x.next++
		if Owns(i, x.self, x.members) {
			return i, true
		}
	}
	return 0, false
}

// SetMembers changes the member list (a reshard). Indices already handed out
// stay with this agent; from now on Next yields what self owns among
// members.
func (x *Indexer) SetMembers(members []int) {
	x.mu.Lock()
	x.members = sortedCopy(members)
	x.mu.Unlock()
}

// Restart queues conversations taken over from a lost agent; Next hands
// them out before any new index, and Restarted reports them.
func (x *Indexer) Restart(convs []int) {
	x.mu.Lock()
	for _, c := range convs {
		if !x.restarts[c] {
			x.restarts[c] = true
			x.restart = append(x.restart, c)
		}
	}
	x.mu.Unlock()
}

// Restarted reports whether conversation conv was queued by Restart.
func (x *Indexer) Restarted(conv int) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.restarts[conv]
}

// Cursor returns the next index Next will consider: every owned index below
// it has been handed out. Read it with Pending (under the caller's own
// lock around Next, if it needs the two to agree) to know every
// conversation this agent may start later.
func (x *Indexer) Cursor() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.next
}

// Pending returns the queued restarts not yet handed out.
func (x *Indexer) Pending() []int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]int(nil), x.restart...)
}

// TakeOver queues for restart every index from lost's cursor from up to
// this indexer's own cursor that member lost owned and self owns now: the
// conversations a lost member may have started after it last reported,
// which self has passed and so would never run. Call it after SetMembers
// has removed lost. It returns how many indices it queued.
func (x *Indexer) TakeOver(lost, from int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	before := append(sortedCopy(x.members), lost)
	n := 0
	for i := max(from, 0); i < x.next; i++ {
		if owner(i, before) != lost || !Owns(i, x.self, x.members) || x.restarts[i] {
			continue
		}
		x.restarts[i] = true
		x.restart = append(x.restart, i)
		n++
	}
	return n
}
