package loadmetrics

// The classic bucket layouts, upper bounds in seconds. Native buckets
// (NativeBucketFactor) resolve every quantile to about 9% whatever the
// latencies; the classic ones are what a Prometheus without native
// histograms reads, so they are placed where LLM serving latencies and
// their objectives lie, with bounds on the usual SLO values (so that
// `le="0.4"` counts the requests within a 400 ms objective exactly).
// docs/metrics.md explains each layout.
var (
	// TTFTBuckets: a prefill on a warm prefix cache takes tens of
	// milliseconds, a long uncached prompt or a queue seconds.
	TTFTBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 60}
	// TokenBuckets (ITL and TPOT): one decode step of a batch, typically
	// 5 to 100 ms; chunks that carry several tokens, and stalls behind a
	// prefill, make the tail.
	TokenBuckets = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5}
	// E2EBuckets: a whole answer, from a short reply in well under a
	// second to thousands of tokens in minutes.
	E2EBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}
	// LagBuckets (schedule lag): a load generator that keeps up sends
	// within a millisecond of the schedule; tens of milliseconds and more
	// mean it fell behind.
	LagBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)
