package record

import (
	"maps"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// ClassUnknown is the FailedByClass key of a failed Result whose Class is
// empty (a client bug): such failures are counted, never dropped.
const ClassUnknown client.Class = "unknown"

// Counters are the non-histogram totals of a Window. They are plain values:
// not safe for concurrent mutation (a Recorder hands them to Update under its
// lock).
type Counters struct {
	// Requests counts successful requests; Failed failed ones, also split
	// by class in FailedByClass (nil until the first failure).
	Requests      int64
	Failed        int64
	FailedByClass map[client.Class]int64
	// InputTokens, OutputTokens and CachedTokens sum the usage of
	// successful requests (failed requests add no tokens);
	// RequestsWithCache counts successful requests with any cached token.
	InputTokens       int64
	OutputTokens      int64
	CachedTokens      int64
	RequestsWithCache int64
	// UsageMissing counts successful requests whose server sent no usage
	// (their OutputTokens count content chunks).
	UsageMissing int64
	// ConversationsStarted and ConversationsCompleted are set by the load
	// engine through Recorder.Update.
	ConversationsStarted   int64
	ConversationsCompleted int64
	// Restarted counts samples (ok or failed) marked Sample.Restarted.
	Restarted int64
	// Fallbacks, LateSends and Dropped are set by the load engine through
	// Recorder.Update: late sends are sends behind schedule, Dropped are
	// scheduled sends never made because no worker was free.
	Fallbacks int64
	LateSends int64
	Dropped   int64
	// Good counts successful requests that met every goodput objective
	// (vLLM's --goodput), when the Recorder was given them (SetGood).
	Good int64
	// FinishReasons counts successful requests by the finish_reason of
	// their last content chunk (FinishReasonOf: a bounded set of keys);
	// nil until the first.
	FinishReasons map[string]int64
	// WorkerHeaders counts successful requests by the response header
	// that named their worker (client.Result.WorkerHeader; at most
	// len(client.WorkerHeaders) keys); nil until the first.
	WorkerHeaders map[string]int64
}

// Finish reason keys other than the server's own "stop", "length",
// "content_filter" and "tool_calls".
const (
	// FinishNone counts answers whose stream carried no finish_reason.
	FinishNone = "none"
	// FinishOther counts any other value, so that a server cannot grow
	// the map without bound.
	FinishOther = "other"
)

// FinishReasonOf is the FinishReasons key of a finish_reason value.
func FinishReasonOf(reason string) string {
	switch reason {
	case "stop", "length", "content_filter", "tool_calls":
		return reason
	case "":
		return FinishNone
	}
	return FinishOther
}

// addTo adds o's counts to *m, making it on the first.
func addTo(m *map[string]int64, o map[string]int64) {
	for k, v := range o {
		if *m == nil {
			*m = make(map[string]int64, len(o))
		}
		(*m)[k] += v
	}
}

// sameCounts reports whether a and b hold the same non-zero counts.
func sameCounts[K comparable](a, b map[K]int64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// Add adds every counter of o to c.
func (c *Counters) Add(o *Counters) {
	c.Requests += o.Requests
	c.Failed += o.Failed
	for k, v := range o.FailedByClass {
		if c.FailedByClass == nil {
			c.FailedByClass = make(map[client.Class]int64, len(o.FailedByClass))
		}
		c.FailedByClass[k] += v
	}
	c.InputTokens += o.InputTokens
	c.OutputTokens += o.OutputTokens
	c.CachedTokens += o.CachedTokens
	c.RequestsWithCache += o.RequestsWithCache
	c.UsageMissing += o.UsageMissing
	c.ConversationsStarted += o.ConversationsStarted
	c.ConversationsCompleted += o.ConversationsCompleted
	c.Restarted += o.Restarted
	c.Fallbacks += o.Fallbacks
	c.LateSends += o.LateSends
	c.Dropped += o.Dropped
	c.Good += o.Good
	addTo(&c.FinishReasons, o.FinishReasons)
	addTo(&c.WorkerHeaders, o.WorkerHeaders)
}

// Clone returns a copy of c that shares no map with it.
func (c Counters) Clone() Counters {
	c.FailedByClass = maps.Clone(c.FailedByClass)
	c.FinishReasons = maps.Clone(c.FinishReasons)
	c.WorkerHeaders = maps.Clone(c.WorkerHeaders)
	return c
}

// Equal reports whether c and o hold the same counts (a nil map equals an
// empty one; zero entries are ignored).
func (c *Counters) Equal(o *Counters) bool {
	return c.scalars() == o.scalars() && sameCounts(c.FailedByClass, o.FailedByClass) &&
		sameCounts(c.FinishReasons, o.FinishReasons) && sameCounts(c.WorkerHeaders, o.WorkerHeaders)
}

// scalars returns every counter but the maps.
func (c *Counters) scalars() [14]int64 {
	return [...]int64{c.Requests, c.Failed, c.InputTokens, c.OutputTokens, c.CachedTokens,
		c.RequestsWithCache, c.UsageMissing, c.ConversationsStarted, c.ConversationsCompleted,
		c.Restarted, c.Fallbacks, c.LateSends, c.Dropped, c.Good}
}
