package servermetrics

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseFixture(t testing.TB, name string) *Page {
	t.Helper()
	p, err := Parse(bytes.NewReader(readFixture(t, name)), "text/plain; version=0.0.4; charset=utf-8")
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return p
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file string
		want []string // catalogued names the page must hold
		not  []string
	}{
		{"vllm_a_start.txt", []string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "vllm:kv_cache_usage_perc",
			"vllm:num_requests_waiting", "vllm:spec_decode_num_accepted_tokens_total", "vllm:inter_token_latency_seconds", "vllm:request_success_total"},
			[]string{"vllm:gpu_prefix_cache_hit_rate"}},
		{"vllm_v0_start.txt", []string{"vllm:gpu_prefix_cache_hit_rate", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"},
			[]string{"vllm:prefix_cache_hits_total", "vllm:inter_token_latency_seconds", "vllm:kv_cache_usage_perc"}},
		{"sglang_start.txt", []string{"sglang:cached_tokens_total", "sglang:prompt_tokens_total", "sglang:num_queue_reqs", "sglang:token_usage",
			"sglang:cache_hit_rate", "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds"}, nil},
		{"dynamo_frontend_start.txt", []string{"dynamo_frontend_cached_tokens", "dynamo_frontend_input_sequence_tokens",
			"dynamo_frontend_queued_requests", "dynamo_frontend_requests_total", "dynamo_frontend_time_to_first_token_seconds"}, nil},
		{"dynamo_worker_start.txt", []string{"dynamo_component_kvstats_gpu_cache_usage_percent", "dynamo_component_inflight_requests",
			"dynamo_component_requests_total"}, []string{"dynamo_component_uptime_seconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := parseFixture(t, tt.file)
			for _, n := range tt.want {
				if !p.Has(n) {
					t.Errorf("page lacks %s; has %v", n, p.Names())
				}
			}
			for _, n := range tt.not {
				if p.Has(n) {
					t.Errorf("page has %s", n)
				}
			}
			for _, n := range p.Names() {
				if !catalogue[n] {
					t.Errorf("page kept %s, which the catalogue does not read", n)
				}
			}
		})
	}
}

func TestParseSumsNothingAndKeepsSeries(t *testing.T) {
	p := parseFixture(t, "vllm_b_start.txt")
	got := map[string]float64{}
	for _, s := range p.scalars["vllm:prefix_cache_queries_total"] {
		got[labelValue(s.labels, "engine")] = s.v
	}
	if want := map[string]float64{"0": 5000, "1": 3000}; !equalMaps(got, want) {
		t.Errorf("queries per engine %v, want %v", got, want)
	}
	if n := len(p.scalars["vllm:request_success_total"]); n != 6 {
		t.Errorf("request_success series %d, want 6 (2 engines x 3 reasons)", n)
	}
	h := p.hists["vllm:time_to_first_token_seconds"]
	if len(h) != 2 || len(h[0].h.buckets) != 22 {
		t.Fatalf("ttft series %d, buckets %d, want 2 x 22 finite", len(h), len(h[0].h.buckets))
	}
}

func equalMaps(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestParseMalformed(t *testing.T) {
	_, err := Parse(bytes.NewReader(readFixture(t, "malformed.txt")), "text/plain; version=0.0.4")
	var pe expfmt.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v, want an expfmt.ParseError", err)
	}
	if pe.Line != 6 || !strings.Contains(err.Error(), `"zero"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err %q: want one line naming line 6 and the bad value", err)
	}
}

func TestParseOpenMetrics(t *testing.T) {
	p, err := Parse(bytes.NewReader(readFixture(t, "openmetrics.txt")), "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if err != nil {
		t.Fatal(err)
	}
	run := p.scalars["vllm:num_requests_running"]
	if len(run) != 1 || run[0].v != 3 || labelValue(run[0].labels, "model_name") != `a # {b} "c" d` {
		t.Errorf("running %+v", run)
	}
	if h := p.scalars["vllm:prefix_cache_hits_total"]; len(h) != 1 || h[0].v != 250 {
		t.Errorf("hits %+v (timestamp must be dropped)", h)
	}
	if q := p.scalars["vllm:prefix_cache_queries_total"]; len(q) != 1 || q[0].v != 1000 {
		t.Errorf("queries %+v", q)
	}
	ttft := p.hists["vllm:time_to_first_token_seconds"]
	if len(ttft) != 1 || ttft[0].h.count != 3 || ttft[0].h.sum != 0.4 || len(ttft[0].h.buckets) != 2 || ttft[0].h.buckets[0].cum != 2 {
		t.Errorf("ttft %+v (exemplar must be dropped)", ttft)
	}
	// The same page read as the text format fails on the exemplar.
	if _, err := Parse(bytes.NewReader(readFixture(t, "openmetrics.txt")), "text/plain"); err == nil {
		t.Error("OpenMetrics page parsed as text: want an error")
	}
}

func TestFormatOf(t *testing.T) {
	tests := []struct {
		ct      string
		want    format
		wantErr bool
	}{
		{"", formatText, false},
		{"text/plain; version=0.0.4; charset=utf-8", formatText, false},
		{"text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8", formatText, false},
		{"text/plain", formatText, false},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", formatOpenMetrics, false},
		{"application/openmetrics-text; version=0.0.1", formatOpenMetrics, false},
		{"application/openmetrics-text; version=2.0.0", 0, true},
		{"text/html; charset=utf-8", 0, true},
		{"application/json", 0, true},
		{"application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited", 0, true},
		{"garbage;;", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			got, err := formatOf(tt.ct)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("formatOf(%q) = %v, %v", tt.ct, got, err)
			}
			if err != nil && !errors.Is(err, ErrNotMetrics) {
				t.Errorf("err %v is not ErrNotMetrics", err)
			}
		})
	}
}

func TestCapReader(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		cap     int64
		wantErr error
	}{
		{"under", 10, 11, nil},
		{"exactly", 11, 11, nil},
		{"over", 12, 11, ErrTooLarge},
		{"far over", 1 << 20, 1000, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &capReader{r: bytes.NewReader(make([]byte, tt.size)), n: tt.cap}
			b, err := io.ReadAll(r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if int64(len(b)) > tt.cap {
				t.Errorf("read %d bytes past the cap %d", len(b), tt.cap)
			}
		})
	}
}

func TestSampleWithoutTail(t *testing.T) {
	tests := []struct{ in, want string }{
		{`a 1`, `a 1`},
		{`a 1 1700000000.5`, `a 1`},
		{`a{b="c d"} 2 # {t="x"} 1 2`, `a{b="c d"} 2`},
		{`a{b="c\" # {d} 9"} 3 4`, `a{b="c\" # {d} 9"} 3`},
		{`a{b="x\\"} 5 6`, `a{b="x\\"} 5`},
		{"a\t7\t8", "a\t7"},
		{`a`, `a`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := string(sampleWithoutTail([]byte(tt.in))); got != tt.want {
			t.Errorf("sampleWithoutTail(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCatalogNamesSorted(t *testing.T) {
	names := CatalogNames()
	if !slices.IsSorted(names) || len(names) < 30 {
		t.Errorf("CatalogNames: %d names, sorted %v", len(names), slices.IsSorted(names))
	}
}
