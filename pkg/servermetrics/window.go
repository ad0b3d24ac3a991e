package servermetrics

import (
	"time"
)

// Snapshot is one reading of every endpoint, in the configured order.
type Snapshot struct {
	// At is when the reading started.
	At        time.Time
	Endpoints []EndpointPage
}

// EndpointPage is one endpoint's page in a Snapshot: Page when the read
// succeeded, Err (one line, e.g. "fetch metrics: status 404 Not Found")
// when it did not.
type EndpointPage struct {
	Endpoint string
	Page     *Page
	Err      error
}

// Latency is a server-side latency over a window from the server's own
// histogram: the observations in the window, their mean (exact: from _sum
// and _count) and p50/p95 interpolated linearly inside the histogram's
// buckets, as Prometheus's histogram_quantile does (so only as fine as the
// server's buckets). Nil fields were not measured.
type Latency struct {
	Count float64  `json:"count"`
	Mean  *float64 `json:"mean_seconds,omitempty"`
	P50   *float64 `json:"p50_seconds,omitempty"`
	P95   *float64 `json:"p95_seconds,omitempty"`
}

// Figures are the server-side figures of a window, for one endpoint or for
// all of them. A nil field was not measured (no such metric, no traffic, an
// endpoint down); it never means 0. docs/server-metrics.md defines each.
type Figures struct {
	HitRate          *float64 `json:"server_hit_rate,omitempty"`
	QueueMean        *float64 `json:"queue_mean,omitempty"`
	QueueMax         *float64 `json:"queue_max,omitempty"`
	RunningMean      *float64 `json:"running_mean,omitempty"`
	RunningMax       *float64 `json:"running_max,omitempty"`
	KVUsageMax       *float64 `json:"kv_usage_max,omitempty"`
	Preemptions      *float64 `json:"preemptions,omitempty"`
	PromptTokens     *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens,omitempty"`
	Requests         *float64 `json:"requests,omitempty"`
	SpecAcceptRate   *float64 `json:"spec_accept_rate,omitempty"`
	TTFT             Latency  `json:"server_ttft"`
	ITL              Latency  `json:"server_itl"`
	// QueueTime is how long requests waited before they were first
	// scheduled, from the servers' own histograms.
	QueueTime Latency `json:"server_queue_time"`
	// Sources names the metric each figure was read from, by the figure's
	// JSON name ("server_hit_rate": "vllm:prefix_cache_hits_total /
	// vllm:prefix_cache_queries_total").
	Sources map[string]string `json:"sources,omitempty"`
}

// EndpointWindow is one endpoint's figures over a window.
type EndpointWindow struct {
	Endpoint string `json:"endpoint"`
	Figures
	// Reset is true when a counter of the endpoint went down in the
	// window: the server restarted, and its deltas count from the reset.
	Reset bool `json:"reset,omitempty"`
	// Missing says why the endpoint's counter and histogram figures are
	// absent: its page could not be read at the window's start or end.
	// Gauge figures still come from the samples that did succeed.
	Missing string `json:"missing,omitempty"`
}

// Window is the server side of one measurement window.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Total aggregates the endpoints: counters and histograms add up, queue
	// and running gauges add up at each sampling instant, KV usage is the
	// highest of any engine, rates are ratios of the added counters. Only
	// one level of the stack counts (engines before a frontend in front of
	// them, which sees the same requests again). Endpoints with Missing set
	// are left out, so sums are then lower bounds.
	Total     Figures          `json:"total"`
	Endpoints []EndpointWindow `json:"endpoints"`
	// Workers are the requests and prompt tokens of each engine from the
	// per-series counter deltas (endpoints, and engines within one, e.g.
	// the simulator's workers or vLLM's data-parallel engines).
	Workers WorkerCounts `json:"workers,omitempty"`
	Balance Balance      `json:"balance"`
	// Reset is true when any endpoint reset in the window.
	Reset bool `json:"reset,omitempty"`
	// Absent names, by the figure's key in Sources, the metrics looked
	// for that no endpoint read at both edges exported: why that figure
	// is nil. It is empty when no endpoint could be read (Missing says
	// why then).
	Absent map[string]string `json:"absent,omitempty"`
}

// WorkerSkew is the window's worker_skew: max ÷ mean of requests per
// worker, or of prompt tokens when no requests were counted; nil when not
// measured.
func (w Window) WorkerSkew() *float64 {
	if w.Balance.RequestSkew != nil {
		return w.Balance.RequestSkew
	}
	return w.Balance.TokenSkew
}

// Missing lists the endpoints whose counter figures are absent, with why.
func (w Window) Missing() map[string]string {
	m := map[string]string{}
	for _, e := range w.Endpoints {
		if e.Missing != "" {
			m[e.Endpoint] = e.Missing
		}
	}
	return m
}

// Diff computes the window between two snapshots of the same endpoints,
// its gauge figures from these two readings only (the Scraper adds its
// sampler's readings in between). It is a pure function.
func Diff(start, end Snapshot) Window {
	g := newGauges(start.At)
	g.observe(start)
	g.observe(end)
	return diff(start, end, g)
}

// endpointCalc holds one endpoint's counter and histogram figures.
type endpointCalc struct {
	ok                                 bool
	hit, spec                          ratioCalc
	preemptions, prompt, gen, requests counterCalc
	ttft, itl, queue                   histCalc
}

func calcEndpoint(start, end *Page) endpointCalc {
	return endpointCalc{
		ok:          true,
		hit:         pickRatio(start, end, hitRatioSources),
		spec:        pickRatio(start, end, specRatioSources),
		preemptions: pickCounter(start, end, preemptionSources),
		prompt:      pickCounter(start, end, promptTokenSources),
		gen:         pickCounter(start, end, generationTokenSources),
		requests:    pickCounter(start, end, requestSources),
		ttft:        pickHist(start, end, ttftSources),
		itl:         pickHist(start, end, itlSources),
		queue:       pickHist(start, end, queueTimeSources),
	}
}

func (c endpointCalc) reset() bool {
	return c.hit.reset || c.spec.reset || c.preemptions.reset || c.prompt.reset ||
		c.gen.reset || c.requests.reset || c.ttft.reset || c.itl.reset || c.queue.reset
}

func diff(start, end Snapshot, g *gauges) Window {
	w := Window{Start: start.At, End: end.At, Workers: WorkerCounts{}}
	before := map[string]EndpointPage{}
	for _, ep := range start.Endpoints {
		before[ep.Endpoint] = ep
	}
	calcs := make([]endpointCalc, len(end.Endpoints))
	for i, ep := range end.Endpoints {
		ew := EndpointWindow{Endpoint: ep.Endpoint}
		sp, seen := before[ep.Endpoint]
		switch {
		case !seen:
			ew.Missing = "not read at the window's start"
		case sp.Err != nil:
			ew.Missing = "window start: " + sp.Err.Error()
		case ep.Err != nil:
			ew.Missing = "window end: " + ep.Err.Error()
		default:
			calcs[i] = calcEndpoint(sp.Page, ep.Page)
			ew.Reset = calcs[i].reset()
		}
		ew.Figures = figures([]endpointCalc{calcs[i]}, g.per[ep.Endpoint])
		w.Reset = w.Reset || ew.Reset
		w.Endpoints = append(w.Endpoints, ew)
	}
	w.Total = figures(calcs, &g.total)
	w.Absent = absent(calcs, &g.total)
	w.workers(end.Endpoints, calcs)
	w.Balance = w.Workers.Balance()
	return w
}

// workers fills w.Workers from the per-series request and prompt-token
// deltas of one level of the stack: the level the requests are counted at
// (else the prompt tokens'), so that a frontend's tokens are not mistaken
// for one more worker beside the engines' requests.
func (w *Window) workers(eps []EndpointPage, calcs []endpointCalc) {
	l, ok := bestLevel(calcs, func(c endpointCalc) (level, bool) { return c.requests.src.level, c.requests.ok })
	if !ok {
		if l, ok = bestLevel(calcs, func(c endpointCalc) (level, bool) { return c.prompt.src.level, c.prompt.ok }); !ok {
			return
		}
	}
	for i, c := range calcs {
		if c.requests.ok && c.requests.src.level == l {
			for _, d := range c.requests.by {
				w.Workers.Add(workerName(eps[i].Endpoint, d.labels), d.d, 0)
			}
		}
		if c.prompt.ok && c.prompt.src.level == l {
			for _, d := range c.prompt.by {
				w.Workers.Add(workerName(eps[i].Endpoint, d.labels), 0, d.d)
			}
		}
	}
}

// bestLevel returns the lowest level (engines first) any calc has a
// figure at.
func bestLevel(calcs []endpointCalc, at func(endpointCalc) (level, bool)) (level, bool) {
	best, found := levelFrontend, false
	for _, c := range calcs {
		if !c.ok {
			continue
		}
		if l, ok := at(c); ok {
			best, found = min(best, l), true
		}
	}
	return best, found
}

// figures aggregates the calcs of one or more endpoints (one level of the
// stack only) and takes the gauge figures from st.
func figures(calcs []endpointCalc, st *[numGaugeFigures]stat) Figures {
	f := Figures{Sources: map[string]string{}}

	ratio := func(key string, pick func(endpointCalc) ratioCalc) *float64 {
		l, ok := bestLevel(calcs, func(c endpointCalc) (level, bool) { r := pick(c); return r.src.num.level, r.ok })
		if !ok {
			return nil
		}
		var num, den float64
		for _, c := range calcs {
			if r := pick(c); c.ok && r.ok && r.src.num.level == l {
				num, den = num+r.num, den+r.den
				f.Sources[key] = r.name
			}
		}
		if den <= 0 {
			return nil // nothing queried in the window: not measured
		}
		return ptr(num / den)
	}
	counter := func(key string, pick func(endpointCalc) counterCalc) *float64 {
		l, ok := bestLevel(calcs, func(c endpointCalc) (level, bool) { k := pick(c); return k.src.level, k.ok })
		if !ok {
			return nil
		}
		var v float64
		for _, c := range calcs {
			if k := pick(c); c.ok && k.ok && k.src.level == l {
				v += k.v
				f.Sources[key] = k.name
			}
		}
		return ptr(v)
	}
	latency := func(key string, pick func(endpointCalc) histCalc) Latency {
		l, ok := bestLevel(calcs, func(c endpointCalc) (level, bool) { h := pick(c); return h.src.level, h.ok })
		if !ok {
			return Latency{}
		}
		var sum hist
		bucketsOK := true
		for _, c := range calcs {
			if h := pick(c); c.ok && h.ok && h.src.level == l {
				var added bool
				sum, added = sum.add(h.h)
				bucketsOK = bucketsOK && added && h.bucketsOK
				f.Sources[key] = h.src.name
			}
		}
		return latencyOf(sum, bucketsOK)
	}

	f.HitRate = ratio("server_hit_rate", func(c endpointCalc) ratioCalc { return c.hit })
	f.SpecAcceptRate = ratio("spec_accept_rate", func(c endpointCalc) ratioCalc { return c.spec })
	f.Preemptions = counter("preemptions", func(c endpointCalc) counterCalc { return c.preemptions })
	f.PromptTokens = counter("prompt_tokens", func(c endpointCalc) counterCalc { return c.prompt })
	f.GenerationTokens = counter("generation_tokens", func(c endpointCalc) counterCalc { return c.gen })
	f.Requests = counter("requests", func(c endpointCalc) counterCalc { return c.requests })
	f.TTFT = latency("server_ttft", func(c endpointCalc) histCalc { return c.ttft })
	f.ITL = latency("server_itl", func(c endpointCalc) histCalc { return c.itl })
	f.QueueTime = latency("server_queue_time", func(c endpointCalc) histCalc { return c.queue })

	if st != nil {
		f.QueueMean, f.QueueMax = st[gaugeQueue].meanPtr(), st[gaugeQueue].maxPtr()
		f.RunningMean, f.RunningMax = st[gaugeRunning].meanPtr(), st[gaugeRunning].maxPtr()
		f.KVUsageMax = st[gaugeKVUsage].maxPtr()
		for key, g := range map[string]gaugeFigure{"queue": gaugeQueue, "running": gaugeRunning, "kv_usage": gaugeKVUsage} {
			if st[g].n > 0 {
				f.Sources[key] = st[g].name
			}
		}
		// The hit-rate gauges of older servers stand in only where no
		// endpoint has the counters.
		if _, counted := f.Sources["server_hit_rate"]; !counted && st[gaugeHitRate].n > 0 {
			f.HitRate = st[gaugeHitRate].meanPtr()
			f.Sources["server_hit_rate"] = st[gaugeHitRate].name + " (gauge mean)"
		}
	}
	if len(f.Sources) == 0 {
		f.Sources = nil
	}
	return f
}

// latencyOf turns a window's histogram into a Latency.
func latencyOf(h hist, bucketsOK bool) Latency {
	l := Latency{Count: h.count}
	if h.count <= 0 {
		return l
	}
	l.Mean = ptr(h.sum / h.count)
	if !bucketsOK {
		return l
	}
	if v, ok := h.quantile(0.50); ok {
		l.P50 = ptr(v)
	}
	if v, ok := h.quantile(0.95); ok {
		l.P95 = ptr(v)
	}
	return l
}
