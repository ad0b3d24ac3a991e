package servermetrics

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// counterPage is a vLLM page whose prefix-cache counters are named with the
// given suffix ("_total" or "") and whose request counter is absent.
func counterPage(suffix string, hits, queries float64) []byte {
	return fmt.Appendf(nil, `# TYPE vllm:prefix_cache_hits%[1]s counter
vllm:prefix_cache_hits%[1]s{engine="0"} %[2]v
# TYPE vllm:prefix_cache_queries%[1]s counter
vllm:prefix_cache_queries%[1]s{engine="0"} %[3]v
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 1
`, suffix, hits, queries)
}

// TestCountersWithAndWithoutTotal reads a loopback /metrics server that
// names its counters each way: both give the same hit rate, the source
// names the spelling read, and the absent request counter is named in
// Absent.
func TestCountersWithAndWithoutTotal(t *testing.T) {
	for _, tc := range []struct {
		name, suffix, source string
	}{
		{"with _total", "_total", "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"},
		{"without _total", "", "vllm:prefix_cache_hits / vllm:prefix_cache_queries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pages{start: counterPage(tc.suffix, 100, 400), end: counterPage(tc.suffix, 400, 800)}
			srv := httptest.NewServer(p)
			defer srv.Close()
			s, err := New(Config{Endpoints: []string{srv.URL + "/metrics"}, Timeout: 5 * time.Second}, testLogger(&syncBuffer{}))
			if err != nil {
				t.Fatal(err)
			}
			s.Begin(t.Context())
			p.ended.Store(true)
			w, err := s.End(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want(t, "server_hit_rate", w.Total.HitRate, 300.0/400)
			if got := w.Total.Sources["server_hit_rate"]; got != tc.source {
				t.Errorf("source %q, want %q", got, tc.source)
			}
			if _, ok := w.Absent["server_hit_rate"]; ok {
				t.Errorf("server_hit_rate named absent: %v", w.Absent)
			}
			got := w.Absent["requests"]
			if !strings.Contains(got, "vllm:request_success_total") || !strings.Contains(got, "without _total") {
				t.Errorf("absent requests = %q, want the names looked for", got)
			}
			if _, ok := w.Absent["queue"]; ok {
				t.Errorf("queue named absent though sampled: %v", w.Absent)
			}
		})
	}
}

// TestBothSpellingsOnOnePage reads the "_total" counter when a page has
// both, instead of adding the two up.
func TestBothSpellingsOnOnePage(t *testing.T) {
	page := func(v float64) *Page {
		bare, _, _ := strings.Cut(string(counterPage("", 10*v, 20*v)), "# TYPE vllm:num_requests_waiting")
		b := append(counterPage("_total", v, 2*v), bare...)
		p, err := Parse(strings.NewReader(string(b)), "")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := Snapshot{At: t0, Endpoints: []EndpointPage{{Endpoint: "a", Page: page(1)}}}
	end := Snapshot{At: t0.Add(time.Minute), Endpoints: []EndpointPage{{Endpoint: "a", Page: page(3)}}}
	w := Diff(start, end)
	want(t, "server_hit_rate", w.Total.HitRate, 0.5)
	if got := w.Total.Sources["server_hit_rate"]; got != "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total" {
		t.Errorf("source %q", got)
	}
}

// TestAbsentWhenNothingRead leaves Absent empty when no endpoint was read:
// Missing says why every figure is absent then.
func TestAbsentWhenNothingRead(t *testing.T) {
	start := Snapshot{At: t0, Endpoints: []EndpointPage{{Endpoint: "a", Err: fmt.Errorf("fetch metrics: status 404 Not Found")}}}
	end := Snapshot{At: t0.Add(time.Minute), Endpoints: []EndpointPage{{Endpoint: "a", Err: fmt.Errorf("fetch metrics: status 404 Not Found")}}}
	if w := Diff(start, end); w.Absent != nil {
		t.Errorf("Absent = %v, want nil", w.Absent)
	}
}
