// Package servermetrics reads the serving stack's own Prometheus metrics
// (vLLM, SGLang, NVIDIA Dynamo's frontend and workers, the built-in
// simulator) and turns them into per-window server-side figures: the
// token-weighted KV prefix-cache hit rate, queue depth and running requests
// (mean and max of gauge samples), peak KV-cache usage, preemptions, token
// and request counts, speculative-decoding acceptance, server-side TTFT and
// ITL from the servers' histograms, and how evenly workers shared the load.
// Its neighbour pkg/loadmetrics goes the other way: servermetrics scrapes
// the server's /metrics, loadmetrics publishes fleetbench's own load as
// metrics. It must not register metrics of its own nor import the simulator:
// it reads any stack through HTTP alone.
//
// A window's code drives a Scraper:
//
//	s, err := servermetrics.New(servermetrics.Config{Endpoints: urls}, logger)
//	go s.Run(ctx)             // gauge sampler, stops with ctx
//	s.Begin(ctx)              // window opens
//	...                       // load runs
//	w, err := s.End(ctx)      // window closes; the next opens here
//	w.Total.HitRate           // nil: not measured; never a 0 for "absent"
//
// Pages are read with prometheus/common's expfmt (text format, and
// OpenMetrics 1.0), bounded in time and size; a down, slow, non-metrics or
// oversized endpoint marks its figures missing with the reason and leaves
// the others alone. Counters are differenced per series with reset
// detection. docs/server-metrics.md lists every metric name read and
// defines every figure.
package servermetrics
