package servermetrics

import (
	"net/http"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

func TestWorkerFromHeader(t *testing.T) {
	tests := []struct {
		name  string
		h     http.Header
		names []string
		want  string
	}{
		{"simulator", http.Header{"X-Fleetbench-Worker": {"worker-2"}}, nil, "worker-2"},
		{"llm-d lower case on the wire", func() http.Header { h := http.Header{}; h.Set("x-inference-pod", "vllm-7f9c-abc"); return h }(), nil, "vllm-7f9c-abc"},
		{"first listed wins", http.Header{"X-Fleetbench-Worker": {"w1"}, "X-Inference-Pod": {"pod-1"}}, nil, "w1"},
		{"configured list", http.Header{"X-Served-By": {"gpu-3"}, "X-Inference-Pod": {"pod-1"}}, []string{"x-served-by"}, "gpu-3"},
		{"configured list replaces defaults", http.Header{"X-Inference-Pod": {"pod-1"}}, []string{"X-Served-By"}, ""},
		{"none", http.Header{"Content-Type": {"text/event-stream"}}, nil, ""},
		{"nil header", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WorkerFromHeader(tt.h, tt.names); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if DefaultWorkerHeaders[0] != sim.WorkerHeader {
		t.Errorf("default %q is not the simulator's %q", DefaultWorkerHeaders[0], sim.WorkerHeader)
	}
}

func TestWorkerCountsBalance(t *testing.T) {
	tests := []struct {
		name                     string
		counts                   map[string][2]float64
		reqSkew, reqCV, tokSkew  float64
		reqMeasured, tokMeasured bool
	}{
		{"even", map[string][2]float64{"a": {10, 100}, "b": {10, 100}}, 1, 0, 1, true, true},
		{"uneven", map[string][2]float64{"a": {30, 300}, "b": {10, 100}, "c": {20, 0}}, 1.5, 0.408248290463863, 2.25, true, true},
		{"all on one of four", map[string][2]float64{"a": {8, 80}, "b": {}, "c": {}, "d": {}}, 4, 1.7320508075688772, 4, true, true},
		{"nothing served", map[string][2]float64{"a": {}, "b": {}}, 0, 0, 0, false, false},
		{"no workers", nil, 0, 0, 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := WorkerCounts{}
			for name, c := range tt.counts {
				w.Add(name, c[0], 0)
				w.Add(name, 0, c[1])
			}
			b := w.Balance()
			if b.Workers != len(tt.counts) {
				t.Errorf("workers %d", b.Workers)
			}
			if tt.reqMeasured {
				want(t, "request skew", b.RequestSkew, tt.reqSkew)
				want(t, "request cv", b.RequestCV, tt.reqCV)
			} else {
				wantNil(t, "request skew", b.RequestSkew)
				wantNil(t, "request cv", b.RequestCV)
			}
			if tt.tokMeasured {
				want(t, "token skew", b.TokenSkew, tt.tokSkew)
			} else {
				wantNil(t, "token skew", b.TokenSkew)
			}
		})
	}
}

func TestWorkerCountsMerge(t *testing.T) {
	a := WorkerCounts{"w0": {Requests: 1, PromptTokens: 10}}
	a.Merge(WorkerCounts{"w0": {Requests: 2, PromptTokens: 20}, "w1": {Requests: 3}})
	if a["w0"] != (WorkerCount{3, 30}) || a["w1"] != (WorkerCount{3, 0}) {
		t.Errorf("merged %+v", a)
	}
}
