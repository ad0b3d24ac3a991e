package servermetrics

import (
	"math"
	"net/http"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// DefaultWorkerHeaders are the response headers that name the worker that
// served a request, tried in order: the built-in simulator's
// (pkg/sim.WorkerHeader) and llm-d's, which its inference simulator and
// gateway examples set to the serving pod's name. Dynamo's frontend sends
// none: its x-worker-instance-id is a request header that pins a worker,
// not a response header (see docs/server-metrics.md).
var DefaultWorkerHeaders = client.DefaultWorkerHeaders

// WorkerFromHeader returns the worker named by the first of names present
// in h (matched case-insensitively, as HTTP header names are), or "" when
// none is. A nil or empty names means DefaultWorkerHeaders. It is a pure
// function, safe for concurrent use.
func WorkerFromHeader(h http.Header, names []string) string {
	if len(names) == 0 {
		names = DefaultWorkerHeaders
	}
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// WorkerCount is what one worker served in a window.
type WorkerCount struct {
	Requests     float64 `json:"requests"`
	PromptTokens float64 `json:"prompt_tokens"`
}

// WorkerCounts holds requests and prompt tokens per worker name for one
// window. It is a plain map: not safe for concurrent use; windows are
// built by one goroutine and merged (Merge) at the edges.
type WorkerCounts map[string]WorkerCount

// Add counts requests and prompt tokens for worker. A worker added with
// zeros still counts in Balance: an idle worker is an imbalance.
func (w WorkerCounts) Add(worker string, requests, promptTokens float64) {
	c := w[worker]
	c.Requests += requests
	c.PromptTokens += promptTokens
	w[worker] = c
}

// Merge adds every worker of o into w.
func (w WorkerCounts) Merge(o WorkerCounts) {
	for name, c := range o {
		w.Add(name, c.Requests, c.PromptTokens)
	}
}

// Balance is how evenly work spread over workers in a window. Skew is
// max ÷ mean (1 is perfectly even; K workers with all the work on one give
// K); CV is the coefficient of variation, population standard deviation ÷
// mean. A nil field was not measured: no workers, or nothing served.
type Balance struct {
	Workers     int      `json:"workers"`
	RequestSkew *float64 `json:"request_skew,omitempty"`
	RequestCV   *float64 `json:"request_cv,omitempty"`
	TokenSkew   *float64 `json:"prompt_token_skew,omitempty"`
	TokenCV     *float64 `json:"prompt_token_cv,omitempty"`
}

// Balance computes the skew and coefficient of variation of requests and
// of prompt tokens over the workers of w.
func (w WorkerCounts) Balance() Balance {
	req := make([]float64, 0, len(w))
	tok := make([]float64, 0, len(w))
	for _, c := range w {
		req = append(req, c.Requests)
		tok = append(tok, c.PromptTokens)
	}
	b := Balance{Workers: len(w)}
	b.RequestSkew, b.RequestCV = skewCV(req)
	b.TokenSkew, b.TokenCV = skewCV(tok)
	return b
}

// skewCV returns max÷mean and stddev÷mean of vals, nil when the mean is 0.
func skewCV(vals []float64) (skew, cv *float64) {
	if len(vals) == 0 {
		return nil, nil
	}
	var sum, maxV float64
	for _, v := range vals {
		sum += v
		maxV = math.Max(maxV, v)
	}
	mean := sum / float64(len(vals))
	if mean <= 0 {
		return nil, nil
	}
	var ss float64
	for _, v := range vals {
		ss += (v - mean) * (v - mean)
	}
	return ptr(maxV / mean), ptr(math.Sqrt(ss/float64(len(vals))) / mean)
}

// ptr returns a pointer to v: a measured figure.
func ptr(v float64) *float64 { return &v }

// ClientBalance is the balance of the workers that the responses named
// (record.Window.Workers): requests and prompt tokens per worker, exact
// per request, where the server-side counters give it only per endpoint.
// It returns a zero Balance when no response named a worker.
func ClientBalance(ws map[string]*record.WorkerStat) Balance {
	if len(ws) == 0 {
		return Balance{}
	}
	wc := WorkerCounts{}
	for name, s := range ws {
		wc.Add(name, float64(s.Requests), float64(s.PromptTokens))
	}
	return wc.Balance()
}
