// Package loadmetrics exports fleetbench's load as Prometheus metrics that
// merge: counters of requests, tokens and conversations, gauges of the level
// and the sessions in flight, and TTFT, ITL, TPOT, E2E and schedule lag as
// histograms with both classic and native buckets, so that
// histogram_quantile over a sum across processes is correct. Its neighbour
// pkg/servermetrics goes the other way: loadmetrics publishes what
// fleetbench sent and measured, servermetrics reads the serving stack's own
// /metrics. Nothing registers on a global registry: constructors take a
// prometheus.Registerer, and labels stay bounded (never a URL, prompt or
// error string).
//
// Load is fed record.Windows: the coordinator adds the counters of every
// agent report it merges (the fleet-wide view) and its open windows'
// merged histograms now and then (SetOpen), a single-engine run every
// interval what its recorder drains. The histograms take HDR histograms at the
// cost of their buckets (Histogram), not of their values. Every metric
// is documented in docs/metrics.md. Nothing registers on a global
// registry: constructors take a prometheus.Registerer.
package loadmetrics
