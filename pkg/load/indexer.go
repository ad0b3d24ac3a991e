package load

import (
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
)

// Indexer says which conversation index a new session takes. Agents supply
// one that yields only the indices of their shard. Implementations must be
// safe for concurrent use: every session calls Next.
type Indexer interface {
	// Next returns the next conversation index, or false when there are no
	// more; sessions that get false end.
	Next() (int, bool)
}

// Restarter is implemented by Indexers that hand out conversations taken
// over from a lost agent (shard.Indexer does). The engine asks once per
// conversation and marks every sample of a restarted one
// (record.Sample.Restarted). Implementations must be safe for concurrent use.
type Restarter interface {
	Restarted(conversation int) bool
}

// IndexerFunc adapts a function to Indexer.
type IndexerFunc func() (int, bool)

// Next calls f.
func (f IndexerFunc) Next() (int, bool) { return f() }

// Counter is the default Indexer: 0, 1, 2, ... shared by all sessions, never
// exhausted. Its zero value starts at 0; it is safe for concurrent use.
type Counter struct{ n atomic.Int64 }

// Next returns the next index.
func (c *Counter) Next() (int, bool) { return int(c.n.Add(1) - 1), true }

var (
	_ Indexer = (*Counter)(nil)
	_ Indexer = IndexerFunc(nil)
)

// SessionID is the value of the session header for a conversation: 16 hex
// digits mixed from the seed and the index, so runs with the same seed send
// the same ids and different conversations do not collide in practice.
func SessionID(seed int64, conversation int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], splitmix(uint64(seed)^splitmix(uint64(conversation))))
	return hex.EncodeToString(b[:])
}

// splitmix is SplitMix64's finaliser, a cheap bijective mix.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
