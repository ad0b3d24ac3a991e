package result

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

func ptr(v float64) *float64 { return &v }

// TestServerSection checks the block's server-side section and
// result.json's keys: a measured figure is printed, one not measured is
// "n/a" in the block and null in result.json, never 0; without a scrape
// neither says anything.
func TestServerSection(t *testing.T) {
	w, p := craftedWindow(t)
	f := craftedFacts(p)
	s, err := New(w, f)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if err := WriteBlock(&plain, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "Server-side") {
		t.Error("a run without a scrape prints a server-side section")
	}
	jsonOf := func(s *Summary) map[string]any {
		var b bytes.Buffer
		if err := WriteJSON(&b, s); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, ok := jsonOf(s)["server_hit_rate"]; ok {
		t.Error("result.json has server keys without a scrape")
	}

	s.Server = &servermetrics.Window{
		Total:     servermetrics.Figures{HitRate: ptr(0.5), QueueMax: ptr(3), Preemptions: ptr(0)},
		Endpoints: []servermetrics.EndpointWindow{{Endpoint: "http://a/metrics"}, {Endpoint: "http://b/metrics", Missing: "status 503"}},
		Absent: map[string]string{
			"queue":            "no endpoint exports vllm:num_requests_waiting",
			"spec_accept_rate": "no endpoint exports vllm:spec_decode_num_accepted_tokens_total",
		},
	}
	var b bytes.Buffer
	if err := WriteBlock(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Server KV cache hit rate (%):            50.00",
		"Queued requests, max:                    3 ",
		"Preemptions:                             0 ",
		"Queued requests, mean:                   n/a",
		"Spec. decode acceptance (%):             n/a",
		"Not read (http://b/metrics):             status 503",
		"Absent (queue):                          no endpoint exports vllm:num_requests_waiting",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("block lacks %q:\n%s", want, out)
		}
	}
	m := jsonOf(s)
	if m["server_hit_rate"] != 0.5 || m["preemptions"] != 0.0 {
		t.Errorf("server_hit_rate %v, preemptions %v; want 0.5 and 0", m["server_hit_rate"], m["preemptions"])
	}
	if v, ok := m["queue_mean"]; !ok || v != nil {
		t.Errorf("queue_mean = %v (present %v), want null", v, ok)
	}
	// server_missing names the endpoint not read and the absent metric;
	// the spec-decode counters are optional and not reported.
	wantMissing := map[string]any{
		"http://b/metrics": "status 503",
		"queue":            "no endpoint exports vllm:num_requests_waiting",
	}
	if got, _ := m["server_missing"].(map[string]any); !maps.Equal(got, wantMissing) {
		t.Errorf("server_missing = %v, want %v", got, wantMissing)
	}
}

func TestServerReconciliation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		client   float64
		measured bool
		server   *float64
		want     string
	}{
		{"agree", 0.50, true, ptr(0.52), ""},
		{"not scraped", 0.50, true, nil, ""},
		{"no client figure", 0, false, ptr(0.5), ""},
		{"server higher", 0.40, true, ptr(0.50), "other traffic"},
		{"usage missing", 0, true, ptr(0.50), "prompt-tokens-details"},
		{"server lower", 0.60, true, ptr(0.50), "-10.0 points"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ServerReconciliation(tc.client, tc.measured, tc.server)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want one containing %q", got, tc.want)
			}
		})
	}
}
